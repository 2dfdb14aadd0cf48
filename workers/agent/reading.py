"""One reading of a node's GPUs through NVML (nvidia-ml-py's `pynvml`, or a module that answers
as it does): per GPU its identity, MIG mode, utilization, memory, power, temperature, ECC errors,
XID events since the last reading and running processes; per MIG device its GPU instance's
profile and placement, memory, and utilization where the GPU can give it (GPM, Hopper and later).

A figure NVML cannot give is None with the reason in `unsupported`, never a made-up zero; a GPU
that fails as a whole (lost, needing a reset) is reported with `error` set, and the others still
are."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from workers.agent.podresources import PodDevices


@dataclass
class MigReading:
    uuid: str
    gpu_instance_id: int
    profile: str  # "1g.10gb"
    start: int
    size: int
    memory_used_mb: int | None = None
    memory_total_mb: int | None = None
    utilization_percent: float | None = None
    unsupported: dict[str, str] = field(default_factory=dict)
    pods: list[dict] | None = None  # who the kubelet gave it to; None: not known (no PodResources)


@dataclass
class GpuReading:
    index: int
    uuid: str = ""
    product: str = ""
    mig_enabled: bool | None = None
    utilization_percent: int | None = None
    memory_used_mb: int | None = None
    memory_total_mb: int | None = None
    power_watts: float | None = None
    temperature_c: int | None = None
    ecc_uncorrected_volatile: int | None = None
    xid_events: list[int] = field(default_factory=list)
    processes: list[dict] = field(default_factory=list)  # {"pid", "used_memory_mb"}
    mig_devices: list[MigReading] = field(default_factory=list)
    unsupported: dict[str, str] = field(default_factory=dict)
    error: str = ""  # the GPU as a whole failed: lost, needs a reset
    pods: list[dict] | None = None  # who the kubelet gave the whole GPU to; None: not known


@dataclass
class NodeReading:
    node: str
    taken_at: float
    driver_version: str = ""
    gpus: list[GpuReading] = field(default_factory=list)
    error: str = ""  # NVML itself failed (no driver, no library)
    pods_error: str = ""  # why no device -> pod mapping came with this reading
    claims: list[dict] = field(default_factory=list)  # devices given through DRA claims


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _mb(value: int) -> int:
    return int(value) // 2**20


class _Reader:
    def __init__(self, nvml: Any, gpm_interval: float):
        self.nvml = nvml
        self.gpm_interval = gpm_interval

    def guarded(self, target: GpuReading | MigReading, name: str, read: Any) -> Any:
        """`read()`, or None with the reason noted when NVML cannot give that figure; a lost GPU
        propagates (the caller reports the GPU as failed)."""
        try:
            return read()
        except self.nvml.NVMLError as error:
            if isinstance(error, (self.nvml.NVMLError_GpuIsLost, self.nvml.NVMLError_ResetRequired)):
                raise
            target.unsupported[name] = str(error)
            return None

    def gpu(self, index: int, xids: dict[str, list[int]]) -> GpuReading:
        nvml, reading = self.nvml, GpuReading(index=index)
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            reading.uuid = _text(nvml.nvmlDeviceGetUUID(handle))
            reading.product = _text(nvml.nvmlDeviceGetName(handle))
            reading.xid_events = xids.get(reading.uuid, [])
            mode = self.guarded(reading, "mig_mode", lambda: nvml.nvmlDeviceGetMigMode(handle))
            reading.mig_enabled = None if mode is None else mode[0] == nvml.NVML_DEVICE_MIG_ENABLE
            memory = self.guarded(reading, "memory", lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
            if memory is not None:
                reading.memory_used_mb, reading.memory_total_mb = _mb(memory.used), _mb(memory.total)
            if reading.mig_enabled:
                # a MIG GPU's own utilization is not defined: its devices' (GPM) is
                reading.unsupported["utilization"] = "MIG mode: see its MIG devices"
            else:
                rates = self.guarded(
                    reading, "utilization", lambda: nvml.nvmlDeviceGetUtilizationRates(handle)
                )
                reading.utilization_percent = None if rates is None else int(rates.gpu)
            power = self.guarded(reading, "power", lambda: nvml.nvmlDeviceGetPowerUsage(handle))
            reading.power_watts = None if power is None else power / 1000
            reading.temperature_c = self.guarded(
                reading,
                "temperature",
                lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
            )
            reading.ecc_uncorrected_volatile = self.guarded(
                reading,
                "ecc",
                lambda: nvml.nvmlDeviceGetTotalEccErrors(
                    handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
                ),
            )
            processes = self.guarded(
                reading, "processes", lambda: nvml.nvmlDeviceGetComputeRunningProcesses(handle)
            )
            reading.processes = [
                {"pid": int(p.pid), "used_memory_mb": _mb(p.usedGpuMemory) if p.usedGpuMemory else None}
                for p in processes or []
            ]
            if reading.mig_enabled:
                reading.mig_devices = self.mig_devices(handle, reading)
        except nvml.NVMLError as error:
            reading.error = str(error)
        return reading

    def profile_names(self, handle: Any) -> dict[int, str]:
        """GPU instance profile id -> name ("1g.10gb") for the profiles this GPU offers."""
        nvml, names = self.nvml, {}
        for profile in range(nvml.NVML_GPU_INSTANCE_PROFILE_COUNT):
            try:
                info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, profile)
            except nvml.NVMLError:
                continue  # not offered on this GPU
            names[int(info.id)] = _text(info.name).removeprefix("MIG ").strip()
        return names

    def mig_devices(self, handle: Any, gpu: GpuReading) -> list[MigReading]:
        nvml = self.nvml
        names = self.profile_names(handle)
        gpm = self.guarded(gpu, "gpm", lambda: nvml.nvmlGpmQueryDeviceSupport(handle))
        gpm_ok = bool(gpm and gpm.isSupportedDevice)
        devices = []
        for slot in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            except nvml.NVMLError_NotFound:
                continue  # no MIG device in this slot
            gi_id = int(nvml.nvmlDeviceGetGpuInstanceId(mig))
            info = nvml.nvmlGpuInstanceGetInfo(nvml.nvmlDeviceGetGpuInstanceById(handle, gi_id))
            device = MigReading(
                uuid=_text(nvml.nvmlDeviceGetUUID(mig)),
                gpu_instance_id=gi_id,
                profile=names.get(int(info.profileId), f"profile {int(info.profileId)}"),
                start=int(info.placement.start),
                size=int(info.placement.size),
            )
            memory = self.guarded(device, "memory", partial(nvml.nvmlDeviceGetMemoryInfo, mig))
            if memory is not None:
                device.memory_used_mb, device.memory_total_mb = _mb(memory.used), _mb(memory.total)
            if gpm_ok:
                device.utilization_percent = self.guarded(
                    device, "utilization", partial(self.gpm_util, handle, gi_id)
                )
            else:
                device.unsupported["utilization"] = "this GPU has no GPM (Hopper and later have it)"
            devices.append(device)
        return devices

    def gpm_util(self, handle: Any, gi_id: int) -> float:
        """Graphics (compute) activity of one GPU instance over `gpm_interval`, from two GPM samples."""
        nvml = self.nvml
        first, second = nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()
        try:
            nvml.nvmlGpmMigSampleGet(handle, gi_id, first)
            time.sleep(self.gpm_interval)
            nvml.nvmlGpmMigSampleGet(handle, gi_id, second)
            request = nvml.c_nvmlGpmMetricsGet_t()
            request.version = nvml.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = 1
            request.sample1, request.sample2 = first, second
            request.metrics[0].metricId = nvml.NVML_GPM_METRIC_GRAPHICS_UTIL
            answer = nvml.nvmlGpmMetricsGet(request)
            return round(float(answer.metrics[0].value), 1)
        finally:
            nvml.nvmlGpmSampleFree(first)
            nvml.nvmlGpmSampleFree(second)


class XidWatch:
    """XID errors (critical ones) as NVML's event set delivers them, collected between readings."""

    def __init__(self, nvml: Any):
        self.nvml = nvml
        self.events = None
        try:
            self.events = nvml.nvmlEventSetCreate()
            for index in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                try:
                    nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, self.events)
                except nvml.NVMLError:
                    continue  # this GPU cannot deliver them (MIG mode on some drivers)
        except nvml.NVMLError:
            self.events = None

    def drain(self) -> dict[str, list[int]]:
        """GPU UUID -> XID codes that came since the last drain."""
        nvml, found = self.nvml, {}
        while self.events is not None:
            try:
                event = nvml.nvmlEventSetWait(self.events, 0)
            except nvml.NVMLError_Timeout:
                break
            except nvml.NVMLError:
                break
            found.setdefault(_text(nvml.nvmlDeviceGetUUID(event.device)), []).append(int(event.eventData))
        return found


def read_node(
    nvml: Any,
    node: str,
    *,
    xids: XidWatch | None = None,
    gpm_interval: float = 0.1,
    pods: PodDevices | None = None,
) -> NodeReading:
    """One reading of every GPU of the node (NVML initialised by the caller), with who holds each
    device where the kubelet's PodResources answered (`pods`)."""
    reading = NodeReading(node=node, taken_at=time.time())
    try:
        reading.driver_version = _text(nvml.nvmlSystemGetDriverVersion())
        count = nvml.nvmlDeviceGetCount()
    except nvml.NVMLError as error:
        reading.error = str(error)
        return reading
    reader, events = _Reader(nvml, gpm_interval), (xids.drain() if xids else {})
    reading.gpus = [reader.gpu(index, events) for index in range(count)]
    if pods is not None:
        _attach_pods(reading, pods)
    return reading


def _attach_pods(reading: NodeReading, pods: PodDevices) -> None:
    reading.pods_error, reading.claims = pods.error, pods.claims
    if pods.error:
        return  # not known: the portal must not read "nobody holds it"
    for gpu in reading.gpus:
        gpu.pods = pods.holders(gpu.uuid)
        for mig in gpu.mig_devices:
            mig.pods = pods.holders(mig.uuid)
