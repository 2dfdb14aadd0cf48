"""The device -> pod mapping from the kubelet's PodResources API, over gRPC against a fake kubelet."""

from __future__ import annotations

import json

import pytest

from tests.agent.fakekubelet import FakeKubelet, FakePod
from tests.agent.fakenvml import FakeGpu, FakeMig, FakeNvml
from workers.agent.__main__ import main
from workers.agent.podresources import list_pod_devices
from workers.agent.reading import read_node


@pytest.fixture
def socket_path(tmp_path):
    return str(tmp_path / "kubelet.sock")


PODS = [
    FakePod("gp-alice-nb-1", "sandbox", {"nvidia.com/gpu": ["GPU-busy"]}),
    FakePod("gp-ml-llama", "llama-0", {"nvidia.com/mig-1g.10gb": ["MIG-a"], "cpu": ["0"]}),
    # time-slicing: the device plugin hands out replicas of one GPU as "<uuid>::<n>"
    FakePod("other", "shared-1", {"nvidia.com/gpu.shared": ["GPU-shared::0"]}),
    FakePod("other", "shared-2", {"nvidia.com/gpu.shared": ["GPU-shared::3"]}),
    FakePod("gp-bob-nb-2", "dra", claims=[("gpu", "gpu.nvidia.com", "node-a", "gpu-0-mig-1g10gb-0-0")]),
]


def test_the_kubelet_says_which_container_holds_which_device(socket_path):
    with FakeKubelet(socket_path, PODS) as kubelet:
        found = list_pod_devices(socket_path)
    assert kubelet.calls == 1 and found.error == ""
    assert found.holders("GPU-busy") == [
        {"namespace": "gp-alice-nb-1", "pod": "sandbox", "container": "main", "resource": "nvidia.com/gpu"}
    ]
    assert [h["pod"] for h in found.holders("GPU-shared")] == ["shared-1", "shared-2"]  # replicas folded
    assert "0" not in found.devices  # not an NVIDIA resource
    assert found.claims == [
        {"namespace": "gp-bob-nb-2", "pod": "dra", "claim": "gpu", "driver": "gpu.nvidia.com",
         "pool": "node-a", "device": "gpu-0-mig-1g10gb-0-0"}
    ]  # fmt: skip


def test_a_kubelet_that_does_not_answer_is_an_error_not_an_empty_node(tmp_path):
    found = list_pod_devices(str(tmp_path / "absent.sock"), timeout=0.5)
    assert found.devices == {} and found.error.startswith("PodResources: UNAVAILABLE")


def _nvml() -> FakeNvml:
    nvml = FakeNvml(
        [
            FakeGpu(uuid="GPU-busy"),
            FakeGpu(uuid="GPU-mig", mig_enabled=True, migs=[
                FakeMig(gi_id=9, profile_index=0, start=6, size=1, uuid="MIG-a"),
                FakeMig(gi_id=2, profile_index=2, start=0, size=4, uuid="MIG-b"),
            ]),
        ]
    )  # fmt: skip
    nvml.nvmlInit()
    return nvml


def test_each_device_of_a_reading_names_its_holders(socket_path):
    with FakeKubelet(socket_path, PODS):
        reading = read_node(_nvml(), "n", gpm_interval=0, pods=list_pod_devices(socket_path))
    whole, sliced = reading.gpus
    assert [p["namespace"] for p in whole.pods] == ["gp-alice-nb-1"]
    assert sliced.pods == []  # the MIG GPU itself is nobody's
    assert {m.uuid: [p["pod"] for p in m.pods] for m in sliced.mig_devices} == {
        "MIG-a": ["llama-0"],
        "MIG-b": [],
    }
    assert reading.pods_error == "" and len(reading.claims) == 1


def test_without_the_kubelet_the_holders_are_unknown_not_nobody(tmp_path):
    reading = read_node(
        _nvml(), "n", gpm_interval=0, pods=list_pod_devices(str(tmp_path / "x.sock"), timeout=0.5)
    )
    assert reading.pods_error and all(g.pods is None for g in reading.gpus)
    assert all(m.pods is None for m in reading.gpus[1].mig_devices)


def test_once_prints_the_holders_and_says_when_the_socket_is_missing(socket_path, tmp_path, capsys):
    with FakeKubelet(socket_path, PODS):
        assert main(["--once", "--node", "n", "--pod-resources", socket_path], nvml=_nvml()) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["gpus"][0]["pods"][0]["pod"] == "sandbox"
    assert main(["--once", "--node", "n", "--pod-resources", str(tmp_path / "none.sock")], nvml=_nvml()) == 0
    printed = json.loads(capsys.readouterr().out)
    assert "no socket" in printed["pods_error"] and printed["gpus"][0]["pods"] is None


def _field(number: int, payload: bytes | str) -> bytes:
    """One length-delimited protobuf field, encoded by hand (not through the agent's declarations)."""
    data = payload.encode() if isinstance(payload, str) else payload
    assert len(data) < 128
    return bytes([number << 3 | 2, len(data)]) + data


def test_the_declared_messages_read_the_kubelets_wire_format():
    """Field numbers as the kubelet's v1 API has them: PodResources{name=1, namespace=2,
    containers=3}, ContainerResources{name=1, devices=2, dynamic_resources=5},
    ContainerDevices{resource_name=1, device_ids=2}, DynamicResource{claim_name=2,
    claim_namespace=3, claim_resources=4}, ClaimResource{driver_name=2, pool_name=3, device_name=4}."""
    from workers.agent.podresources import MESSAGES

    devices = _field(1, "nvidia.com/gpu") + _field(2, "GPU-1") + _field(2, "GPU-2")
    claim = (
        _field(2, "c")
        + _field(3, "ns")
        + _field(4, _field(2, "gpu.nvidia.com") + _field(3, "p") + _field(4, "d"))
    )
    container = _field(1, "main") + _field(2, devices) + _field(5, claim)
    wire = _field(1, _field(1, "pod") + _field(2, "ns") + _field(3, container))
    answer = MESSAGES["ListPodResourcesResponse"].FromString(wire)
    (pod,) = answer.pod_resources
    (held,) = pod.containers[0].devices
    (dynamic,) = pod.containers[0].dynamic_resources
    assert (pod.name, pod.namespace, held.resource_name, list(held.device_ids)) == (
        "pod", "ns", "nvidia.com/gpu", ["GPU-1", "GPU-2"]
    )  # fmt: skip
    assert (dynamic.claim_name, dynamic.claim_resources[0].device_name) == ("c", "d")
