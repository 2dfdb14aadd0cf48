from django.urls import path

from portal.fleet import api

urlpatterns = [
    path("gpu-types", api.GpuTypeListView.as_view(), name="api-gpu-types"),
    path("fleet/gpus", api.FleetGpuListView.as_view(), name="api-fleet-gpus"),
    path("telemetry/readings", api.TelemetryReadingsView.as_view(), name="api-telemetry-readings"),
]
