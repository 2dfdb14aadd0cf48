"""The web UI: each app contributes its pages."""

from django.urls import include, path

urlpatterns = [
    path("", include("portal.accounts.urls")),
    path("", include("portal.sandboxes.urls")),
    path("", include("portal.approvals.urls")),
    path("", include("portal.spend.urls")),
    path("", include("portal.fleet.urls")),
    path("", include("portal.audit.urls")),
    path("", include("portal.catalog.urls")),
    path("", include("portal.deployments.urls")),
]
