from django.urls import path

from portal.fleet import admin_api, api

urlpatterns = [
    path("gpu-types", api.GpuTypeListView.as_view(), name="api-gpu-types"),
    path("fleet/gpus", api.FleetGpuListView.as_view(), name="api-fleet-gpus"),
    path("fleet/nodes", admin_api.FleetNodeListView.as_view(), name="api-fleet-nodes"),
    path(
        "fleet/nodes/<int:pk>/take-over",
        admin_api.FleetNodeTakeOverView.as_view(),
        name="api-fleet-node-take-over",
    ),
    path("fleet/discover", admin_api.FleetDiscoverView.as_view(), name="api-fleet-discover"),
    path("fleet/orphans", admin_api.FleetOrphanListView.as_view(), name="api-fleet-orphans"),
    path(
        "fleet/orphans/<int:pk>/remove",
        admin_api.FleetOrphanRemoveView.as_view(),
        name="api-fleet-orphan-remove",
    ),
    path(
        "fleet/orphans/<int:pk>/keep", admin_api.FleetOrphanKeepView.as_view(), name="api-fleet-orphan-keep"
    ),
    path("telemetry/readings", api.TelemetryReadingsView.as_view(), name="api-telemetry-readings"),
]
