"""The presets page: your saved request forms and your teams', to use or delete."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from portal.accounts.selectors import lead_team_ids, team_names_by_slug
from portal.core.views import login_required, page
from portal.core.web import run_service
from portal.workloads.presets import preset_delete, preset_summary, presets_visible_to


@login_required
@require_GET
def presets_page(request: HttpRequest) -> HttpResponse:
    presets = list(presets_visible_to(request.user))
    led = set(lead_team_ids(request.user))
    team_names = team_names_by_slug({preset.body.get("team") for preset in presets} - {None})
    rows = [
        {
            "preset": preset,
            "summary": preset_summary(preset.body, team_names),
            "can_delete": preset.owner_id == request.user.pk
            or preset.team_id in led
            or request.user.is_platform_admin,
        }
        for preset in presets
    ]
    return page(request, "workloads/presets.html", {"rows": rows})


@login_required
@require_POST
def preset_delete_posted(request: HttpRequest, pk: int) -> HttpResponse:
    run_service(
        request, lambda: preset_delete(user=request.user, preset_id=pk) or True, success="Preset deleted."
    )
    return redirect("presets")
