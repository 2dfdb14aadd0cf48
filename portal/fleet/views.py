"""The fleet page: who holds which GPU and slice, for platform admins."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from portal.core.views import login_required, page
from portal.fleet.view_selectors import fleet_board, fleet_capacity


@login_required
@require_GET
def fleet(request: HttpRequest) -> HttpResponse:
    """Every node and GPU drawn as eight memory slots, refreshed by polling."""
    if not request.user.is_platform_admin:
        raise PermissionDenied("The fleet page is for platform admins.")
    context = {"nodes": fleet_board(), "capacity": fleet_capacity()}
    return page(request, "fleet/fleet.html", context, fragment="fleet/partials/fleet_board.html")
