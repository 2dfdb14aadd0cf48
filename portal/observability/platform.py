"""The platform's slower figures for /metrics, over sliding windows of the last hour or day: MIG
layout changes waiting and failed, how long workloads took to run, why they failed, how long
leads took to decide, GPU-hours spent idle, and each team's budget against its month-to-date
spend. A grouped query or two a figure, whatever the fleet's size; labels stay bounded (kinds,
states, reasons, quantiles, windows, teams).

Windowed figures are gauges with a `window` label ("1h", "24h"), not counters: they are
recomputed from the database at each scrape and go down as old events leave the window.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta

from django.db.models import Count, F, Min, Q
from prometheus_client.core import GaugeMetricFamily

from portal.accounts.models import Team
from portal.audit.models import AuditEvent
from portal.fleet.models import MigSlice, Node
from portal.spend.selectors import idle_gpu_hours_by_team, month_elapsed, teams_month_spend
from portal.workloads.models import Approval, Workload, WorkloadKind, WorkloadState

DAY, HOUR = timedelta(days=1), timedelta(hours=1)
WINDOWS = (("1h", HOUR), ("24h", DAY))
QUANTILES = (0.5, 0.9, 1.0)

# Why a workload failed, from its message: the first category whose words it holds. The
# provisioning deadline's message quotes the cluster's last word, so it is tried first.
FAILURE_REASONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("deadline", ("provisioning deadline",)),
    ("mig_layout", ("mig layout", "mig reconfiguration")),
    ("image_pull", ("image pull", "pull image", "errimagepull")),
    ("oom", ("oom",)),
    ("crash", ("crashing", "could not start", "stopped", "process exited")),
    ("node_gone", ("gone from the cluster",)),
    ("unschedulable", ("unschedulable", "insufficient", "scheduled")),
    ("cluster_refused", ("rejected", "may not", "forbidden", "cannot be built", "cannot change", "refused")),
    ("cluster_unreachable", ("could not reach", "failed to", "timed out", "no answer")),
    ("no_cluster", ("no cluster",)),
)
OTHER = "other"


def failure_reason(message: str) -> str:
    """The bounded category of a failure message (`other` when none fits)."""
    text = message.lower()
    for reason, words in FAILURE_REASONS:
        if any(word in text for word in words):
            return reason
    return OTHER


def quantile(values: list[float], q: float) -> float:
    """The nearest-rank quantile of `values` (not empty): 1.0 is the largest."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _quantiles(family: GaugeMetricFamily, labels: list[str], values: list[float]) -> None:
    for q in QUANTILES:
        family.add_metric([*labels, f"{q:g}"], quantile(values, q))


def mig_families(now: datetime) -> Iterator[GaugeMetricFamily]:
    pending = GaugeMetricFamily(
        "gpu_portal_mig_layout_changes_pending",
        "Nodes whose intended MIG layout the cluster has not reported applied yet.",
    )
    failed = GaugeMetricFamily(
        "gpu_portal_mig_layout_changes_failed",
        "Nodes whose intended MIG layout the MIG manager reported failed (retried after a back-off).",
    )
    oldest = GaugeMetricFamily(
        "gpu_portal_mig_layout_change_oldest_seconds",
        "How long the oldest MIG slice still being cut has waited for its node's layout change (0: none).",
    )
    nodes = Node.objects.exclude(mig_layout_wanted=F("mig_layout_applied")).aggregate(
        pending=Count("id"),
        failed=Count(
            "id", filter=Q(mig_config_state="failed", mig_layout_failed_version=F("mig_layout_wanted"))
        ),
    )
    first = MigSlice.objects.filter(state=MigSlice.State.CREATING).aggregate(first=Min("created_at"))["first"]
    pending.add_metric([], nodes["pending"])
    failed.add_metric([], nodes["failed"])
    oldest.add_metric([], max(0.0, (now - first).total_seconds()) if first else 0)
    yield from (pending, failed, oldest)


def provisioning_families(now: datetime) -> Iterator[GaugeMetricFamily]:
    """How long the workloads that started running in the last day took, from their request,
    from being queued (approved, or at once within policy) and from being placed."""
    started = GaugeMetricFamily(
        "gpu_portal_workloads_started",
        "Workloads that reached running within the window (a rescaled deployment counts again).",
        labels=["kind", "window"],
    )
    took = GaugeMetricFamily(
        "gpu_portal_time_to_running_seconds",
        "How long workloads that reached running in the window took, from `since` (request, queued, "
        "placed), as nearest-rank quantiles (1: the longest).",
        labels=["kind", "since", "window", "quantile"],
    )
    rows = list(
        Workload.objects.filter(started_at__gte=now - DAY).values_list(
            "pk", "kind", "created_at", "queued_at", "provisioning_since", "started_at"
        )
    )
    deployments = [str(pk) for pk, kind, *_ in rows if kind == WorkloadKind.DEPLOYMENT]
    # A deployment scaled since its request ran again from its rescale: its started_at is that run's.
    rescaled = (
        set(
            AuditEvent.objects.filter(
                action="deployment.scaled", object_type="deployment", object_id__in=deployments
            ).values_list("object_id", flat=True)
        )
        if deployments
        else set()
    )
    counts: dict[str, int] = defaultdict(int)
    spans: dict[tuple[str, str], list[float]] = defaultdict(list)
    for pk, kind, created, queued, placed, running in rows:
        counts[kind] += 1
        if placed is not None and placed <= running:
            spans[(kind, "placed")].append((running - placed).total_seconds())
        if str(pk) in rescaled:
            continue
        spans[(kind, "request")].append((running - created).total_seconds())
        if queued is not None and queued <= running:
            spans[(kind, "queued")].append((running - queued).total_seconds())
    for kind, n in sorted(counts.items()):
        started.add_metric([kind, "24h"], n)
    for (kind, since), values in sorted(spans.items()):
        _quantiles(took, [kind, since, "24h"], values)
    yield from (started, took)


def failure_families(now: datetime) -> Iterator[GaugeMetricFamily]:
    failures = GaugeMetricFamily(
        "gpu_portal_workload_failures",
        "Workloads that failed within the window, by kind, stage (provisioning: it never ran; running: "
        "after it had run) and reason.",
        labels=["kind", "stage", "reason", "window"],
    )
    failing = Q(state=WorkloadState.FAILED) | Q(
        state=WorkloadState.TERMINATING, ending_as=WorkloadState.FAILED
    )
    counts: dict[tuple[str, str, str, str], int] = defaultdict(int)
    for kind, started, message, ended in Workload.objects.filter(
        failing, ended_at__gte=now - DAY
    ).values_list("kind", "started_at", "message", "ended_at"):
        stage = "provisioning" if started is None else "running"
        reason = failure_reason(message)
        for window, span in WINDOWS:
            if ended >= now - span:
                counts[(kind, stage, reason, window)] += 1
    for labels, n in sorted(counts.items()):
        failures.add_metric(list(labels), n)
    yield failures


def approval_families(now: datetime) -> Iterator[GaugeMetricFamily]:
    decided = GaugeMetricFamily(
        "gpu_portal_approvals_decided",
        "Approvals a lead decided within the window, by kind and decision.",
        labels=["kind", "state", "window"],
    )
    took = GaugeMetricFamily(
        "gpu_portal_approval_decision_seconds",
        "How long leads took to decide the approvals decided in the window, as nearest-rank quantiles.",
        labels=["kind", "window", "quantile"],
    )
    counts: dict[tuple[str, str], int] = defaultdict(int)
    spans: dict[str, list[float]] = defaultdict(list)
    for kind, state, created, decided_at in Approval.objects.filter(
        decided_at__gte=now - DAY, state__in=(Approval.State.APPROVED, Approval.State.REJECTED)
    ).values_list("kind", "state", "created_at", "decided_at"):
        counts[(kind, state)] += 1
        spans[kind].append(max(0.0, (decided_at - created).total_seconds()))
    for (kind, state), n in sorted(counts.items()):
        decided.add_metric([kind, state, "24h"], n)
    for kind, values in sorted(spans.items()):
        _quantiles(took, [kind, "24h"], values)
    yield from (decided, took)


def idle_families(now: datetime) -> Iterator[GaugeMetricFamily]:
    idle = GaugeMetricFamily(
        "gpu_portal_idle_gpu_hours",
        "GPU-hours held in the window while the node agents read the GPU idle (under the team's "
        "idle threshold), by team; a MIG slice counts its share of a GPU.",
        labels=["team", "window"],
    )
    for team, hours in sorted(idle_gpu_hours_by_team(start=now - DAY, end=now).items()):
        idle.add_metric([team, "24h"], float(hours))
    yield idle


def budget_families(now: datetime) -> Iterator[GaugeMetricFamily]:
    budget = GaugeMetricFamily(
        "gpu_portal_team_budget_dollars", "The team's monthly budget.", labels=["team"]
    )
    spent = GaugeMetricFamily(
        "gpu_portal_team_spend_month_to_date_dollars",
        "What the team has spent since the first of the month (UTC), GPUs and storage.",
        labels=["team"],
    )
    elapsed = GaugeMetricFamily(
        "gpu_portal_month_elapsed_ratio", "How much of the month (UTC) has passed, 0 to 1."
    )
    spend = teams_month_spend(now=now)
    for team_id, slug, monthly in Team.objects.order_by("slug").values_list("pk", "slug", "monthly_budget"):
        budget.add_metric([slug], float(monthly))
        spent.add_metric([slug], float(spend.get(team_id, 0)))
    elapsed.add_metric([], float(month_elapsed(now)))
    yield from (budget, spent, elapsed)


def platform_families(now: datetime) -> Iterator[GaugeMetricFamily]:
    yield from mig_families(now)
    yield from provisioning_families(now)
    yield from failure_families(now)
    yield from approval_families(now)
    yield from idle_families(now)
    yield from budget_families(now)
