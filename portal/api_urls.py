"""/api/v1/: each app contributes its routes."""

from django.urls import include, path

APPS_WITH_ROUTES = (
    "accounts",
    "workloads",
    "fleet",
    "sandboxes",
    "approvals",
    "spend",
    "audit",
    "catalog",
    "deployments",
    "search",
)

urlpatterns = [path("", include(f"portal.{app}.api_urls")) for app in APPS_WITH_ROUTES]
