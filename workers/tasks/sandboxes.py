"""Sandbox jobs. Each takes ids, calls one reconcile or service function, and returns."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from portal.workloads.services import workload_queue_drain, workloads_due_for_reconcile, workloads_sweep
from workers.reconcile.sandboxes import reconcile_sandbox


@shared_task(name="sandboxes.reconcile", ignore_result=True)
def reconcile(workload_id: int) -> None:
    """One step for one sandbox. Its next step comes from the periodic reconcile_due (every
    PORTAL_RECONCILE_SECONDS), the one scheduler, so jobs for a sandbox never multiply."""
    reconcile_sandbox(workload_id)


@shared_task(name="sandboxes.drain_queue", ignore_result=True)
def drain_queue() -> None:
    workload_queue_drain()


@shared_task(name="sandboxes.sweep", ignore_result=True)
def sweep() -> None:
    workloads_sweep()


@shared_task(name="sandboxes.reconcile_due", ignore_result=True)
def reconcile_due() -> None:
    for workload_id in workloads_due_for_reconcile(now=timezone.now()):
        reconcile.delay(workload_id)
