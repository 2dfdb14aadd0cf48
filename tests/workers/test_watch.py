"""Running sandboxes are watched over HTTP: a crash or an OOM kill shows as degraded (the owner
told once), recovery clears it, and a node that left the cluster ends the sandbox and frees its
GPUs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.audit.models import AuditEvent
from portal.fleet.models import Allocation
from portal.workloads.models import Workload, WorkloadKind, WorkloadState
from portal.workloads.services import workload_terminate
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

    fake_kube.pod_running(sandbox.namespace)  # between two crashes: well for a moment
    reconcile_workload(sandbox.pk, now=now + timedelta(seconds=62))
    fake_kube.pod_oom_killed(sandbox.namespace)
    reconcile_workload(sandbox.pk, now=now + timedelta(seconds=93))
    assert told.count() == 1  # still the one degradation: no recovery, no second message

    fake_kube.pod_running(sandbox.namespace)
    reconcile_workload(sandbox.pk, now=now + timedelta(minutes=2))
    assert Workload.objects.get(pk=sandbox.pk).degraded_since is not None  # well, not for long yet
    reconcile_workload(sandbox.pk, now=now + timedelta(minutes=13))
    sandbox.refresh_from_db()
    assert sandbox.degraded_since is None and sandbox.message == "Running."
    assert sandbox.owner.notifications.filter(message__contains="running well again").count() == 1


def test_a_sandbox_whose_node_left_the_cluster_ends_and_frees_its_gpus(fake_kube, running_on_kube):
    sandbox = running_on_kube(**WHOLE)
    with fake_kube.store.lock:
        fake_kube.api.store.delete(("nodes", "", sandbox.node_name))
    fake_kube.pod_unschedulable(
        sandbox.namespace, "0/3 nodes are available: node(s) didn't match node affinity"
    )
    first = timezone.now() + timedelta(minutes=1)
    reconcile_workload(sandbox.pk, now=first)  # missing once: maybe re-registering
    sandbox.refresh_from_db()
    assert sandbox.state == S.RUNNING and sandbox.message.startswith("Degraded: node ")
    later = first + timedelta(minutes=3)
    reconcile_workload(sandbox.pk, now=later)  # still missing: gone
    sandbox.refresh_from_db()
    assert sandbox.ending_as == S.FAILED
    assert sandbox.message == f"Node {sandbox.node_name} is gone from the cluster"
    reconcile_workload(sandbox.pk, now=later)
    assert Workload.objects.get(pk=sandbox.pk).state == S.FAILED
    assert Allocation.objects.get(workload=sandbox).released_at is not None


def test_a_namespace_stuck_terminating_is_reported_to_admins_once(fake_kube, running_on_kube, admin_user):
    sandbox = running_on_kube(**WHOLE)
    fake_kube.api.slow_namespace_deletion = True  # a finalizer that does not finish
    workload_terminate(user=sandbox.owner, workload_id=sandbox.pk, kind=WorkloadKind.SANDBOX)
    ended = Workload.objects.get(pk=sandbox.pk).ended_at
    reconcile_workload(sandbox.pk, now=ended + timedelta(minutes=1))
    assert Workload.objects.get(pk=sandbox.pk).state == S.TERMINATING
    assert not admin_user.notifications.exists()

    reconcile_workload(sandbox.pk, now=ended + timedelta(minutes=11))
    reconcile_workload(sandbox.pk, now=ended + timedelta(minutes=12))
    (note,) = admin_user.notifications.all()
    assert f"namespace {sandbox.namespace} still terminating 11 minutes after it ended" in note.message
    assert AuditEvent.objects.filter(action="sandbox.removal_stuck").count() == 1
    assert Allocation.objects.get(workload=sandbox).released_at is None  # held until it is gone

    fake_kube.finish_namespace_deletions()
    reconcile_workload(sandbox.pk, now=ended + timedelta(minutes=13))
    assert Workload.objects.get(pk=sandbox.pk).state == S.TERMINATED
