from django.urls import path
from django.views.generic import TemplateView

urlpatterns = [path("approvals/", TemplateView.as_view(template_name="base.html"), name="approvals")]
