"""Sandbox jobs. Each takes ids, calls one reconcile or service function, and returns."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from portal.sandboxes.services import sandbox_queue_drain, sandboxes_due_for_reconcile, sandboxes_sweep
from workers.reconcile.sandboxes import reconcile_sandbox


@shared_task(name="sandboxes.reconcile", ignore_result=True)
def reconcile(sandbox_id: int) -> None:
    recheck_in = reconcile_sandbox(sandbox_id)
    if recheck_in is not None and not reconcile.app.conf.task_always_eager:
        reconcile.apply_async(args=(sandbox_id,), countdown=recheck_in)


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
