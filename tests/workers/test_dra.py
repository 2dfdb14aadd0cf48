"""MIG through NVIDIA's DRA driver on a "dynamic" cluster, end to end over HTTP against the fake
(tests/fakekube/dra.py): GPUs and their UUIDs discovered from ResourceSlices, a ResourceClaim per
slice pinned to the GPU and profile the portal chose, the start slot taken from the allocated
device, slices cut beside slices in use, and a claim that cannot be met said as such."""

from __future__ import annotations

import kubernetes_validate
import pytest

from portal.fleet.models import Allocation, Gpu, MigSlice, Node
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Workload, WorkloadState
from tests.factories import ClusterFactory
from tests.fakekube import FakeKube, dra, fixtures
from tests.fakekube.nodes import gpu_node
from tests.fakekube.validation import DRA_SCHEMA_VERSION
from workers.reconcile.discovery import discover_cluster
from workers.reconcile.workloads import reconcile_workload

pytestmark = pytest.mark.django_db
fake_kube = fixtures.fake_kube
S = WorkloadState
NODE = "gpu-h100-d"
SLICE = {"team": "vision", "name": "small", "gpu_type": "h100-80gb", "mig_profile": "1g.10gb", "ttl_hours": 1}


@pytest.fixture
def dra_kube():
    """A cluster whose one GPU node runs NVIDIA's DRA driver with dynamic MIG (2 H100s)."""
    node = gpu_node(
        NODE, product="NVIDIA-H100-80GB-HBM3", gpu_count=2, gpu_memory_mb=81559, mig_strategy="none",
        mig_config="", mig_state="", allocatable_gpus={"nvidia.com/gpu": 0},
    )  # fmt: skip
    with FakeKube(nodes=[node]) as fake:
        with fake.store.lock:
            fake.dra = dra.install(fake.api, [(NODE, "h100-80gb", 2)])
        yield fake


@pytest.fixture
def dynamic_cluster(db, dra_kube):
    """A cluster left on `auto`: discovery finds the DRA driver, so it runs `dynamic`."""
    cluster = ClusterFactory(name="dra", driver="kubernetes", api_url=dra_kube.url)
    assert cluster.mig_mode == "auto"
    result = discover_cluster(cluster.pk)
    assert result is not None and result.dra_nodes == [NODE]
    assert "NVIDIA's DRA driver offers MIG on: gpu-h100-d" in result.summary()
    cluster.refresh_from_db()
    assert cluster.dra_found and cluster.effective_mig_mode == "dynamic"
    return cluster


def request(run_jobs, researcher, **fields) -> Workload:
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **{**SLICE, **fields}))
    return Workload.objects.get(pk=sandbox.pk)


def claim_of(fake: FakeKube, sandbox: Workload) -> dict:
    found = fake.get("ResourceClaim", "gpu-slice", sandbox.namespace)
    assert found is not None
    return found


def test_discovery_takes_each_gpus_uuid_and_mig_from_the_dra_drivers_resource_slices(dynamic_cluster):
    node = Node.objects.get(name=NODE)
    assert node.mig_managed
    gpus = list(Gpu.objects.filter(node=node).order_by("index"))
    assert [(g.uuid, g.mig_enabled) for g in gpus] == [(dra.gpu_uuid(NODE, i), True) for i in range(2)]


def test_a_slice_is_claimed_pinned_to_its_gpu_and_runs_where_the_driver_put_it(
    run_jobs, dra_kube, dynamic_cluster, researcher
):
    sandbox = request(run_jobs, researcher)
    allocation = Allocation.objects.get(workload=sandbox)
    assert allocation.mig_slice.state == MigSlice.State.READY  # no node-wide layout to wait for
    claim = claim_of(dra_kube, sandbox)
    expression = claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"]
    assert f"parentUUID == '{allocation.gpu.uuid}'" in expression and "profile == '1g.10gb'" in expression
    kubernetes_validate.validate(claim, DRA_SCHEMA_VERSION, strict=True)
    device = claim["status"]["allocation"]["devices"]["results"][0]["device"]
    assert device.startswith(f"gpu-{allocation.gpu.index}-mig-1g10gb-19-")
    pod = dra_kube.get("Pod", "sandbox-0", sandbox.namespace)
    assert pod["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "gpu-slice"}]
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert not any(key.startswith("nvidia.com/") for key in limits)  # the claim, not the device plugin
    hard = dra_kube.get("ResourceQuota", "sandbox-quota", sandbox.namespace)["spec"]["hard"]
    assert hard["mig.nvidia.com.deviceclass.resource.k8s.io/devices"] == "1"
    assert hard["requests.nvidia.com/gpu"] == "0"
    # the records follow the device the driver allocated
    assert MigSlice.objects.get(pk=allocation.mig_slice_id).start == int(device.rsplit("-", 1)[1])
    dra_kube.pod_running(sandbox.namespace)
    reconcile_workload(sandbox.pk)
    assert Workload.objects.get(pk=sandbox.pk).state == S.RUNNING


def test_slices_are_cut_beside_slices_in_use_on_one_gpu(run_jobs, dra_kube, dynamic_cluster, researcher):
    first = request(run_jobs, researcher, name="one", mig_profile="3g.40gb")
    second = request(run_jobs, researcher, name="two", mig_profile="3g.40gb")
    gpus = {Allocation.objects.get(workload=w).gpu_id for w in (first, second)}
    assert len(gpus) == 1  # best fit: the second 3g.40gb beside the first, on a GPU in use
    devices = {
        claim_of(dra_kube, w)["status"]["allocation"]["devices"]["results"][0]["device"]
        for w in (first, second)
    }
    assert len(devices) == 2
    starts = sorted(MigSlice.objects.filter(gpu_id__in=gpus).values_list("start", flat=True))
    assert starts == [0, 4]


def test_a_claim_the_driver_cannot_meet_leaves_the_sandbox_waiting_and_saying_why(
    run_jobs, dra_kube, dynamic_cluster, researcher
):
    sandbox = request(run_jobs, researcher, name="big", mig_profile="7g.80gb")
    gpu = Allocation.objects.get(workload=sandbox).gpu
    # Before the pod is scheduled, a workload outside the portal takes the whole GPU: the slice's
    # claim loses its device, and the scheduler tries again.
    foreign = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "outside", "namespace": "default"},
        "spec": {"devices": {"requests": []}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": dra.DRIVER, "pool": NODE, "device": f"gpu-{gpu.index}"}
        ]}}},
    }  # fmt: skip
    with dra_kube.store.lock:
        store = dra_kube.api.store
        store.put(("resourceclaims", "default", "outside"), foreign)
        claim = store.get(("resourceclaims", sandbox.namespace, "gpu-slice"))
        claim.pop("status")
        store.put(("resourceclaims", sandbox.namespace, "gpu-slice"), claim)
        dra_kube.dra.allocate_for(store.get(("pods", sandbox.namespace, "sandbox-0")))
    reconcile_workload(sandbox.pk)
    sandbox.refresh_from_db()
    assert sandbox.state == S.PROVISIONING
    assert sandbox.message.startswith(
        f"Waiting for NVIDIA's DRA driver to allocate a 7g.80gb slice on GPU {gpu.index}: "
    )
    assert "cannot allocate all claims" in sandbox.message


def test_a_cluster_set_to_layouts_keeps_them_though_the_dra_driver_is_found(db, dra_kube):
    cluster = ClusterFactory(name="dra", driver="kubernetes", api_url=dra_kube.url, mig_mode="layouts")
    discover_cluster(cluster.pk)
    cluster.refresh_from_db()
    assert cluster.dra_found and cluster.effective_mig_mode == "layouts"
    # which GPUs run MIG comes from the MIG manager's labels then: none here
    assert not Gpu.objects.filter(node__name=NODE, mig_enabled=True).exists()


def test_a_cluster_without_the_dra_driver_runs_layouts_on_auto(db, fake_kube):
    cluster = ClusterFactory(name="plain", driver="kubernetes", api_url=fake_kube.url)
    discover_cluster(cluster.pk)
    cluster.refresh_from_db()
    assert not cluster.dra_found and cluster.effective_mig_mode == "layouts"
