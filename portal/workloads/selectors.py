"""Reads over workloads (sandboxes and deployments), with visibility by role: researchers their
own, leads their teams', admins all. An object the caller may not see is "not found", never
"forbidden". Also what their rows and pages show: cost, placement, queue place, progress line,
audit trail, and each team's standing for /me."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Prefetch, Q, QuerySet
from django.urls import reverse
from django.utils import timezone

from portal.accounts.models import Membership, Team, User
from portal.accounts.selectors import lead_team_ids, member_team_ids, owner_left_team
from portal.audit.models import AuditEvent
from portal.core.errors import NotFound
from portal.core.selectors import every_word_in, one_visible
from portal.fleet.models import Allocation
from portal.fleet.selectors import price_per_hour
from portal.spend.models import Budget
from portal.spend.selectors import allocation_cost, hourly_rate, to_cents
from portal.workloads.models import LIVE_STATES, Approval, Workload, WorkloadState
from portal.workloads.policy import (
    budget_left,
    fraction_to_decimal,
    quota_left,
    replica_share,
    workload_price_per_hour,
)
from portal.workloads.queue_wait import estimated_waits


def workload_text_match(query: str) -> Q:
    """Workloads whose name or project holds each word of `query`, or whose number within its kind
    it is (`42` or `#42`): what global search and the lists' search box both find."""
    match = every_word_in(query, ("name", "project"))
    number = query.strip().removeprefix("#")
    if number.isascii() and number.isdigit() and len(number) <= 12:  # a number the database's integers hold
        match |= Q(number=int(number))
    return match


PROJECTS_SUGGESTED = 50


def _labels_of(work: QuerySet[Workload], *fields: str) -> QuerySet:
    """The distinct `fields` of the labelled of `work`: on PostgreSQL read from the partial index
    of labelled work by team (or by owner) alone, whatever the number of workloads."""
    return work.exclude(project="").order_by().values_list(*fields, flat=len(fields) == 1).distinct()


def _first_labels(budgeted: list[str], used: Iterable[str]) -> list[str]:
    return sorted(list(dict.fromkeys([*budgeted, *sorted(used)]))[:PROJECTS_SUGGESTED])


def team_projects(
    user: User, team_ids: Sequence[int], *, led: Sequence[int] | None = None
) -> dict[int, list[str]]:
    """The project labels each of the teams `team_ids` uses, as `user` may see them, by team id,
    to suggest as one is typed (a label spelled two ways splits its spend and escapes its
    budget): those of its project budgets (its members read them), then of the work the user may
    see in it (a researcher their own, a lead the team's, an admin all); the first
    PROJECTS_SUGGESTED of those, sorted. `led`: the ids of the teams the user leads, where the
    caller has read them. Three queries at most, whatever the number of teams."""
    if not team_ids:
        return {}
    budgeted: dict[int, list[str]] = {team_id: [] for team_id in team_ids}
    budgets = Budget.objects.filter(kind=Budget.Kind.PROJECT, team_id__in=team_ids).order_by("project")
    for team_id, project in budgets.values_list("team_id", "project"):
        budgeted[team_id].append(project)
    # The teams seen whole and the user's own work elsewhere are read apart (one UNION), not with
    # an OR, so that each part is read from its index alone.
    if user.is_platform_admin:
        led = team_ids
    seen_whole = set(lead_team_ids(user) if led is None else led)
    whole = [team_id for team_id in team_ids if team_id in seen_whole]
    own = [team_id for team_id in team_ids if team_id not in seen_whole]
    reads = []
    if whole:
        reads.append(_labels_of(Workload.objects.filter(team_id__in=whole), "team_id", "project"))
    if own:
        reads.append(_labels_of(Workload.objects.filter(owner=user, team_id__in=own), "team_id", "project"))
    used: dict[int, list[str]] = {team_id: [] for team_id in team_ids}
    for team_id, project in reads[0].union(*reads[1:]) if reads else []:
        used[team_id].append(project)
    return {team_id: _first_labels(budgeted[team_id], used[team_id]) for team_id in team_ids}


def listed_projects(user: User, *, scope: str, led: Sequence[int] | None = None) -> list[str]:
    """The project labels a list's filter suggests: of the user's own work (`mine`), or of their
    teams' as `team_projects` gives them (`team`; an admin's own teams, since every team's
    labels would be read from every labelled workload)."""
    if scope == "mine":
        return _first_labels([], _labels_of(Workload.objects.filter(owner=user), "project"))
    team_ids = sorted(member_team_ids(user))
    labels = {label for found in team_projects(user, team_ids, led=led).values() for label in found}
    return _first_labels([], labels)


def workloads_visible_to(user: User, *, kind: str) -> QuerySet[Workload]:
    """Workloads of one kind that the user may see."""
    workloads = Workload.objects.filter(kind=kind).select_related(
        "team", "owner", "image", "gpu_type", "cluster"
    )
    if user.is_platform_admin:
        return workloads
    return workloads.filter(Q(owner=user) | Q(team_id__in=lead_team_ids(user)))


def workloads_with_details(queryset: QuerySet[Workload]) -> QuerySet[Workload]:
    """Prefetch what a list or detail shows (allocations, the latest approvals, who a sandbox is
    shared with, its datasets) in four queries."""
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
        "shared_with",
        "datasets",  # a sandbox's team datasets (portal.sandboxes.Dataset)
    )


def workload_id_for(*, user: User, kind: str, number: int) -> int:
    """The primary key of the workload of `kind` numbered `number` that the user may see: its
    pages and the API name it by its number, the services by its key. Else NotFound."""
    found = workloads_visible_to(user, kind=kind).filter(number=number).values_list("pk", flat=True).first()
    if found is None:
        raise NotFound(f"No {kind} {number} that you can see.")
    return found


def workload_urls(kind: str, ids: list[str]) -> dict[str, str]:
    """The pages of the workloads of `kind` among `ids` (primary keys, as audit events name
    them), by id: a page goes by the workload's number. One query."""
    keys = {int(i) for i in ids if i.isdigit()}
    found = Workload.objects.filter(kind=kind, pk__in=keys).values_list("pk", "number")
    return {str(pk): reverse(f"{kind}-detail", args=[number]) for pk, number in found}


def workload_numbers(kind: str, ids: list[str]) -> dict[str, str]:
    """The numbers of the workloads of `kind` among `ids` (primary keys, as audit events name
    them), by id. One query."""
    keys = {int(i) for i in ids if i.isdigit()}
    found = Workload.objects.filter(kind=kind, pk__in=keys).values_list("pk", "number")
    return {str(pk): str(number) for pk, number in found}


def workload_pk_of_number(kind: str, number: str) -> str | None:
    """The primary key (as audit events name it) of the workload of `kind` numbered `number`."""
    digits = number.strip().lstrip("#")
    if not digits.isdigit():
        return None
    pk = Workload.objects.filter(kind=kind, number=int(digits)).values_list("pk", flat=True).first()
    return None if pk is None else str(pk)


def workload_get_for(*, user: User, workload_id: int, lock: bool = False, kind: str) -> Workload:
    return one_visible(workloads_visible_to(user, kind=kind), pk=workload_id, what=kind, lock=lock)


def workload_detail_for(*, user: User, workload_id: int, kind: str) -> Workload:
    """One workload of `kind` the user may see, with allocations and approvals prefetched; else NotFound."""
    return one_visible(
        workloads_with_details(workloads_visible_to(user, kind=kind)), pk=workload_id, what=kind
    )


def workload_cost_so_far(workload: Workload, *, now: datetime | None = None) -> Decimal:
    now = now or timezone.now()
    allocations = getattr(workload, "all_allocations", None)
    if allocations is None:
        allocations = list(workload.allocations.all())
    return to_cents(sum((allocation_cost(a, now=now) for a in allocations), Decimal(0)))


def workload_hourly_cost(workload: Workload) -> Decimal:
    allocations = getattr(workload, "all_allocations", None)
    if allocations is None:
        allocations = list(workload.allocations.all())
    return to_cents(hourly_rate(allocations))


def workload_placement(workload: Workload) -> dict | None:
    """The API's placement object: whole GPUs by index, or the slice with its start slot."""
    allocations = getattr(workload, "all_allocations", None)
    if allocations is None:
        allocations = list(workload.allocations.select_related("gpu", "mig_slice"))
    if not allocations or not workload.node_name:
        return None
    # After a requeue a workload has older, released holds too: show the current placement.
    live = [a for a in allocations if a.released_at is None]
    if live:
        allocations = live
    else:
        latest = max(a.started_at for a in allocations)
        allocations = [a for a in allocations if a.started_at == latest]
    if workload.mig_profile:
        allocation = allocations[0]
        return {
            "node": workload.node_name,
            "gpu": allocation.gpu.index,
            "mig_profile": workload.mig_profile,
            "start": allocation.mig_slice.start if allocation.mig_slice else None,
        }
    return {"node": workload.node_name, "gpus": sorted(a.gpu.index for a in allocations)}


def placement_label(placement: dict) -> str:
    """One placement in words: 'gpu-h100-a · GPUs 0, 1' or 'gpu-h100-b · GPU 3 · 1g.10gb at slot 2'."""
    if "gpus" in placement:
        noun = "GPU" if len(placement["gpus"]) == 1 else "GPUs"
        return f"{placement['node']} · {noun} {', '.join(str(i) for i in placement['gpus'])}"
    start = placement.get("start")
    slot = f" at slot {start}" if start is not None else ""
    return f"{placement['node']} · GPU {placement['gpu']} · {placement['mig_profile']}{slot}"


def workload_latest_approval(workload: Workload) -> Approval | None:
    approvals = getattr(workload, "all_approvals", None)
    if approvals is None:
        return workload.approvals.select_related("decided_by").order_by("-created_at", "-id").first()
    return approvals[0] if approvals else None


def queue_positions(workloads: list[Workload]) -> dict[int, int]:
    """1-based place in the queue of each queued workload among those of its GPU type (one query)."""
    queued_types = {s.gpu_type_id for s in workloads if s.state == WorkloadState.QUEUED}
    if not queued_types:
        return {}
    # Scheduled ones join the queue at their start.
    now = timezone.now()
    order = (
        Workload.objects.filter(state=WorkloadState.QUEUED, gpu_type_id__in=queued_types)
        .exclude(start_at__gt=now)
        .order_by("-priority", "queued_at", "pk")
    )
    counters: dict[int, int] = {}
    positions: dict[int, int] = {}
    for workload_id, gpu_type_id in order.values_list("pk", "gpu_type_id"):
        counters[gpu_type_id] = counters.get(gpu_type_id, 0) + 1
        positions[workload_id] = counters[gpu_type_id]
    return positions


def pending_extension(workload: Workload) -> Approval | None:
    """The extension of this workload that waits for a lead, if any."""
    return Approval.objects.filter(
        workload=workload, kind=Approval.Kind.EXTEND, state=Approval.State.PENDING
    ).first()


def in_scope(visible: QuerySet[Workload], *, user: User, scope: str) -> QuerySet[Workload]:
    """'mine': the user's own; 'team': everything they may see (their teams' as lead, all as admin)."""
    return visible if scope == "team" else visible.filter(owner=user)


def common_row_fields(workloads: list[Workload], *, now: datetime | None = None) -> list[dict[str, Any]]:
    """The row fields every workload has, in the order given, as keyword arguments: cost so far,
    price per hour, queue place (one query for them all) and estimated wait (four), latest approval, and the actions that
    can succeed now."""
    now = now or timezone.now()
    positions = queue_positions(workloads)
    waits = estimated_waits(workloads, now=now)
    return [
        {
            "cost_so_far": workload_cost_so_far(workload, now=now),
            "hourly_cost": workload_hourly_cost(workload),
            "queue_position": positions.get(workload.pk),
            "estimated_wait": waits.get(workload.pk),
            "approval": workload_latest_approval(workload),
            "actions": workload_allowed_actions(workload, now=now),
        }
        for workload in workloads
    ]


WAITING_STATES = (WorkloadState.PENDING_APPROVAL, WorkloadState.QUEUED)


@dataclass(frozen=True)
class WaitingCost:
    """What a waiting workload will cost once placed, at today's prices: an hour, and its whole
    lifetime (the most it costs, unless extended), each rounded to the cent as the request's
    estimate was."""

    hourly: Decimal
    total: Decimal


def cost_of_hours(workload: Workload, hours: Decimal, *, price: Decimal) -> Decimal:
    """What `hours` of the workload cost at `price` per GPU-hour, to the cent: its share of the
    price times the hours. The approvals inbox, a waiting workload's page and the messages to its
    deciders all count a request's cost so."""
    return to_cents(workload_price_per_hour(workload=workload, price_per_gpu_hour=price) * hours)


def scale_cost(
    workload: Workload, replicas: int, *, price: Decimal, now: datetime
) -> tuple[Decimal, Decimal]:
    """What scaling a deployment up to `replicas` adds, to the cent, at `price` per GPU-hour: the
    added replicas' share for the hours it has left (its lifetime, while it has not started).
    Returns (hours, cost)."""
    if workload.expires_at is None:
        hours = workload.lifetime_hours
    else:
        seconds = max(Decimal(0), Decimal((workload.expires_at - now).total_seconds()))
        hours = (seconds / Decimal(3600)).quantize(Decimal("0.01"))
    added = replica_share(workload) * max(0, replicas - workload.replicas)
    return hours, to_cents(price * fraction_to_decimal(added, "0.000001") * hours)


def asked_hours(workload: Workload) -> Decimal:
    """The hours a request that has not started asked for: exactly from its start to its end where
    it named both (as its form estimated them, and as they will be billed), else its lifetime
    (kept to the hundredth of an hour)."""
    if workload.start_at is not None and workload.expires_at is not None:
        return Decimal((workload.expires_at - workload.start_at).total_seconds()) / Decimal(3600)
    return workload.lifetime_hours


def waiting_cost(workload: Workload) -> WaitingCost | None:
    """The cost of a workload waiting for a lead or in the queue, an hour and for its lifetime, at
    today's price; None for any other. One query, for the price."""
    if workload.state not in WAITING_STATES:
        return None
    price = price_per_hour(gpu_type=workload.gpu_type)
    return WaitingCost(
        hourly=cost_of_hours(workload, Decimal(1), price=price),
        total=cost_of_hours(workload, asked_hours(workload), price=price),
    )


def workload_overdue(workload: Workload, *, now: datetime | None = None) -> bool:
    """Its time is up but the sweep has not ended it yet: it shows as ending, and costs nothing
    more (billing stops at its expiry)."""
    now = now or timezone.now()
    return (
        workload.expires_at is not None
        and workload.expires_at <= now
        and workload.state
        in (
            WorkloadState.PENDING_APPROVAL,
            WorkloadState.QUEUED,
            WorkloadState.PROVISIONING,
            WorkloadState.RUNNING,
        )
    )


def _pending_kinds(workload: Workload) -> set[str]:
    approvals = getattr(workload, "all_approvals", None)
    if approvals is None:
        approvals = list(workload.approvals.filter(state=Approval.State.PENDING))
    return {a.kind for a in approvals if a.state == Approval.State.PENDING}


def workload_allowed_actions(workload: Workload, *, now: datetime | None = None) -> list[str]:
    """What its owner (or a lead) can do to it now and succeed, by its state: a request that has
    not started can be withdrawn (not terminated: nothing runs or is billed) and extended; a
    placed one extended and terminated (a deployment scaled, a running sandbox restarted); a
    waiting extension or scale withdrawn; one warned of idleness kept; a deployment idle reclaim scaled
    to zero scaled back. Nothing once it is ending, ended, or past its expiry."""
    S = WorkloadState
    if not workload.is_live or workload.state == S.TERMINATING or workload_overdue(workload, now=now):
        return []
    pending = _pending_kinds(workload)
    actions: list[str] = []
    if workload.state in (S.PENDING_APPROVAL, S.QUEUED):
        actions.append("withdraw")
    if Approval.Kind.EXTEND in pending:
        actions.append("withdraw_extension")
    else:
        actions.append("extend")
    if workload.state in (S.PROVISIONING, S.RUNNING):
        if workload.kind == "deployment":
            actions.append("scale")
            if Approval.Kind.SCALE in pending:
                actions.append("withdraw_scale")
        elif workload.state == S.RUNNING:
            actions.append("restart")
        actions.append("terminate")
    if workload.state == S.RUNNING and workload.idle_warned_at is not None:
        actions.append("keep")
    if workload.state == S.RUNNING and not workload.replicas and workload.idle_parked_replicas:
        actions.append("scale_back")
    return actions


# what spends only ("scale" stays: down to fewer replicas it still may)
SPENDING_ACTIONS = frozenset({"extend", "keep", "restart", "scale_back"})


def workload_actions_for(
    actions: list[str], *, user: User, workload: Workload, team_ids: frozenset[int] | None = None
) -> list[str]:
    """`workload_allowed_actions` as `user` may take them: an owner no longer in the team (and no
    admin) may end, withdraw and scale down their work there, but not spend more of the team's
    money on it (`refuse_owner_who_left`), so what only spends is not offered to them.
    `team_ids`: the teams the user is in, where the caller has read them (a list, once)."""
    if not owner_left_team(
        user=user, team_id=workload.team_id, owner_id=workload.owner_id, team_ids=team_ids
    ):
        return actions
    return [action for action in actions if action not in SPENDING_ACTIONS]


def any_live(workloads: list[Workload]) -> bool:
    return any(workload.state in LIVE_STATES for workload in workloads)


def workload_audit_trail(workload: Workload) -> QuerySet[AuditEvent]:
    """Events about a sandbox or deployment and its approvals, oldest first (the caller may see
    it); read when iterated, so the API reads one page of a long trail."""
    approval_ids = [str(a.pk) for a in getattr(workload, "all_approvals", [])]
    return (
        AuditEvent.objects.select_related("actor")
        .filter(
            Q(object_type=workload.kind, object_id=str(workload.pk))
            | Q(object_type="approval", object_id__in=approval_ids)
        )
        .order_by("created_at", "id")
    )


REQUEST_DECISIONS = ("approval.approve", "approval.reject", "approval.withdrawn")


def workload_page_trail(workload: Workload) -> QuerySet[AuditEvent]:
    """The audit trail as its page shows it: without the decision events of its request's own
    approval, which say again what the workload's events say (rejected, approved, withdrawn);
    an extension's or a scale's decisions stay, having no other line."""
    requests = [str(a.pk) for a in getattr(workload, "all_approvals", []) if a.kind == Approval.Kind.CREATE]
    return workload_audit_trail(workload).exclude(
        object_type="approval", object_id__in=requests, action__in=REQUEST_DECISIONS
    )


@dataclass(frozen=True)
class Step:
    label: str
    status: str  # done, current, todo, skipped, failed


_STEP_STATES = (
    ("Pending approval", WorkloadState.PENDING_APPROVAL),
    ("Queued", WorkloadState.QUEUED),
    ("Provisioning", WorkloadState.PROVISIONING),
    ("Running", WorkloadState.RUNNING),
)


_FAILED_ENDS = (WorkloadState.REJECTED, WorkloadState.FAILED)


def progress_steps(workload: Workload, approval: Approval | None) -> list[Step]:
    """The progress line: pending approval -> queued -> provisioning -> running -> ended."""
    order = [state for _label, state in _STEP_STATES]
    state = workload.shown_state  # a running deployment being rescaled still runs
    if state in order:
        reached = order.index(state)
    elif state == WorkloadState.REJECTED:
        reached = 0
    elif workload.started_at is not None or state == WorkloadState.TERMINATING:
        reached = len(order)  # ran, now ending or ended
    elif workload.node_name:
        reached = 2
    elif workload.queued_at is not None:
        reached = 1
    else:
        reached = 0
    approvals = getattr(workload, "all_approvals", None)
    if approvals is None:
        approvals = [approval] if approval is not None else []
    needed_approval = any(a.kind == Approval.Kind.CREATE for a in approvals)
    steps = []
    for index, (label, _state) in enumerate(_STEP_STATES):
        if index == 0 and not needed_approval and state != WorkloadState.PENDING_APPROVAL:
            steps.append(Step("Approved by policy", "skipped"))
        elif index < reached:  # past it: a lead or an admin approved it (or it needed none, above)
            steps.append(Step("Approved" if index == 0 else label, "done"))
        elif index == reached and state in order:
            steps.append(Step(label, "current"))
        elif index == reached and state in _FAILED_ENDS:
            steps.append(Step(label, "failed"))
        elif index == reached and state not in order:
            steps.append(Step(label, "done"))  # ended from here, e.g. terminated while queued
        else:
            steps.append(Step(label, "todo"))
    if state == WorkloadState.TERMINATING:
        steps.append(Step("Ending", "current"))
    elif state in _FAILED_ENDS:
        steps.append(Step(workload.get_state_display().capitalize(), "failed"))
    elif state in (WorkloadState.TERMINATED, WorkloadState.EXPIRED) and workload.never_placed:
        label = "Withdrawn" if workload.withdrawn else f"{workload.get_state_display()} before it ran"
        steps.append(Step(label.capitalize(), "done"))
    elif state in (WorkloadState.TERMINATED, WorkloadState.EXPIRED):
        steps.append(Step(workload.get_state_display().capitalize(), "done"))
    else:
        steps.append(Step("Ended", "todo"))
    return steps


@dataclass(frozen=True)
class TeamStanding:
    team: Team
    role: str
    quota_total: Decimal
    quota_used: Decimal
    quota_left: Decimal
    budget_monthly: Decimal
    budget_spent: Decimal
    budget_left: Decimal
    projects: list[str]


def user_standing(user: User) -> list[TeamStanding]:
    """Each of the user's teams with the role held, GPU equivalents committed and money spent
    this month (its quota and month's spend read for each team), and the project labels it uses
    as the user may see them (`team_projects`)."""
    now = timezone.now()
    standings = []
    memberships = list(Membership.objects.filter(user=user).select_related("team").order_by("team__slug"))
    projects = team_projects(user, [membership.team_id for membership in memberships])
    for membership in memberships:
        team = membership.team
        left = quota_left(team=team)
        money_left = budget_left(team=team, now=now)
        standings.append(
            TeamStanding(
                team=team,
                role=membership.role,
                quota_total=team.quota_gpus,
                quota_used=team.quota_gpus - left,
                quota_left=left,
                budget_monthly=team.monthly_budget,
                budget_spent=team.monthly_budget - money_left,
                budget_left=money_left,
                projects=projects[team.pk],
            )
        )
    return standings
