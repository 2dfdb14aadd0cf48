from django.urls import path
from django.views.generic import TemplateView

urlpatterns = [
    path("", TemplateView.as_view(template_name="base.html"), name="dashboard"),
    path("sandboxes/<int:pk>/", TemplateView.as_view(template_name="base.html"), name="sandbox-detail"),
]
