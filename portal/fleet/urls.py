from django.urls import path

from portal.fleet import views

urlpatterns = [path("fleet/", views.fleet, name="fleet")]
