"""The layout protocol with the GPU Operator's MIG manager, over HTTP against the fake's MIG
manager (tests/fakekube/migmanager.py): config first, the label only once the mounted file can
show it, never a relabel while the MIG manager works, a stale `success` not taken for this
layout's, a retry after `failed` under the layout's second name, and an in-use GPU refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.fakekube import FakeKube, fixtures
from tests.fakekube.resources import BY_KIND
from workers.drivers.base import ClusterConfig
from workers.drivers.kubernetes import KubernetesDriver, KubernetesOptions
from workers.drivers.kubernetes_nodes import mig_config_name, written_at_key

fake_kube = fixtures.fake_kube
NODE = "gpu-h100-b"  # 8 MIG H100s that arrive with all-balanced (2 x 1g.10gb, 2g.20gb, 3g.40gb each)
BALANCED = [("1g.10gb", 2), ("1g.10gb", 3), ("2g.20gb", 0), ("3g.40gb", 4)]


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2030, 1, 7, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def driver_for(fake: FakeKube, clock: Clock, settle: float = 0.0) -> KubernetesDriver:
    config = ClusterConfig(name="fake", driver="kubernetes", api_url=fake.url)
    options = KubernetesOptions(timeout=(2.0, 2.0), mig_config_settle_seconds=settle)
    return KubernetesDriver(config, options, clock=clock)


def layout_with(gpu0: list[tuple[str, int]]) -> dict[int, list[tuple[str, int]]]:
    """GPU 0 as given, GPUs 1-7 keeping all-balanced."""
    return {0: gpu0, **{index: list(BALANCED) for index in range(1, 8)}}


def labels(fake: FakeKube) -> dict:
    return fake.get("Node", NODE)["metadata"]["labels"]


def settle(fake: FakeKube, steps: int = 2) -> None:
    """The kubelet refreshes the mounted config, then the MIG manager runs."""
    fake.mig.refresh_mounts()
    for _ in range(steps):
        fake.mig.step()


def test_the_config_is_written_first_and_the_node_pointed_at_it_once_the_kubelet_can_show_it(
    fake_kube: FakeKube, clock: Clock
) -> None:
    driver = driver_for(fake_kube, clock, settle=120)
    layout = layout_with([("7g.80gb", 0)])
    name = mig_config_name(NODE, layout, 8)
    driver.apply_mig_layout(NODE, layout)
    config_map = fake_kube.get("ConfigMap", "gpu-portal-mig-parted-config", "gpu-operator")
    assert name in config_map["data"]["config.yaml"]
    assert config_map["metadata"]["annotations"][written_at_key(name)] == "2030-01-07T09:00:00Z"
    assert labels(fake_kube)["nvidia.com/mig.config"] == "all-balanced"  # not yet
    clock.now += timedelta(seconds=119)
    driver.apply_mig_layout(NODE, layout)
    assert labels(fake_kube)["nvidia.com/mig.config"] == "all-balanced"
    clock.now += timedelta(seconds=2)
    driver.apply_mig_layout(NODE, layout)
    assert labels(fake_kube)["nvidia.com/mig.config"] == name
    assert labels(fake_kube)["nvidia.com/mig.config.state"] == "pending"
    assert driver.mig_layout_state(NODE, layout) == "pending"
    settle(fake_kube)
    assert driver.mig_layout_state(NODE, layout) == "success"
    allocatable = fake_kube.get("Node", NODE)["status"]["allocatable"]
    assert allocatable["nvidia.com/mig-7g.80gb"] == "1" and allocatable["nvidia.com/mig-3g.40gb"] == "7"


def test_the_node_is_never_relabelled_while_the_mig_manager_works(fake_kube: FakeKube, clock: Clock) -> None:
    driver = driver_for(fake_kube, clock)
    first, second = layout_with([("7g.80gb", 0)]), layout_with([("4g.40gb", 0)])
    driver.apply_mig_layout(NODE, first)
    fake_kube.mig.refresh_mounts()
    fake_kube.mig.step()  # picked up: pending
    driver.apply_mig_layout(NODE, second)
    assert labels(fake_kube)["nvidia.com/mig.config"] == mig_config_name(NODE, first, 8)
    fake_kube.mig.step()  # the first change ends
    assert driver.mig_layout_state(NODE, first) == "success"
    driver.apply_mig_layout(NODE, second)
    assert labels(fake_kube)["nvidia.com/mig.config"] == mig_config_name(NODE, second, 8)
    settle(fake_kube)
    assert driver.mig_layout_state(NODE, second) == "success"
    assert [outcome for _, _, outcome in fake_kube.mig.history] == ["success: applied"] * 2


def test_a_stale_success_is_not_taken_for_the_new_layout(fake_kube: FakeKube, clock: Clock) -> None:
    """Someone relabels the node while a change runs: the MIG manager finishes that change and
    writes `success`, which the portal must not read as the new layout's."""
    driver = driver_for(fake_kube, clock)
    first, second = layout_with([("7g.80gb", 0)]), layout_with([("4g.40gb", 0)])
    driver.apply_mig_layout(NODE, first)
    fake_kube.mig.refresh_mounts()
    fake_kube.mig.step()
    second_name = mig_config_name(NODE, second, 8)
    driver._write_mig_config(NODE, second_name, [], keep=mig_config_name(NODE, first, 8))
    fake_kube.set_node_labels(NODE, {"nvidia.com/mig.config": second_name})
    fake_kube.mig.step()  # the first change finishes
    assert labels(fake_kube)["nvidia.com/mig.config.state"] == "success"
    assert driver.mig_layout_state(NODE, second) == "pending"


def test_a_config_the_mounted_file_lacks_fails_and_is_retried_under_its_second_name(
    fake_kube: FakeKube, clock: Clock
) -> None:
    driver = driver_for(fake_kube, clock)  # no settle time: the kubelet has not refreshed the file
    layout = layout_with([("7g.80gb", 0)])
    driver.apply_mig_layout(NODE, layout)
    fake_kube.mig.step()
    fake_kube.mig.step()
    assert fake_kube.mig.history[-1][2] == "failed: config not found in the mounted file"
    assert driver.mig_layout_state(NODE, layout) == "failed"
    driver.apply_mig_layout(NODE, layout)  # not asked to retry: left as it is
    assert labels(fake_kube)["nvidia.com/mig.config"] == mig_config_name(NODE, layout, 8)
    driver.apply_mig_layout(NODE, layout, retry=True)  # a new label value, or the MIG manager waits
    assert labels(fake_kube)["nvidia.com/mig.config"] == mig_config_name(NODE, layout, 8, retry=True)
    assert driver.mig_layout_state(NODE, layout) == "pending"
    settle(fake_kube)
    assert driver.mig_layout_state(NODE, layout) == "success"


def mig_pod(fake: FakeKube, name: str, profile: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"limits": {f"nvidia.com/mig-{profile}": "1"}},
                }
            ],
        },
    }
    with fake.store.lock:
        fake.api.create(BY_KIND["Pod"], "default", body)


def test_changing_a_gpu_whose_slice_a_pod_holds_fails_in_use_and_unchanged_gpus_are_left_alone(
    fake_kube: FakeKube, clock: Clock
) -> None:
    driver = driver_for(fake_kube, clock)
    mig_pod(fake_kube, "busy", "3g.40gb")
    fake_kube.mig.assign("default", "busy", 3)  # the kubelet chose GPU 3, whatever the portal thought
    busy = {**layout_with(list(BALANCED)), 3: [("7g.80gb", 0)]}
    driver.apply_mig_layout(NODE, busy)
    settle(fake_kube)
    assert fake_kube.mig.history[-1][2] == "failed: GPU 3 in use"
    assert driver.mig_layout_state(NODE, busy) == "failed"
    free = layout_with([("7g.80gb", 0)])  # GPU 3 keeps its layout: nothing touches it
    driver.apply_mig_layout(NODE, free)
    settle(fake_kube)
    assert driver.mig_layout_state(NODE, free) == "success"
    assert fake_kube.mig.devices_in_use(NODE) == {3: {"3g.40gb": 1}}


def test_asking_for_the_applied_layout_again_writes_nothing(fake_kube: FakeKube, clock: Clock) -> None:
    driver = driver_for(fake_kube, clock)
    layout = layout_with([("2g.20gb", 0), ("2g.20gb", 2)])
    driver.apply_mig_layout(NODE, layout)
    settle(fake_kube)
    fake_kube.requests.clear()
    driver.apply_mig_layout(NODE, layout)
    assert not [r for r in fake_kube.requests if r.verb in ("create", "patch")]
    assert driver.mig_layout_state(NODE, layout) == "success"


def test_a_new_layout_replaces_the_nodes_old_configs_and_keeps_other_nodes(
    fake_kube: FakeKube, clock: Clock
) -> None:
    driver = driver_for(fake_kube, clock)
    driver.apply_mig_layout("gpu-h100-a", {0: [("1g.10gb", 0)]})
    names = []
    for gpu0 in ([("1g.10gb", 0)], [("3g.40gb", 0)], [("4g.40gb", 0)]):
        layout = layout_with(gpu0)
        driver.apply_mig_layout(NODE, layout)
        settle(fake_kube)
        assert driver.mig_layout_state(NODE, layout) == "success"
        names.append(labels(fake_kube)["nvidia.com/mig.config"])
    config_map = fake_kube.get("ConfigMap", "gpu-portal-mig-parted-config", "gpu-operator")
    text = config_map["data"]["config.yaml"]
    assert len(set(names)) == 3
    assert names[0] not in text and names[2] in text
    assert "gpu-portal-gpu-h100-a-" in text
    stamped = {key for key in config_map["metadata"]["annotations"] if key.startswith("mig.gpu-portal.io/")}
    assert written_at_key(names[0]) not in stamped and written_at_key(names[2]) in stamped


def test_the_fake_device_plugin_under_the_single_strategy_wants_one_profile_per_node(
    fake_kube: FakeKube, clock: Clock
) -> None:
    """gpu-a100-a runs the single strategy with all-1g.5gb: MIG devices are `nvidia.com/gpu`, and a
    node whose GPUs carry different profiles is labelled -MIG-INVALID with nothing allocatable
    (why the portal leaves such nodes out of MIG placement)."""
    node = "gpu-a100-a"
    assert fake_kube.get("Node", node)["status"]["allocatable"]["nvidia.com/gpu"] == "28"
    driver = driver_for(fake_kube, clock)
    mixed = {0: [("3g.20gb", 0), ("3g.20gb", 4)], 1: [("1g.5gb", 0)], 2: [("1g.5gb", 1)], 3: [("1g.5gb", 2)]}
    driver.apply_mig_layout(node, mixed)
    settle(fake_kube)
    found = fake_kube.get("Node", node)
    assert found["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-MIG-INVALID"
    assert found["status"]["allocatable"]["nvidia.com/gpu"] == "0"
    uniform = {index: [("3g.20gb", 0), ("3g.20gb", 4)] for index in range(4)}
    driver.apply_mig_layout(node, uniform)
    settle(fake_kube)
    found = fake_kube.get("Node", node)
    assert found["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb"
    assert found["status"]["allocatable"]["nvidia.com/gpu"] == "8"
