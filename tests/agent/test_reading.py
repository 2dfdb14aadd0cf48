"""The node agent's NVML reading, against a fake NVML that answers as nvidia-ml-py does."""

from __future__ import annotations

import json

import pytest

from tests.agent.fakenvml import FakeGpu, FakeMig, FakeNvml
from workers.agent.__main__ import main
from workers.agent.reading import XidWatch, read_node
from workers.agent.report import ReadingBuffer


@pytest.fixture
def node() -> FakeNvml:
    busy = FakeGpu(
        uuid="GPU-busy", utilization=87, memory_used_mb=40_000, processes=[(4242, 39_000)], power_mw=612_345
    )
    sliced = FakeGpu(
        uuid="GPU-mig",
        mig_enabled=True,
        migs=[
            FakeMig(
                gi_id=9, profile_index=0, start=6, size=1, uuid="MIG-a", memory_used_mb=5000, utilization=42.5
            ),
            FakeMig(
                gi_id=2, profile_index=2, start=0, size=4, uuid="MIG-b", memory_used_mb=100, utilization=0.0
            ),
        ],
    )
    ampere = FakeGpu(uuid="GPU-a100", name="NVIDIA A100-SXM4-80GB", hopper=False, mig_enabled=True,
                     migs=[FakeMig(gi_id=1, profile_index=0, start=0, size=1, uuid="MIG-c")])  # fmt: skip
    nvml = FakeNvml([busy, sliced, ampere])
    nvml.nvmlInit()
    return nvml


def test_a_whole_gpu_reads_as_nvml_gives_it(node):
    reading = read_node(node, "gpu-h100-a", gpm_interval=0)
    assert reading.driver_version == "570.124.06" and reading.error == ""
    gpu = reading.gpus[0]
    assert (gpu.uuid, gpu.product, gpu.mig_enabled) == ("GPU-busy", "NVIDIA H100 80GB HBM3", False)
    assert (gpu.utilization_percent, gpu.memory_used_mb, gpu.memory_total_mb) == (87, 40_000, 81_559)
    assert gpu.power_watts == 612.345 and gpu.temperature_c == 35 and gpu.ecc_uncorrected_volatile == 0
    assert gpu.processes == [{"pid": 4242, "used_memory_mb": 39_000}]
    assert gpu.unsupported == {}


def test_mig_devices_carry_their_profile_placement_and_gpm_utilization_on_hopper_only(node):
    reading = read_node(node, "n", gpm_interval=0)
    sliced, ampere = reading.gpus[1], reading.gpus[2]
    assert sliced.utilization_percent is None and "MIG mode" in sliced.unsupported["utilization"]
    assert [(m.uuid, m.gpu_instance_id, m.profile, m.start, m.size, m.memory_used_mb, m.utilization_percent)
            for m in sliced.mig_devices] == [
        ("MIG-a", 9, "1g.10gb", 6, 1, 5000, 42.5),
        ("MIG-b", 2, "3g.40gb", 0, 4, 100, 0.0),  # a measured zero, from GPM
    ]  # fmt: skip
    (device,) = ampere.mig_devices
    assert device.utilization_percent is None  # Ampere has no GPM: not a made-up zero
    assert "no GPM" in device.unsupported["utilization"]
    assert node.samples_freed == 4  # two GPM samples per measured instance, freed


def test_an_unsupported_figure_is_none_with_the_reason_and_a_lost_gpu_does_not_stop_the_others(node):
    node.gpus[0].unsupported = {"nvmlDeviceGetPowerUsage", "nvmlDeviceGetTotalEccErrors"}
    node.gpus[1].lost = True
    reading = read_node(node, "n", gpm_interval=0)
    whole, lost, ampere = reading.gpus
    assert whole.power_watts is None and whole.unsupported["power"] == "Not Supported"
    assert whole.ecc_uncorrected_volatile is None and whole.utilization_percent == 87  # the rest is read
    assert lost.error == "GPU is lost" and lost.mig_devices == []
    assert ampere.error == "" and ampere.mig_devices


def test_xid_errors_come_with_the_next_reading_of_their_gpu(node):
    watch = XidWatch(node)
    assert node.registered == {"GPU-busy", "GPU-mig", "GPU-a100"}
    node.xid(node.gpus[0], 79)  # fallen off the bus
    node.xid(node.gpus[0], 48)
    reading = read_node(node, "n", xids=watch, gpm_interval=0)
    assert reading.gpus[0].xid_events == [79, 48] and reading.gpus[1].xid_events == []
    assert read_node(node, "n", xids=watch, gpm_interval=0).gpus[0].xid_events == []  # reported once


def test_a_node_without_a_driver_says_so_instead_of_failing():
    nvml = FakeNvml([])  # never initialised: NVML answers Uninitialized
    reading = read_node(nvml, "n")
    assert reading.gpus == [] and reading.error == "Uninitialized"


def test_the_buffer_keeps_the_newest_and_counts_what_it_dropped(node):
    buffer = ReadingBuffer(capacity=3)
    for _ in range(5):
        buffer.add(read_node(node, "n", gpm_interval=0))
    assert len(buffer.readings) == 3 and buffer.dropped == 2


def test_once_prints_one_reading_as_json(node, capsys):
    node.nvmlShutdown()
    assert main(["--once", "--node", "gpu-h100-a"], nvml=node) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["node"] == "gpu-h100-a" and [g["uuid"] for g in printed["gpus"]] == [
        "GPU-busy",
        "GPU-mig",
        "GPU-a100",
    ]
    assert not node.initialised  # NVML shut down again
