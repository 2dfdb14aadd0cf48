from django.urls import path

from portal.workloads import api, preset_api

urlpatterns = [
    path("me", api.MeView.as_view(), name="api-me"),
    path("presets", preset_api.PresetListView.as_view(), name="api-presets"),
    path("presets/<int:pk>", preset_api.PresetDetailView.as_view(), name="api-preset"),
]
