from django.urls import path

from portal.observability import views

urlpatterns = [path("metrics", views.metrics, name="metrics")]
