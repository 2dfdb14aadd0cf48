"""Workload services (sandboxes and deployments alike): what users ask for (requests, estimates,
extensions, ends), the worker-driven lifecycle, and the sweep. Other apps import from here only."""

from portal.workloads.services.lifecycle import (
    DRAIN_TASK,
    RECONCILE_TASK,
    workload_approve,
    workload_attempt_failed,
    workload_end,
    workload_mark_ended,
    workload_mark_failed,
    workload_mark_running,
    workload_mark_waiting,
    workload_queue_drain,
    workload_reject,
    workload_requeue,
    workload_try_place,
)
from portal.workloads.services.requests import (
    Estimate,
    tell_deciders,
    workload_apply_extension,
    workload_estimate,
    workload_extend,
    workload_request,
    workload_terminate,
)
from portal.workloads.services.resolve import (
    MAX_REPLICAS,
    GpuAsk,
    Lifetime,
    ResolvedRequest,
    WorkloadAsk,
    resolve_request,
)
from portal.workloads.services.sweep import (
    SweepResult,
    workloads_due_for_reconcile,
    workloads_sweep,
)
from portal.workloads.services.transitions import move

__all__ = [
    "DRAIN_TASK",
    "MAX_REPLICAS",
    "RECONCILE_TASK",
    "Estimate",
    "GpuAsk",
    "Lifetime",
    "ResolvedRequest",
    "SweepResult",
    "WorkloadAsk",
    "move",
    "resolve_request",
    "tell_deciders",
    "workload_apply_extension",
    "workload_approve",
    "workload_attempt_failed",
    "workload_end",
    "workload_estimate",
    "workload_extend",
    "workload_mark_ended",
    "workload_mark_failed",
    "workload_mark_running",
    "workload_mark_waiting",
    "workload_queue_drain",
    "workload_reject",
    "workload_request",
    "workload_requeue",
    "workload_terminate",
    "workload_try_place",
    "workloads_due_for_reconcile",
    "workloads_sweep",
]
