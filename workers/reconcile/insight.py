"""Reading a sandbox's pod for its page: its recent events and the end of its log, when a person
asks (a log read per sandbox on every watch pass would cost the API server too much)."""

from __future__ import annotations

import dataclasses
import logging

from portal.sandboxes.services import sandbox_insight_record
from portal.workloads.models import Workload, WorkloadKind, WorkloadState
from workers.drivers.base import DriverError
from workers.reconcile.clusters import driver_for
from workers.reconcile.workloads import workload_spec

log = logging.getLogger(__name__)


def observe_sandbox(workload_id: int) -> None:
    sandbox = (
        Workload.objects.select_related("team", "owner", "image", "cluster", "gpu_type")
        .filter(pk=workload_id, kind=WorkloadKind.SANDBOX)
        .first()
    )
    if sandbox is None or sandbox.cluster is None:
        return
    if sandbox.state not in (WorkloadState.PROVISIONING, WorkloadState.RUNNING):
        sandbox_insight_record(
            sandbox_id=sandbox.pk, events=[], log_tail="", error=f"the sandbox is {sandbox.state}"
        )
        return
    try:
        insight = driver_for(sandbox.cluster).workload_insight(workload_spec(sandbox))
    except DriverError as error:
        log.warning("sandbox %s: reading its events and log failed: %s", sandbox.pk, error.message)
        sandbox_insight_record(sandbox_id=sandbox.pk, events=[], log_tail="", error=error.message)
        return
    sandbox_insight_record(
        sandbox_id=sandbox.pk,
        events=[dataclasses.asdict(event) for event in insight.events],
        log_tail=insight.log_tail,
    )
