"""Workload jobs (sandboxes and deployments). Each takes ids, calls one reconcile or service
function, and returns."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from portal.deployments.idle import deployments_idle_sweep
from portal.workloads.services import (
    budgets_watch,
    workload_queue_drain,
    workloads_due_for_reconcile,
    workloads_idle_sweep,
    workloads_sweep,
)
from workers.reconcile.workloads import reconcile_workload


@shared_task(name="workloads.reconcile", ignore_result=True)
def reconcile(workload_id: int) -> None:
    """One step for one workload. Its next step comes from the periodic reconcile_due (every
    PORTAL_RECONCILE_SECONDS), the one scheduler, so jobs for a workload never multiply."""
    reconcile_workload(workload_id)


@shared_task(name="workloads.drain_queue", ignore_result=True)
def drain_queue() -> None:
    workload_queue_drain()


@shared_task(name="workloads.sweep", ignore_result=True)
def sweep() -> None:
    workloads_sweep()


@shared_task(name="workloads.reconcile_due", ignore_result=True)
def reconcile_due() -> None:
    for workload_id in workloads_due_for_reconcile(now=timezone.now()):
        reconcile.delay(workload_id)


@shared_task(name="workloads.idle_sweep", ignore_result=True)
def idle_sweep() -> None:
    """Warn, reclaim or clear sandboxes and deployments by their GPUs' idleness (the node
    agents' readings): an idle sandbox ends, an idle deployment is scaled to zero."""
    workloads_idle_sweep()
    deployments_idle_sweep()


@shared_task(name="workloads.budget_watch", ignore_result=True)
def budget_watch() -> None:
    """Tell leads of budget thresholds passed; carry out the stop policy of teams over budget."""
    budgets_watch()
