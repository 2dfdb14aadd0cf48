"""/api/v1/: each app contributes its routes."""

from django.urls import include, path

urlpatterns = [
    path("", include("portal.accounts.api_urls")),
    path("", include("portal.workloads.api_urls")),
    path("", include("portal.fleet.api_urls")),
    path("", include("portal.sandboxes.api_urls")),
    path("", include("portal.approvals.api_urls")),
    path("", include("portal.spend.api_urls")),
    path("", include("portal.audit.api_urls")),
    path("", include("portal.catalog.api_urls")),
    path("", include("portal.deployments.api_urls")),
]
