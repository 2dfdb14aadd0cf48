"""Fleet jobs: applying MIG layouts, discovering GPU nodes, repairing drift."""

from __future__ import annotations

from celery import shared_task

from workers.drivers.base import DriverError
from workers.reconcile.discovery import clusters_to_discover, discover_cluster
from workers.reconcile.drift import clusters_to_repair
from workers.reconcile.drift import repair_drift as repair_cluster_drift
from workers.reconcile.mig import reconcile_node_mig

LAYOUT_RECHECK_SECONDS = 2.0
LAYOUT_MAX_CHECKS = 150  # about five minutes, past the 40-112 s the GPU Operator needs


@shared_task(name="fleet.apply_mig_layout", ignore_result=True)
def apply_mig_layout(node_id: int, checks: int = 0) -> None:
    try:
        state = reconcile_node_mig(node_id)
    except DriverError:
        state = "pending"
    if state == "pending" and checks < LAYOUT_MAX_CHECKS and not apply_mig_layout.app.conf.task_always_eager:
        apply_mig_layout.apply_async(args=(node_id, checks + 1), countdown=LAYOUT_RECHECK_SECONDS)


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
