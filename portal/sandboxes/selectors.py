"""Reads over sandboxes, with visibility by role: researchers their own, leads their teams',
admins all. An object the caller may not see is "not found", never "forbidden"."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.db.models import Prefetch, Q, QuerySet
from django.utils import timezone

from portal.accounts.models import User
from portal.accounts.selectors import lead_team_ids
from portal.approvals.models import Approval
from portal.core.errors import NotFound
from portal.fleet.models import Allocation
from portal.sandboxes.models import Sandbox, SandboxState, WorkloadKind
from portal.spend.selectors import allocation_cost, hourly_rate, to_cents


def sandboxes_visible_to(user: User, *, kind: str = WorkloadKind.SANDBOX) -> QuerySet[Sandbox]:
    """Workloads of one kind (sandboxes unless told otherwise) that the user may see."""
    sandboxes = Sandbox.objects.filter(kind=kind).select_related(
        "team", "owner", "image", "gpu_type", "cluster"
    )
    if user.is_platform_admin:
        return sandboxes
    return sandboxes.filter(Q(owner=user) | Q(team_id__in=lead_team_ids(user)))


def sandboxes_with_details(queryset: QuerySet[Sandbox]) -> QuerySet[Sandbox]:
    """Prefetch what a list or detail shows (allocations, the latest approvals) in two queries."""
    return queryset.prefetch_related(
        Prefetch(
            "allocations",
            queryset=Allocation.objects.select_related("gpu", "mig_slice").order_by("gpu__index"),
            to_attr="all_allocations",
        ),
        Prefetch(
            "approvals",
            queryset=Approval.objects.select_related("decided_by").order_by("-created_at", "-id"),
            to_attr="all_approvals",
        ),
    )


def sandbox_get_for(
    *, user: User, sandbox_id: int, lock: bool = False, kind: str = WorkloadKind.SANDBOX
) -> Sandbox:
    queryset = sandboxes_visible_to(user, kind=kind)
    if lock:
        queryset = queryset.select_for_update(of=("self",))
    sandbox = queryset.filter(pk=sandbox_id).first()
    if sandbox is None:
        raise NotFound(f"No {kind} {sandbox_id} that you can see.")
    return sandbox


def sandbox_cost_so_far(sandbox: Sandbox, *, now: datetime | None = None) -> Decimal:
    now = now or timezone.now()
    allocations = getattr(sandbox, "all_allocations", None)
    if allocations is None:
        allocations = list(sandbox.allocations.all())
    return to_cents(sum((allocation_cost(a, now=now) for a in allocations), Decimal(0)))


def sandbox_hourly_cost(sandbox: Sandbox) -> Decimal:
    allocations = getattr(sandbox, "all_allocations", None)
    if allocations is None:
        allocations = list(sandbox.allocations.all())
    return to_cents(hourly_rate(allocations))


def sandbox_placement(sandbox: Sandbox) -> dict | None:
    """The API's placement object: whole GPUs by index, or the slice with its start slot."""
    allocations = getattr(sandbox, "all_allocations", None)
    if allocations is None:
        allocations = list(sandbox.allocations.select_related("gpu", "mig_slice"))
    if not allocations or not sandbox.node_name:
        return None
    # After a requeue a sandbox has older, released holds too: show the current placement.
    live = [a for a in allocations if a.released_at is None]
    if live:
        allocations = live
    else:
        latest = max(a.started_at for a in allocations)
        allocations = [a for a in allocations if a.started_at == latest]
    if sandbox.mig_profile:
        allocation = allocations[0]
        return {
            "node": sandbox.node_name,
            "gpu": allocation.gpu.index,
            "mig_profile": sandbox.mig_profile,
            "start": allocation.mig_slice.start if allocation.mig_slice else None,
        }
    return {"node": sandbox.node_name, "gpus": sorted(a.gpu.index for a in allocations)}


def placement_label(placement: dict) -> str:
    """One placement in words: 'gpu-h100-a · GPUs 0, 1' or 'gpu-h100-b · GPU 3 · 1g.10gb at slot 2'."""
    if "gpus" in placement:
        noun = "GPU" if len(placement["gpus"]) == 1 else "GPUs"
        return f"{placement['node']} · {noun} {', '.join(str(i) for i in placement['gpus'])}"
    start = placement.get("start")
    slot = f" at slot {start}" if start is not None else ""
    return f"{placement['node']} · GPU {placement['gpu']} · {placement['mig_profile']}{slot}"


def sandbox_latest_approval(sandbox: Sandbox) -> Approval | None:
    approvals = getattr(sandbox, "all_approvals", None)
    if approvals is None:
        return sandbox.approvals.select_related("decided_by").order_by("-created_at", "-id").first()
    return approvals[0] if approvals else None


def queue_positions(sandboxes: list[Sandbox]) -> dict[int, int]:
    """1-based place in the queue of each queued sandbox among those of its GPU type (one query)."""
    queued_types = {s.gpu_type_id for s in sandboxes if s.state == SandboxState.QUEUED}
    if not queued_types:
        return {}
    order = Sandbox.objects.filter(state=SandboxState.QUEUED, gpu_type_id__in=queued_types).order_by(
        "-priority", "queued_at", "pk"
    )
    counters: dict[int, int] = {}
    positions: dict[int, int] = {}
    for sandbox_id, gpu_type_id in order.values_list("pk", "gpu_type_id"):
        counters[gpu_type_id] = counters.get(gpu_type_id, 0) + 1
        positions[sandbox_id] = counters[gpu_type_id]
    return positions


def pending_extension(sandbox: Sandbox) -> Approval | None:
    """The extension of this workload that waits for a lead, if any."""
    return Approval.objects.filter(
        sandbox=sandbox, kind=Approval.Kind.EXTEND, state=Approval.State.PENDING
    ).first()
