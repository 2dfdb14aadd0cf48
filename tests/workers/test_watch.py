"""Running sandboxes are watched over HTTP: a crash or an OOM kill shows as degraded (the owner
told once), recovery clears it, and a node that left the cluster ends the sandbox and frees its
GPUs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.audit.models import AuditEvent
from portal.fleet.models import Allocation
from portal.workloads.models import Workload, WorkloadState
from tests.workers.conftest import WHOLE
from workers.reconcile.workloads import reconcile_workload

pytestmark = pytest.mark.django_db
S = WorkloadState


def test_a_crashing_sandbox_is_degraded_then_recovers(fake_kube, running_on_kube):
    sandbox = running_on_kube(**WHOLE)
    fake_kube.pod_oom_killed(sandbox.namespace)
    now = timezone.now()
    reconcile_workload(sandbox.pk, now=now)
    sandbox.refresh_from_db()
    assert sandbox.state == S.RUNNING and sandbox.degraded_since == now
    assert sandbox.message.startswith("Degraded: OOM-killed")
    reconcile_workload(sandbox.pk, now=now + timedelta(seconds=31))  # still crashing: told once
    told = sandbox.owner.notifications.filter(message__contains="Degraded: OOM-killed")
    assert told.count() == 1
    assert AuditEvent.objects.filter(action="sandbox.degraded").count() == 1

    fake_kube.pod_running(sandbox.namespace)
    reconcile_workload(sandbox.pk, now=now + timedelta(seconds=62))
    sandbox.refresh_from_db()
    assert sandbox.degraded_since is None and sandbox.message == "Running."
    assert sandbox.owner.notifications.filter(message__contains="running well again").exists()


def test_a_sandbox_whose_node_left_the_cluster_ends_and_frees_its_gpus(fake_kube, running_on_kube):
    sandbox = running_on_kube(**WHOLE)
    with fake_kube.store.lock:
        fake_kube.api.store.delete(("nodes", "", sandbox.node_name))
    fake_kube.pod_unschedulable(
        sandbox.namespace, "0/3 nodes are available: node(s) didn't match node affinity"
    )
    later = timezone.now() + timedelta(minutes=1)
    reconcile_workload(sandbox.pk, now=later)
    sandbox.refresh_from_db()
    assert sandbox.ending_as == S.FAILED
    assert sandbox.message == f"Node {sandbox.node_name} is gone from the cluster"
    reconcile_workload(sandbox.pk, now=later)
    assert Workload.objects.get(pk=sandbox.pk).state == S.FAILED
    assert Allocation.objects.get(workload=sandbox).released_at is not None
