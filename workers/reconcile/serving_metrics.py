"""Read what a running deployment's runtime says at /metrics (tokens, requests, latency), replica
by replica, and hand it to the portal, which records the growth since the last read. One
deployment a job, so one slow or unreachable server never holds up the others; a failed read is
noted on the deployment and the next minute's read measures from the last good one."""

from __future__ import annotations

import logging
from datetime import datetime

from django.utils import timezone

from portal.deployments.serving_stats import serving_metrics_failed, serving_metrics_record
from portal.workloads.models import Workload, WorkloadKind, WorkloadState
from workers.drivers.base import DriverError
from workers.reconcile.clusters import driver_for
from workers.reconcile.workloads import workload_spec

log = logging.getLogger(__name__)


def read_deployment_metrics(deployment_id: int, *, now: datetime | None = None) -> bool:
    """One read of one running deployment's runtime metrics; False when there was nothing to
    read (not running, not placed) or the cluster did not answer."""
    workload = (
        Workload.objects.select_related(
            "team", "owner", "image", "cluster", "gpu_type", "serving__model", "serving__runtime"
        )
        .filter(pk=deployment_id, kind=WorkloadKind.DEPLOYMENT, state=WorkloadState.RUNNING)
        .first()
    )
    if workload is None or workload.cluster is None:
        return False
    try:
        readings = driver_for(workload.cluster).serving_metrics(workload_spec(workload))
    except DriverError as error:
        log.warning("runtime metrics of deployment %s: %s", deployment_id, error.message)
        serving_metrics_failed(deployment_id=deployment_id, error=error.message)
        return False
    # Stamped after the read: the growth it measures ends when the servers answered.
    serving_metrics_record(deployment_id=deployment_id, readings=readings, now=now or timezone.now())
    return True
