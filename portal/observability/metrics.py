"""The platform's metrics for Prometheus, computed when scraped from what the database holds:
workloads by state, the queue, GPUs and MIG slices, approvals waiting, spend rate, GPU health
and utilization, expiry lag, node agents' silence; model serving (observability.serving); MIG
changes, time to running, failures, decisions, idle GPU-hours and budgets (observability.platform).
A bounded number of grouped queries per scrape, whatever the fleet's size; every label has
bounded values (states, kinds, GPU types, profiles, teams, nodes, models, runtimes, reasons),
never a workload or user id."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal

from django.db.models import Count, Max, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from portal.fleet.models import Allocation, Gpu, GpuMinute, MigSlice, Node
from portal.observability.platform import platform_families
from portal.observability.serving import serving_families
from portal.workloads.models import Approval, Workload, WorkloadState


class PortalCollector(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = timezone.now()
        workloads = GaugeMetricFamily(
            "gpu_portal_workloads", "Workloads by kind and state.", labels=["kind", "state"]
        )
        for row in Workload.objects.values("kind", "state").annotate(n=Count("id")):
            workloads.add_metric([row["kind"], row["state"]], row["n"])
        yield workloads

        depth = GaugeMetricFamily(
            "gpu_portal_queue_depth", "Requests waiting for capacity.", labels=["gpu_type"]
        )
        wait = GaugeMetricFamily(
            "gpu_portal_queue_oldest_wait_seconds",
            "How long the oldest queued request has waited.",
            labels=["gpu_type"],
        )
        for row in (
            Workload.objects.filter(state=WorkloadState.QUEUED)
            .values("gpu_type__slug")
            .annotate(n=Count("id"), oldest=Min("queued_at"))
        ):
            depth.add_metric([row["gpu_type__slug"]], row["n"])
            wait.add_metric(
                [row["gpu_type__slug"]], (now - row["oldest"]).total_seconds() if row["oldest"] else 0
            )
        yield depth
        yield wait

        gpus = GaugeMetricFamily(
            "gpu_portal_gpus", "GPUs by type and use: whole_held, mig, free.", labels=["gpu_type", "use"]
        )
        held = set(
            Allocation.objects.filter(released_at__isnull=True, mig_profile="").values_list(
                "gpu_id", flat=True
            )
        )
        counts: dict[tuple[str, str], int] = {}
        for gpu_id, slug, mig in Gpu.objects.values_list("pk", "gpu_type__slug", "mig_enabled"):
            use = "mig" if mig else ("whole_held" if gpu_id in held else "free")
            counts[(slug, use)] = counts.get((slug, use), 0) + 1
        for (slug, use), n in sorted(counts.items()):
            gpus.add_metric([slug, use], n)
        yield gpus

        slices = GaugeMetricFamily(
            "gpu_portal_mig_slices",
            "MIG slices by profile and state: held, free, creating.",
            labels=["profile", "state"],
        )
        held_slices = set(
            Allocation.objects.filter(released_at__isnull=True, mig_slice__isnull=False).values_list(
                "mig_slice_id", flat=True
            )
        )
        slice_counts: dict[tuple[str, str], int] = {}
        for pk, profile, state in MigSlice.objects.values_list("pk", "profile", "state"):
            kind = (
                "creating" if state == MigSlice.State.CREATING else ("held" if pk in held_slices else "free")
            )
            slice_counts[(profile, kind)] = slice_counts.get((profile, kind), 0) + 1
        for (profile, kind), n in sorted(slice_counts.items()):
            slices.add_metric([profile, kind], n)
        yield slices

        unhealthy = GaugeMetricFamily(
            "gpu_portal_gpus_unhealthy",
            "GPUs the node agents report lost or with XID errors.",
            labels=["health"],
        )
        for row in Gpu.objects.exclude(health="ok").values("health").annotate(n=Count("id")):
            unhealthy.add_metric([row["health"]], row["n"])
        yield unhealthy

        silent = GaugeMetricFamily(
            "gpu_portal_node_agent_last_seen_seconds",
            "Seconds since a node's agent last reported.",
            labels=["node"],
        )
        for row in Node.objects.values("name").annotate(seen=Max("gpus__seen_at")):
            if row["seen"] is not None:
                silent.add_metric([row["name"]], (now - row["seen"]).total_seconds())
        yield silent

        approvals = GaugeMetricFamily("gpu_portal_approvals_pending", "Requests waiting for a lead.")
        oldest = GaugeMetricFamily(
            "gpu_portal_approval_oldest_wait_seconds", "The oldest pending approval's wait."
        )
        pending = Approval.objects.filter(state=Approval.State.PENDING).aggregate(
            n=Count("id"), first=Min("created_at")
        )
        approvals.add_metric([], pending["n"])
        oldest.add_metric([], (now - pending["first"]).total_seconds() if pending["first"] else 0)
        yield approvals
        yield oldest

        lag = GaugeMetricFamily(
            "gpu_portal_expiry_lag_seconds",
            "How far past its expiry the most overdue live workload is (0: none).",
        )
        overdue = Workload.objects.filter(
            state__in=(WorkloadState.RUNNING, WorkloadState.PROVISIONING), expires_at__lt=now
        ).aggregate(first=Min("expires_at"))
        lag.add_metric([], (now - overdue["first"]).total_seconds() if overdue["first"] else 0)
        yield lag

        rate = GaugeMetricFamily(
            "gpu_portal_spend_rate_dollars_per_hour", "What live GPU holds cost an hour.", labels=["team"]
        )
        by_team: dict[str, Decimal] = {}
        for slug, price, numerator, denominator in Allocation.objects.filter(
            ended_at__isnull=True
        ).values_list("team__slug", "price_per_hour", "share_numerator", "share_denominator"):
            by_team[slug] = by_team.get(slug, Decimal(0)) + price * numerator / denominator
        for slug, dollars in sorted(by_team.items()):
            rate.add_metric([slug], float(dollars))
        yield rate

        utilization = GaugeMetricFamily(
            "gpu_portal_gpu_utilization_percent",
            "Mean GPU utilization over the last complete minute, by GPU and its holder's team.",
            labels=["node", "gpu", "team"],
        )
        minute = (now - timedelta(minutes=1)).replace(second=0, microsecond=0)
        teams = dict(
            Allocation.objects.filter(released_at__isnull=True, mig_profile="").values_list(
                "gpu_id", "team__slug"
            )
        )
        for row in GpuMinute.objects.filter(
            minute=minute, mig_start__isnull=True, utilization_samples__gt=0
        ).values("gpu_id", "gpu__node__name", "gpu__index", "utilization_sum", "utilization_samples"):
            utilization.add_metric(
                [row["gpu__node__name"], str(row["gpu__index"]), teams.get(row["gpu_id"], "")],
                row["utilization_sum"] / row["utilization_samples"],
            )
        yield utilization

        yield from serving_families(now)
        yield from platform_families(now)
