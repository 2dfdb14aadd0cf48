"""Web routes every kind of workload has; a kind's urls.py adds them under its own prefix."""

from django.urls import URLPattern, path

from portal.workloads.preset_views import preset_delete_posted, presets_page
from portal.workloads.views import (
    action_view,
    extend_posted,
    extension_withdraw_posted,
    my_teams,
    terminate_posted,
    withdraw_posted,
)


def action_urls(kind: str, prefix: str) -> list[URLPattern]:
    """`<prefix>/<number>/extend/`, `.../terminate/`, `.../withdraw/` and `.../extension/withdraw/`,
    named `<kind>-extend`, `<kind>-terminate`, `<kind>-withdraw` and `<kind>-extension-withdraw`."""
    return [
        path(f"{prefix}/<int:number>/extend/", action_view(kind, extend_posted), name=f"{kind}-extend"),
        path(
            f"{prefix}/<int:number>/terminate/", action_view(kind, terminate_posted), name=f"{kind}-terminate"
        ),
        path(f"{prefix}/<int:number>/withdraw/", action_view(kind, withdraw_posted), name=f"{kind}-withdraw"),
        path(
            f"{prefix}/<int:number>/extension/withdraw/",
            action_view(kind, extension_withdraw_posted),
            name=f"{kind}-extension-withdraw",
        ),
    ]


urlpatterns = [
    path("teams/", my_teams, name="my-teams"),
    path("presets/", presets_page, name="presets"),
    path("presets/<int:pk>/delete/", preset_delete_posted, name="preset-delete"),
]
