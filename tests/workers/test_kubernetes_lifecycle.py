"""The sandbox lifecycle end to end on the Kubernetes driver: the portal's services and reconciler,
the real client over HTTP, and the fake API server acting as kubelet and MIG manager."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import kubernetes_validate
import pytest
import yaml
from django.core.management import CommandError, call_command

from portal.catalog.demo import catalog_seed
from portal.deployments.services import deployment_request
from portal.fleet.models import Allocation, MigSlice, Node
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Workload, WorkloadKind, WorkloadState
from portal.workloads.services import (
    workload_queue_drain,
    workload_terminate,
    workloads_due_for_reconcile,
    workloads_sweep,
)
from tests.fakekube import SCHEMA_VERSION, FakeKube
from tests.workers.conftest import SLICE, WHOLE, mig_manager_runs
from workers.reconcile.workloads import reconcile_workload

pytestmark = pytest.mark.django_db
S = WorkloadState
SANDBOX_OBJECTS = {
    "ResourceQuota": "sandbox-quota",
    "LimitRange": "sandbox-limits",
    "NetworkPolicy": "sandbox-access",
    "ServiceAccount": "sandbox-user",
    "RoleBinding": "sandbox-kubectl",
    "Service": "sandbox",
    "Ingress": "sandbox",
    "PersistentVolumeClaim": "home",
    "StatefulSet": "sandbox",
}


def deletes_of(fake: FakeKube, namespace: str) -> list:
    return [
        r for r in fake.requests if r.verb == "delete" and r.resource == "namespaces" and r.name == namespace
    ]


def test_whole_gpu_sandbox_is_created_over_http_runs_and_expires_billed_to_its_expiry(
    run_jobs, fake_kube, request_on_kube
):
    sandbox = request_on_kube(**WHOLE)
    namespace = sandbox.namespace
    assert sandbox.state == S.PROVISIONING and sandbox.node_name == "gpu-h100-a"
    assert fake_kube.get("Namespace", namespace)["metadata"]["labels"]["gpu-portal/sandbox-id"] == str(
        sandbox.pk
    )
    for kind, name in SANDBOX_OBJECTS.items():
        assert fake_kube.get(kind, name, namespace) is not None, kind
    hard = fake_kube.get("ResourceQuota", "sandbox-quota", namespace)["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "1"
    assert not any(key.startswith("requests.nvidia.com/mig-") for key in hard)

    fake_kube.pod_running(namespace)
    reconcile_workload(sandbox.pk)
    sandbox.refresh_from_db()
    assert sandbox.state == S.RUNNING
    assert sandbox.access == f"https://{namespace}.sandboxes.gpu.internal/"

    late = sandbox.expires_at + timedelta(minutes=30)
    result = run_jobs(lambda: workloads_sweep(now=late))
    sandbox.refresh_from_db()
    assert result.expired == [sandbox.pk]
    assert sandbox.state == S.EXPIRED
    assert fake_kube.get("Namespace", namespace) is None
    assert fake_kube.list("StatefulSet", namespace) == []
    assert [r.status for r in deletes_of(fake_kube, namespace)] == [200]
    allocation = Allocation.objects.get(workload=sandbox)
    assert allocation.ended_at == sandbox.expires_at
    assert allocation.released_at is not None


def test_a_slice_the_node_already_has_is_taken_without_changing_its_layout(fake_kube, request_on_kube):
    sandbox = request_on_kube(**SLICE)  # gpu-h100-b arrived with all-balanced: free 1g.10gb slices
    mig_slice = Allocation.objects.get(workload=sandbox).mig_slice
    assert sandbox.node_name == "gpu-h100-b" and mig_slice.state == MigSlice.State.READY
    assert (
        fake_kube.get("Node", "gpu-h100-b")["metadata"]["labels"]["nvidia.com/mig.config"] == "all-balanced"
    )
    hard = fake_kube.get("ResourceQuota", "sandbox-quota", sandbox.namespace)["spec"]["hard"]
    assert hard["requests.nvidia.com/mig-1g.10gb"] == "1"
    assert fake_kube.mig.history == []  # nothing re-partitioned


def test_a_profile_no_free_slice_has_re_partitions_one_idle_gpu_through_the_mig_manager(
    fake_kube, request_on_kube
):
    sandbox = request_on_kube(**{**SLICE, "name": "big", "mig_profile": "7g.80gb"})
    mig_slice = Allocation.objects.get(workload=sandbox).mig_slice
    assert mig_slice.state == MigSlice.State.CREATING and sandbox.state == S.PROVISIONING
    assert sandbox.message.startswith("Re-partitioning gpu-h100-b GPU")
    assert "for a 7g.80gb slice (MIG reconfiguration)" in sandbox.message
    labels = fake_kube.get("Node", "gpu-h100-b")["metadata"]["labels"]
    config_name = labels["nvidia.com/mig.config"]
    assert (
        config_name.startswith("gpu-portal-gpu-h100-b-")
        and labels["nvidia.com/mig.config.state"] == "pending"
    )
    config_map = fake_kube.get("ConfigMap", "gpu-portal-mig-parted-config", "gpu-operator")
    entries = yaml.safe_load(config_map["data"]["config.yaml"])["mig-configs"][config_name]
    index = mig_slice.gpu.index
    balanced = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    for entry in entries:  # one GPU changes; the others keep the layout they arrived with
        wanted = {"7g.80gb": 1} if entry["devices"] == [index] else balanced
        assert entry == {"devices": entry["devices"], "mig-enabled": True, "mig-devices": wanted}
    assert fake_kube.get("Namespace", sandbox.namespace) is None  # nothing is applied before the slice

    reconcile_workload(sandbox.pk)  # the MIG manager has not run yet
    assert Workload.objects.get(pk=sandbox.pk).state == S.PROVISIONING

    fake_kube.mig.refresh_mounts()
    fake_kube.mig.step()
    fake_kube.mig.step()
    assert fake_kube.mig.history == [("gpu-h100-b", config_name, "success: applied")]
    reconcile_workload(sandbox.pk)
    assert MigSlice.objects.get(pk=mig_slice.pk).state == MigSlice.State.READY
    assert Node.objects.get(name="gpu-h100-b").mig_config_state == "success"
    hard = fake_kube.get("ResourceQuota", "sandbox-quota", sandbox.namespace)["spec"]["hard"]
    assert hard["requests.nvidia.com/mig-7g.80gb"] == "1" and hard["requests.nvidia.com/gpu"] == "0"
    fake_kube.pod_running(sandbox.namespace)
    reconcile_workload(sandbox.pk)
    assert Workload.objects.get(pk=sandbox.pk).state == S.RUNNING


def test_a_gpu_the_kubelet_filled_behind_the_portals_back_fails_in_use_and_the_request_waits(
    run_jobs, fake_kube, request_on_kube
):
    """The kubelet, not the portal, picks the device: a pod the portal placed on GPU 3 may sit on
    GPU 0. Re-partitioning GPU 0 then fails "in use", the request goes back to the queue, and
    nothing under the pod is destroyed."""
    small = request_on_kube(**SLICE)
    big = request_on_kube(**{**SLICE, "name": "big", "mig_profile": "7g.80gb"})
    target = Allocation.objects.get(workload=big).gpu.index
    assert Allocation.objects.get(workload=small).gpu.index != target  # as the portal sees it
    fake_kube.mig.assign(small.namespace, "sandbox-0", target)  # as the kubelet did it
    fake_kube.mig.refresh_mounts()
    fake_kube.mig.step()
    fake_kube.mig.step()
    assert fake_kube.mig.history[-1][2] == f"failed: GPU {target} in use"
    reconcile_workload(big.pk)
    big.refresh_from_db()
    assert big.state == S.QUEUED and "MIG layout change on gpu-h100-b failed" in big.message
    assert fake_kube.mig.devices_in_use("gpu-h100-b") == {target: {"1g.10gb": 1}}

    # The pod ends; the request is placed again. The MIG manager never retries a failed config
    # by itself: the portal points the node at the layout's second name.
    run_jobs(lambda: workload_terminate(user=small.owner, workload_id=small.pk, kind=WorkloadKind.SANDBOX))
    fake_kube.mig.pinned.clear()
    run_jobs(lambda: workload_queue_drain())
    big.refresh_from_db()
    assert big.state == S.PROVISIONING
    mig_manager_runs(fake_kube)
    assert fake_kube.mig.history[-1][2] == "success: applied"
    assert fake_kube.mig.history[-1][1] != fake_kube.mig.history[-2][1]  # a new label value
    reconcile_workload(big.pk)
    fake_kube.pod_running(big.namespace)
    reconcile_workload(big.pk)
    assert Workload.objects.get(pk=big.pk).state == S.RUNNING


def test_image_pull_failure_fails_the_sandbox_with_the_kubelets_message(fake_kube, request_on_kube):
    sandbox = request_on_kube(**WHOLE)
    fake_kube.pod_image_pull_failed(sandbox.namespace, image="quay.io/jupyter/pytorch-notebook:latest")
    reconcile_workload(sandbox.pk)
    sandbox.refresh_from_db()
    # Billing stops at once, but the pod still holds the GPU until its namespace is gone.
    assert sandbox.state == S.TERMINATING and sandbox.ending_as == S.FAILED
    assert sandbox.message.startswith(
        'image pull failed: Failed to pull image "quay.io/jupyter/pytorch-notebook'
    )
    allocation = Allocation.objects.get(workload=sandbox)
    assert allocation.ended_at is not None and allocation.released_at is None

    reconcile_workload(sandbox.pk)
    sandbox.refresh_from_db()
    assert sandbox.state == S.FAILED
    assert sandbox.message.startswith("image pull failed")
    assert fake_kube.get("Namespace", sandbox.namespace) is None
    assert Allocation.objects.get(workload=sandbox).released_at is not None


def test_forbidden_api_fails_the_sandbox_naming_what_the_service_account_may_not_do(
    fake_kube, request_on_kube
):
    fake_kube.fail_next(403, method="POST", path_contains="/api/v1/namespaces")
    sandbox = request_on_kube(**WHOLE)
    assert sandbox.state == S.FAILED
    assert sandbox.message.startswith("the portal's service account may not create namespaces")
    assert "cannot create resource" in sandbox.message
    assert Allocation.objects.get(workload=sandbox).released_at is not None


def test_server_errors_are_retried_with_growing_backoff_then_the_sandbox_runs(
    fake_kube, kube_cluster, researcher
):
    sandbox = sandbox_request(user=researcher, **WHOLE)  # placed; its job is left to this test
    fake_kube.fail_next(500, times=2, method="POST", path_contains="/api/v1/namespaces")
    start = sandbox.created_at

    reconcile_workload(sandbox.pk, now=start)
    row = Workload.objects.get(pk=sandbox.pk)
    assert row.state == S.PROVISIONING and row.attempts == 1
    assert row.next_attempt_at == start + timedelta(seconds=2)
    assert "failed to create namespaces" in row.last_error and "(500)" in row.last_error
    assert sandbox.pk not in workloads_due_for_reconcile(now=start + timedelta(seconds=1))
    assert sandbox.pk in workloads_due_for_reconcile(now=start + timedelta(seconds=2))

    reconcile_workload(sandbox.pk, now=start + timedelta(seconds=2))
    row.refresh_from_db()
    assert row.attempts == 2 and row.next_attempt_at == start + timedelta(seconds=6)
    reconcile_workload(sandbox.pk, now=start + timedelta(seconds=6))  # applied, pod starting
    row.refresh_from_db()
    assert row.state == S.PROVISIONING and row.next_attempt_at == start + timedelta(seconds=7)
    fake_kube.pod_running(row.namespace)
    reconcile_workload(sandbox.pk, now=start + timedelta(seconds=7))
    row.refresh_from_db()
    assert row.state == S.RUNNING and row.attempts == 0 and row.last_error == ""
    posts = [r.status for r in fake_kube.requests if r.verb == "create" and r.resource == "namespaces"]
    assert posts == [500, 500, 201]  # each pass reads first: nothing is created twice


# --- manage.py sandbox_manifests -------------------------------------------------------------


def manifests_of(number: int, *options: str) -> list[dict]:
    out = StringIO()
    call_command("sandbox_manifests", str(number), *options, stdout=out)
    return list(yaml.safe_load_all(out.getvalue()))


def test_sandbox_manifests_prints_the_kubernetes_drivers_objects_as_valid_yaml(request_on_kube):
    sandbox = request_on_kube(**SLICE)
    documents = manifests_of(sandbox.number)
    assert [doc["kind"] for doc in documents] == ["Namespace", *SANDBOX_OBJECTS]
    assert {doc["metadata"].get("namespace", doc["metadata"]["name"]) for doc in documents} == {
        sandbox.namespace
    }
    for doc in documents:
        assert kubernetes_validate.validate(doc, SCHEMA_VERSION, strict=True) == SCHEMA_VERSION, doc["kind"]


def test_sandbox_manifests_works_for_the_simulated_driver_too(run_jobs, fleet, researcher, slice_request):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    documents = manifests_of(sandbox.number)
    workload = next(doc for doc in documents if doc["kind"] == "StatefulSet")
    container = workload["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/mig-1g.10gb"] == "1"
    for doc in documents:
        assert kubernetes_validate.validate(doc, SCHEMA_VERSION, strict=True) == SCHEMA_VERSION, doc["kind"]


def test_sandbox_manifests_takes_the_number_people_see_of_either_kind(
    run_jobs, fleet, researcher, slice_request
):
    catalog_seed()
    deployed = run_jobs(lambda: deployment_request(user=researcher, team="vision", name="llama8b",
                                                   model="llama-3.1-8b-instruct"))  # fmt: skip
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    deployed.refresh_from_db()
    sandbox.refresh_from_db()
    assert (deployed.number, sandbox.number) == (1, 1) and deployed.namespace != sandbox.namespace

    def namespaces(documents: list[dict]) -> set[str]:
        return {doc["metadata"].get("namespace", doc["metadata"]["name"]) for doc in documents}

    assert namespaces(manifests_of(1)) == {sandbox.namespace}
    assert namespaces(manifests_of(1, "--deployment")) == {deployed.namespace}


def test_sandbox_manifests_refuses_an_unknown_number(db):
    with pytest.raises(CommandError, match=r"^no sandbox 999$"):
        call_command("sandbox_manifests", "999")
    with pytest.raises(CommandError, match=r"^no deployment 999$"):
        call_command("sandbox_manifests", "999", "--deployment")


def test_sandbox_manifests_refuses_a_sandbox_that_is_not_placed_yet(fleet, researcher):
    Node.objects.update(schedulable=False)  # no capacity: the request waits in the queue
    queued = sandbox_request(user=researcher, **WHOLE)
    assert queued.state == S.QUEUED
    with pytest.raises(CommandError, match=rf"^sandbox {queued.number} is queued: it has no placement yet$"):
        call_command("sandbox_manifests", str(queued.number))
