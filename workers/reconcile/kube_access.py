"""Issuing a sandbox's kubeconfig: a token of its ServiceAccount from the cluster's TokenRequest
API, for its owner, good until the sandbox expires (a day at most)."""

from __future__ import annotations

import logging

from django.utils import timezone

from portal.accounts.selectors import owner_shut_out
from portal.sandboxes.models import KubeAccess
from portal.sandboxes.selectors import KUBECTL_FOR_MEMBERS
from portal.sandboxes.services import KUBE_TOKEN_MAX, sandbox_kube_access_issued
from portal.workloads.models import WorkloadState
from workers.drivers.base import DriverError
from workers.reconcile.clusters import driver_for
from workers.reconcile.workloads import workload_spec

log = logging.getLogger(__name__)


def issue_kube_access(access_id: int) -> None:
    access = (
        KubeAccess.objects.select_related(
            "workload__team", "workload__owner", "workload__image", "workload__cluster", "workload__gpu_type"
        )
        .filter(pk=access_id)
        .first()
    )
    if access is None or not access.pending:
        return
    sandbox, now = access.workload, timezone.now()
    if sandbox.state != WorkloadState.RUNNING or sandbox.cluster is None:
        sandbox_kube_access_issued(access_id=access.pk, error=f"the sandbox is {sandbox.state}")
        return
    if owner_shut_out(sandbox.owner, team_id=sandbox.team_id):  # since they asked
        sandbox_kube_access_issued(access_id=access.pk, error=KUBECTL_FOR_MEMBERS)
        return
    seconds = int(min(sandbox.expires_at - now, KUBE_TOKEN_MAX).total_seconds())
    try:
        token = driver_for(sandbox.cluster).kubectl_token(workload_spec(sandbox), seconds=seconds)
    except DriverError as error:
        log.warning("sandbox %s: no kubectl token: %s", sandbox.pk, error.message)
        sandbox_kube_access_issued(access_id=access.pk, error=error.message)
        return
    sandbox_kube_access_issued(
        access_id=access.pk,
        token=token.token,
        # past the sandbox's end its namespace, and with it the ServiceAccount, is gone: the
        # token opens nothing after that, whatever its own expiry (at least 10 minutes) says
        expires_at=min(token.expires_at, sandbox.expires_at),
        server=token.server,
        ca_pem=token.ca_pem,
        namespace=token.namespace,
        simulated=token.simulated,
    )
