"""Web routes every kind of workload has; a kind's urls.py adds them under its own prefix."""

from django.urls import URLPattern, path

from portal.workloads.views import action_view, extend_posted, terminate_posted


def action_urls(kind: str, prefix: str) -> list[URLPattern]:
    """`<prefix>/<pk>/extend/` and `<prefix>/<pk>/terminate/`, named `<kind>-extend` and `<kind>-terminate`."""
    return [
        path(f"{prefix}/<int:pk>/extend/", action_view(kind, extend_posted), name=f"{kind}-extend"),
        path(f"{prefix}/<int:pk>/terminate/", action_view(kind, terminate_posted), name=f"{kind}-terminate"),
    ]
