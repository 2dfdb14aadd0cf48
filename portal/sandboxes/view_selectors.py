"""Reads the sandbox pages need on top of `portal.sandboxes.selectors`: table rows with their
costs, the detail object with everything prefetched, its audit trail and its progress line. The
deployment pages share the scope, the row costs, the audit trail and the progress line."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from portal.accounts.models import User
from portal.approvals.models import Approval
from portal.audit.models import AuditEvent
from portal.fleet.models import Gpu, GpuType
from portal.fleet.selectors import current_prices
from portal.sandboxes.api_selectors import sandbox_detail_for
from portal.sandboxes.models import LIVE_STATES, Image, Sandbox, SandboxState
from portal.sandboxes.selectors import (
    placement_label,
    queue_positions,
    sandbox_cost_so_far,
    sandbox_hourly_cost,
    sandbox_latest_approval,
    sandbox_placement,
    sandboxes_visible_to,
    sandboxes_with_details,
)

SCOPES = ("mine", "team")


@dataclass(frozen=True)
class SandboxRow:
    """One sandbox as a table or the detail page shows it."""

    sandbox: Sandbox
    cost_so_far: Decimal
    hourly_cost: Decimal
    placement: dict | None
    queue_position: int | None
    approval: Approval | None

    @property
    def placement_label(self) -> str:
        return placement_label(self.placement) if self.placement is not None else ""


def in_scope(visible: QuerySet[Sandbox], *, user: User, scope: str) -> QuerySet[Sandbox]:
    """'mine': the user's own; 'team': everything they may see (their teams' as lead, all as admin)."""
    return visible if scope == "team" else visible.filter(owner=user)


def dashboard_sandboxes(*, user: User, scope: str) -> QuerySet[Sandbox]:
    """The dashboard's sandboxes in `scope`, with what their rows show prefetched."""
    return sandboxes_with_details(in_scope(sandboxes_visible_to(user), user=user, scope=scope))


def common_row_fields(workloads: list[Sandbox], *, now: datetime | None = None) -> list[dict[str, Any]]:
    """The row fields every workload has, in the order given, as keyword arguments: cost so far,
    price per hour, queue place (one query for them all) and latest approval."""
    now = now or timezone.now()
    positions = queue_positions(workloads)
    return [
        {
            "cost_so_far": sandbox_cost_so_far(workload, now=now),
            "hourly_cost": sandbox_hourly_cost(workload),
            "queue_position": positions.get(workload.pk),
            "approval": sandbox_latest_approval(workload),
        }
        for workload in workloads
    ]


def sandbox_rows(sandboxes: list[Sandbox], *, now: datetime | None = None) -> list[SandboxRow]:
    """Rows for sandboxes fetched with `sandboxes_with_details`: one more query for queue places."""
    return [
        SandboxRow(sandbox=sandbox, placement=sandbox_placement(sandbox), **costs)
        for sandbox, costs in zip(sandboxes, common_row_fields(sandboxes, now=now), strict=True)
    ]


def any_live(workloads: list[Sandbox]) -> bool:
    return any(workload.state in LIVE_STATES for workload in workloads)


def sandbox_row_for(*, user: User, sandbox_id: int) -> SandboxRow:
    """The detail page's sandbox; NotFound when the user may not see it."""
    return sandbox_rows([sandbox_detail_for(user=user, sandbox_id=sandbox_id)])[0]


def workload_audit_trail(workload: Sandbox) -> list[AuditEvent]:
    """Events about a sandbox or deployment and its approvals, oldest first (the caller may see it)."""
    approval_ids = [str(a.pk) for a in getattr(workload, "all_approvals", [])]
    return list(
        AuditEvent.objects.select_related("actor")
        .filter(
            Q(object_type=workload.kind, object_id=str(workload.pk))
            | Q(object_type="approval", object_id__in=approval_ids)
        )
        .order_by("created_at", "id")
    )


@dataclass(frozen=True)
class Step:
    label: str
    status: str  # done, current, todo, skipped, failed


_STEP_STATES = (
    ("Pending approval", SandboxState.PENDING_APPROVAL),
    ("Queued", SandboxState.QUEUED),
    ("Provisioning", SandboxState.PROVISIONING),
    ("Running", SandboxState.RUNNING),
)
_FAILED_ENDS = (SandboxState.REJECTED, SandboxState.FAILED)


def progress_steps(sandbox: Sandbox, approval: Approval | None) -> list[Step]:
    """The progress line: pending approval -> queued -> provisioning -> running -> ended."""
    order = [state for _label, state in _STEP_STATES]
    state = sandbox.state
    if state in order:
        reached = order.index(state)
    elif state == SandboxState.REJECTED:
        reached = 0
    elif sandbox.started_at is not None or state == SandboxState.TERMINATING:
        reached = len(order)  # ran, now ending or ended
    elif sandbox.node_name:
        reached = 2
    elif sandbox.queued_at is not None:
        reached = 1
    else:
        reached = 0
    approvals = getattr(sandbox, "all_approvals", None)
    if approvals is None:
        approvals = [approval] if approval is not None else []
    needed_approval = any(a.kind == Approval.Kind.CREATE for a in approvals)
    steps = []
    for index, (label, _state) in enumerate(_STEP_STATES):
        if index == 0 and not needed_approval and state != SandboxState.PENDING_APPROVAL:
            steps.append(Step("Approved by policy", "skipped"))
        elif index < reached:
            steps.append(Step(label, "done"))
        elif index == reached and state in order:
            steps.append(Step(label, "current"))
        elif index == reached and state in _FAILED_ENDS:
            steps.append(Step(label, "failed"))
        elif index == reached and state not in order:
            steps.append(Step(label, "done"))  # ended from here, e.g. terminated while queued
        else:
            steps.append(Step(label, "todo"))
    if state == SandboxState.TERMINATING:
        steps.append(Step("Ending", "current"))
    elif state in _FAILED_ENDS:
        steps.append(Step(sandbox.get_state_display().capitalize(), "failed"))
    elif state in (SandboxState.TERMINATED, SandboxState.EXPIRED):
        steps.append(Step(sandbox.get_state_display().capitalize(), "done"))
    else:
        steps.append(Step("Ended", "todo"))
    return steps


@dataclass(frozen=True)
class RequestChoices:
    """What the request form offers: images, and GPU types with their price per GPU-hour and
    whether the fleet has them as whole GPUs, as MIG GPUs, or both."""

    images: list[Image]
    gpu_types: list[GpuType]
    prices: dict[int, Decimal]
    whole_type_ids: frozenset[int] = frozenset()
    mig_type_ids: frozenset[int] = frozenset()


def request_choices() -> RequestChoices:
    shapes = set(Gpu.objects.values_list("gpu_type_id", "mig_enabled").distinct())
    return RequestChoices(
        images=list(Image.objects.order_by("name")),
        gpu_types=list(GpuType.objects.order_by("name")),
        prices=current_prices(),
        whole_type_ids=frozenset(type_id for type_id, mig in shapes if not mig),
        mig_type_ids=frozenset(type_id for type_id, mig in shapes if mig),
    )
