"""Fleet jobs: applying MIG layouts."""

from __future__ import annotations

from celery import shared_task

from workers.drivers.base import DriverError
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
