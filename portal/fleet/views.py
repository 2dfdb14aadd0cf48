"""The fleet page: who holds which GPU and slice, for platform admins."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from portal.core.views import login_required, page
from portal.core.web import run_service
from portal.fleet.orphans import orphan_confirm, orphan_keep, orphan_rows
from portal.fleet.selectors import fleet_board, fleet_capacity, fleet_clusters
from portal.fleet.services import fleet_discovery_request, fleet_node_take_over


@login_required
@require_GET
def fleet(request: HttpRequest) -> HttpResponse:
    """Every node and GPU drawn as eight memory slots, refreshed by polling."""
    if not request.user.is_platform_admin:
        raise PermissionDenied("The fleet page is for platform admins.")
    context = {
        "nodes": fleet_board(),
        "capacity": fleet_capacity(),
        "clusters": fleet_clusters(),
        "orphans": orphan_rows(),
    }
    return page(request, "fleet/fleet.html", context, fragment="fleet/partials/fleet_board.html")


@login_required
@require_POST
def discover(request: HttpRequest) -> HttpResponse:
    """Start GPU node discovery on every Kubernetes cluster now, instead of at the next period."""
    clusters = run_service(request, lambda: fleet_discovery_request(user=request.user))
    if clusters is not None:
        if clusters:
            names = ", ".join(c.name for c in clusters)
            messages.success(request, f"Node discovery started on {names}; the page updates as nodes arrive.")
        else:
            messages.info(request, "No Kubernetes cluster is registered: the fleet here is simulated.")
    return redirect("fleet")


@login_required
@require_POST
def node_take_over(request: HttpRequest, pk: int) -> HttpResponse:
    """Let the portal manage the MIG layout of a node found with a layout of its own."""
    if not request.user.is_platform_admin:
        raise PermissionDenied("Only platform admins manage nodes.")
    node = run_service(request, lambda: fleet_node_take_over(user=request.user, node_id=pk))
    if node is not None:
        messages.success(
            request, f"The portal now manages the MIG layout of {node.name}; its MIG GPUs take new slices."
        )
    return redirect("fleet")


@login_required
@require_POST
def orphan_remove(request: HttpRequest, pk: int) -> HttpResponse:
    """An admin confirms that an object the database does not know may be removed (after the
    grace period, by the orphan reconcile)."""
    orphan = run_service(request, lambda: orphan_confirm(user=request.user, orphan_id=pk))
    if orphan is not None:
        messages.success(
            request,
            f"{orphan.name} is removed from {orphan.cluster.name} after the grace period, "
            "unless it is kept before then.",
        )
    return redirect(f"{reverse('fleet')}#orphans")


@login_required
@require_POST
def orphan_keep_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Withdraw a removal confirmed by mistake: the object stays, still reported."""
    orphan = run_service(request, lambda: orphan_keep(user=request.user, orphan_id=pk))
    if orphan is not None:
        messages.success(request, f"{orphan.name} is kept on {orphan.cluster.name}.")
    return redirect(f"{reverse('fleet')}#orphans")
