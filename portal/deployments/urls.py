from django.urls import path
from django.views.generic import TemplateView

urlpatterns = [
    path("deployments/", TemplateView.as_view(template_name="base.html"), name="deployments"),
    path("deployments/<int:pk>/", TemplateView.as_view(template_name="base.html"), name="deployment-detail"),
]
