"""Sandbox services: user actions (requests), the worker-driven lifecycle, and the sweep."""

from portal.sandboxes.services.lifecycle import (
    sandbox_approve,
    sandbox_attempt_failed,
    sandbox_end,
    sandbox_mark_ended,
    sandbox_mark_failed,
    sandbox_mark_running,
    sandbox_mark_waiting,
    sandbox_queue_drain,
    sandbox_reject,
    sandbox_requeue,
    sandbox_try_place,
)
from portal.sandboxes.services.requests import (
    Estimate,
    sandbox_apply_extension,
    sandbox_estimate,
    sandbox_extend,
    sandbox_request,
    sandbox_terminate,
)
from portal.sandboxes.services.sweep import (
    SweepResult,
    sandboxes_due_for_reconcile,
    sandboxes_sweep,
)

__all__ = [
    "Estimate",
    "SweepResult",
    "sandbox_apply_extension",
    "sandbox_approve",
    "sandbox_attempt_failed",
    "sandbox_end",
    "sandbox_estimate",
    "sandbox_extend",
    "sandbox_mark_ended",
    "sandbox_mark_failed",
    "sandbox_mark_running",
    "sandbox_mark_waiting",
    "sandbox_queue_drain",
    "sandbox_reject",
    "sandbox_request",
    "sandbox_requeue",
    "sandbox_terminate",
    "sandbox_try_place",
    "sandboxes_due_for_reconcile",
    "sandboxes_sweep",
]
