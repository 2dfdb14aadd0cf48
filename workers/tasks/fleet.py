"""Fleet jobs: applying MIG layouts, discovering GPU nodes, repairing drift, orphans. Each takes ids,
calls one reconcile function, and returns."""

from __future__ import annotations

import contextlib

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from portal.fleet.telemetry import telemetry_prune
from workers.drivers.base import DriverError
from workers.reconcile.discovery import clusters_to_discover, discover_cluster
from workers.reconcile.drift import clusters_to_repair
from workers.reconcile.drift import repair_drift as repair_cluster_drift
from workers.reconcile.mig import mig_layouts_due, reconcile_node_mig
from workers.reconcile.orphans import clusters_to_check
from workers.reconcile.orphans import reconcile_orphans as reconcile_cluster_orphans
from workers.reconcile.telemetry_sim import simulate_telemetry


@shared_task(name="fleet.apply_mig_layout", ignore_result=True)
def apply_mig_layout(node_id: int) -> None:
    """One pass over one node's MIG layout. Its next pass comes from the periodic
    apply_mig_layouts_due, which reads the node row, so no message carries a count."""
    # A driver error is recorded on the node row and retried after its back-off; nothing to add.
    with contextlib.suppress(DriverError):
        reconcile_node_mig(node_id)


@shared_task(name="fleet.apply_mig_layouts_due", ignore_result=True)
def apply_mig_layouts_due() -> None:
    """One job per node whose layout change is due, so one slow node never holds up the others."""
    for node_id in mig_layouts_due(now=timezone.now()):
        apply_mig_layout.delay(node_id)


@shared_task(name="fleet.discover", ignore_result=True)
def discover(cluster_id: int) -> None:
    discover_cluster(cluster_id)


@shared_task(name="fleet.discover_all", ignore_result=True)
def discover_all() -> None:
    """One job per cluster, so one unreachable cluster never holds up or fails the others."""
    for cluster_id in clusters_to_discover():
        discover.delay(cluster_id)


@shared_task(name="fleet.repair_drift", ignore_result=True)
def repair_drift(cluster_id: int) -> None:
    repair_cluster_drift(cluster_id)


@shared_task(name="fleet.repair_drift_all", ignore_result=True)
def repair_drift_all() -> None:
    for cluster_id in clusters_to_repair():
        repair_drift.delay(cluster_id)


@shared_task(name="fleet.reconcile_orphans", ignore_result=True)
def reconcile_orphans(cluster_id: int) -> None:
    """Record what the cluster holds that the database does not know; remove what admins confirmed."""
    reconcile_cluster_orphans(cluster_id)


@shared_task(name="fleet.reconcile_orphans_all", ignore_result=True)
def reconcile_orphans_all() -> None:
    for cluster_id in clusters_to_check():
        reconcile_orphans.delay(cluster_id)


@shared_task(name="fleet.simulate_telemetry", ignore_result=True)
def simulate_telemetry_task() -> None:
    """What node agents would report of the simulated cluster's GPUs (the embedded default)."""
    simulate_telemetry()


@shared_task(name="fleet.prune_telemetry", ignore_result=True)
def prune_telemetry() -> None:
    """Forget GPU telemetry past its retention (minutes for days, hours for a year)."""
    telemetry_prune(
        now=timezone.now(),
        minute_days=settings.PORTAL_TELEMETRY_MINUTE_DAYS,
        hour_days=settings.PORTAL_TELEMETRY_HOUR_DAYS,
    )
