"""What is transient is retried and said so; what never ends fails at the cluster's provisioning
deadline with the reason, its objects removed and its GPUs freed. Over HTTP against the fake."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.fleet.models import Allocation
from portal.workloads.models import Workload, WorkloadState
from tests.workers.conftest import WHOLE
from workers.drivers.kubernetes_status import serving_status
from workers.reconcile.workloads import reconcile_workload

pytestmark = pytest.mark.django_db
S = WorkloadState


def test_a_registry_rate_limit_is_retried_and_said_so(fake_kube, request_on_kube):
    sandbox = request_on_kube(**WHOLE)
    fake_kube.pod_image_pull_failed(
        sandbox.namespace,
        image="quay.io/jupyter/pytorch-notebook:latest",
        why="429 Too Many Requests: toomanyrequests: You have reached your pull rate limit",
        times=3,
    )
    reconcile_workload(sandbox.pk)
    sandbox.refresh_from_db()
    assert sandbox.state == S.PROVISIONING
    assert sandbox.message.startswith("Pulling the image, retry 3: registry rate limit (")
    fake_kube.pod_running(sandbox.namespace)
    reconcile_workload(sandbox.pk)
    assert Workload.objects.get(pk=sandbox.pk).state == S.RUNNING


def test_a_pod_the_kubelet_refused_at_admission_waits_for_its_replacement(fake_kube, request_on_kube):
    sandbox = request_on_kube(**WHOLE)
    fake_kube.set_pod_status(
        sandbox.namespace,
        {
            "phase": "Failed",
            "reason": "OutOfnvidia.com/gpu",
            "message": "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu",
        },
    )
    reconcile_workload(sandbox.pk)
    sandbox.refresh_from_db()
    assert sandbox.state == S.PROVISIONING
    assert sandbox.message == (
        "The kubelet refused the pod (OutOfnvidia.com/gpu: Pod was rejected: Node didn't have enough"
        " resource: nvidia.com/gpu); it is being recreated"
    )


def test_an_image_that_does_not_exist_still_fails_at_once(fake_kube, request_on_kube):
    sandbox = request_on_kube(**WHOLE)
    fake_kube.pod_image_pull_failed(sandbox.namespace, image="quay.io/nope/nothing:1", why="not found")
    reconcile_workload(sandbox.pk)
    sandbox.refresh_from_db()
    assert sandbox.ending_as == S.FAILED and "image pull failed" in sandbox.message


def test_a_workload_that_never_runs_fails_at_the_deadline_and_frees_its_gpus(fake_kube, request_on_kube):
    sandbox = request_on_kube(**WHOLE)
    fake_kube.pod_unschedulable(sandbox.namespace, "0/4 nodes are available: 1 node(s) had untolerated taint")
    reconcile_workload(sandbox.pk)
    sandbox.refresh_from_db()
    assert sandbox.state == S.PROVISIONING and sandbox.message.startswith("Unschedulable: 0/4 nodes")

    later = timezone.now() + timedelta(minutes=31)
    reconcile_workload(sandbox.pk, now=later)
    sandbox.refresh_from_db()
    assert sandbox.ending_as == S.FAILED
    assert sandbox.message.startswith(
        "Not running 30 minutes after it was placed on gpu-h100-a (the cluster's provisioning deadline);"
        " last: Unschedulable: 0/4 nodes"
    )
    reconcile_workload(sandbox.pk, now=later)  # the objects go, then the GPUs
    sandbox.refresh_from_db()
    assert sandbox.state == S.FAILED
    assert fake_kube.get("Namespace", sandbox.namespace) is None
    assert Allocation.objects.get(workload=sandbox).released_at is not None
    assert sandbox.owner.notifications.filter(message__contains="failed: Not running 30 minutes").exists()


def test_a_failed_pod_the_replicaset_replaced_says_nothing_about_its_replica():
    def pod(name: str, replica: str, phase: str, ready: bool) -> dict:
        conditions = [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "True" if ready else "False"},
        ]
        return {
            "metadata": {"name": name, "labels": {"gpu-portal/replica": replica}},
            "status": {"phase": phase, "reason": "UnexpectedAdmissionError" if phase == "Failed" else "",
                       "message": "Allocate failed due to device plugin restart", "conditions": conditions},
        }  # fmt: skip

    pods = [
        pod("r0-old", "0", "Failed", False),
        pod("r0-new", "0", "Running", True),
        pod("r1", "1", "Running", True),
    ]
    status = serving_status(
        namespace={"metadata": {"name": "ns"}}, pods=pods, events=[], replicas=2, access="x"
    )
    assert (status.phase, status.ready_replicas) == ("running", 2)


def test_the_deadline_counts_from_the_last_move_to_provisioning_not_the_first_placement(
    fake_kube, request_on_kube
):
    sandbox = request_on_kube(**WHOLE)
    hours_ago = timezone.now() - timedelta(hours=3)
    # placed three hours ago and running since, then put back to provisioning a moment ago (as a
    # rescale or a requeue does): the clock starts again
    Workload.objects.filter(pk=sandbox.pk).update(provisioning_since=timezone.now())
    Allocation.objects.filter(workload=sandbox).update(started_at=hours_ago)
    reconcile_workload(sandbox.pk)
    assert Workload.objects.get(pk=sandbox.pk).ending_as == ""
    assert Workload.objects.get(pk=sandbox.pk).provisioning_since is not None


def test_a_wrong_image_fails_though_the_kubelets_newest_event_is_a_bare_back_off(fake_kube, request_on_kube):
    sandbox = request_on_kube(**WHOLE)
    fake_kube.pod_image_pull_failed(sandbox.namespace, image="quay.io/nope/nothing:1", why="not found")
    fake_kube.add_event(sandbox.namespace, "Pod", "sandbox-0", "Failed", "Error: ImagePullBackOff")
    reconcile_workload(sandbox.pk)
    sandbox.refresh_from_db()
    assert sandbox.ending_as == S.FAILED and "not found" in sandbox.message
