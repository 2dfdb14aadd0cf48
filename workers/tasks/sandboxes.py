"""Sandbox jobs. Each takes ids, calls one reconcile or service function, and returns."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from portal.sandboxes.services import sandbox_queue_drain, sandboxes_due_for_reconcile, sandboxes_sweep
from workers.reconcile.sandboxes import reconcile_sandbox


@shared_task(name="sandboxes.reconcile", ignore_result=True)
def reconcile(sandbox_id: int) -> None:
    """One step for one sandbox. Its next step comes from the periodic reconcile_due (every
    PORTAL_RECONCILE_SECONDS), the one scheduler, so jobs for a sandbox never multiply."""
    reconcile_sandbox(sandbox_id)


@shared_task(name="sandboxes.drain_queue", ignore_result=True)
def drain_queue() -> None:
    sandbox_queue_drain()


@shared_task(name="sandboxes.sweep", ignore_result=True)
def sweep() -> None:
    sandboxes_sweep()


@shared_task(name="sandboxes.reconcile_due", ignore_result=True)
def reconcile_due() -> None:
    for sandbox_id in sandboxes_due_for_reconcile(now=timezone.now()):
        reconcile.delay(sandbox_id)
