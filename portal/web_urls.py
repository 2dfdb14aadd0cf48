"""The web UI: each app contributes its pages."""

from django.urls import include, path

APPS_WITH_PAGES = (
    "accounts",
    "sandboxes",
    "approvals",
    "spend",
    "fleet",
    "audit",
    "catalog",
    "deployments",
    "workloads",
    "search",
)

urlpatterns = [path("", include(f"portal.{app}.urls")) for app in APPS_WITH_PAGES]
