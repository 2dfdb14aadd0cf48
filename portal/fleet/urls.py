from django.urls import path

from portal.fleet import views

urlpatterns = [
    path("fleet/", views.fleet, name="fleet"),
    path("fleet/discover/", views.discover, name="fleet-discover"),
]
