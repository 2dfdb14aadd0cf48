from django.urls import path

from portal.spend import api

urlpatterns = [path("spend", api.SpendView.as_view(), name="api-spend")]
