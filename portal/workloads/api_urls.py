from django.urls import path

from portal.workloads import api

urlpatterns = [
    path("me", api.MeView.as_view(), name="api-me"),
]
