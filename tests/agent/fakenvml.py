"""A fake of nvidia-ml-py's `pynvml` for the node agent's tests: the functions the agent calls,
answering as NVML does, with pynvml's own error classes (NVMLError_NotSupported, _GpuIsLost,
_NotFound, _Timeout ... raised exactly as pynvml raises them) and constants.

Each FakeGpu says what it is (Hopper GPUs have GPM, Ampere ones do not), its MIG devices (GPU
instance id, profile, placement), which calls it does not support, and whether it is lost."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pynvml

# the real error classes and constants: the agent catches what pynvml raises
NVMLError = pynvml.NVMLError
NVMLError_NotSupported = pynvml.NVMLError_NotSupported
NVMLError_GpuIsLost = pynvml.NVMLError_GpuIsLost
NVMLError_ResetRequired = pynvml.NVMLError_ResetRequired
NVMLError_NotFound = pynvml.NVMLError_NotFound
NVMLError_Timeout = pynvml.NVMLError_Timeout
NVMLError_Uninitialized = pynvml.NVMLError_Uninitialized
NVMLError_DriverNotLoaded = pynvml.NVMLError_DriverNotLoaded
NVML_DEVICE_MIG_ENABLE = pynvml.NVML_DEVICE_MIG_ENABLE
NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
NVML_VOLATILE_ECC = pynvml.NVML_VOLATILE_ECC
NVML_GPU_INSTANCE_PROFILE_COUNT = pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT
NVML_GPM_METRICS_GET_VERSION = pynvml.NVML_GPM_METRICS_GET_VERSION
NVML_GPM_METRIC_GRAPHICS_UTIL = pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL
nvmlEventTypeXidCriticalError = pynvml.nvmlEventTypeXidCriticalError
MiB = 2**20

# H100 80GB: GPU instance profile index -> (profile id NVML reports, name as its v2 info gives it)
H100_PROFILES = {
    0: (19, b"MIG 1g.10gb"),
    1: (14, b"MIG 2g.20gb"),
    2: (9, b"MIG 3g.40gb"),
    3: (5, b"MIG 4g.40gb"),
    4: (0, b"MIG 7g.80gb"),
}


@dataclass
class FakeMig:
    gi_id: int
    profile_index: int
    start: int
    size: int
    uuid: str
    memory_used_mb: int = 0
    memory_total_mb: int = 9984
    utilization: float = 0.0  # what GPM reports for its GPU instance


@dataclass
class FakeGpu:
    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    hopper: bool = True
    mig_enabled: bool = False
    utilization: int = 0
    memory_used_mb: int = 0
    memory_total_mb: int = 81559
    power_mw: int = 70_000
    temperature_c: int = 35
    ecc_uncorrected: int = 0
    processes: list[tuple[int, int]] = field(default_factory=list)  # (pid, MiB)
    migs: list[FakeMig] = field(default_factory=list)
    unsupported: set[str] = field(default_factory=set)  # function names answering NotSupported
    lost: bool = False


class FakeNvml:
    """Install with `monkeypatch.setitem(sys.modules, "pynvml", fake)`, or pass it to the agent."""

    def __init__(self, gpus: list[FakeGpu], *, driver: str = "570.124.06"):
        self.gpus, self.driver = gpus, driver
        self.initialised = False
        self.events: list[SimpleNamespace] = []
        self.registered: set[str] = set()
        self.samples_freed = 0
        # the real error classes and constants, under the same names pynvml has
        for name, value in list(globals().items()):
            if name.startswith(("NVMLError", "NVML_", "nvmlEventType")):
                setattr(self, name, value)

    # --- library ----------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.initialised = False

    def _ready(self) -> None:
        if not self.initialised:
            raise NVMLError_Uninitialized()

    def nvmlSystemGetDriverVersion(self) -> str:
        self._ready()
        return self.driver

    def nvmlDeviceGetCount(self) -> int:
        self._ready()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        self._ready()
        return self.gpus[index]

    def _gpu(self, handle: FakeGpu, call: str) -> FakeGpu:
        if handle.lost:
            raise NVMLError_GpuIsLost()
        if call in handle.unsupported:
            raise NVMLError_NotSupported()
        return handle

    # --- a GPU ------------------------------------------------------------------------------
    def nvmlDeviceGetUUID(self, handle: FakeGpu | FakeMig) -> str:
        return handle.uuid if isinstance(handle, FakeMig) else self._gpu(handle, "uuid").uuid

    def nvmlDeviceGetName(self, handle: FakeGpu) -> str:
        return self._gpu(handle, "name").name

    def nvmlDeviceGetMigMode(self, handle: FakeGpu) -> list[int]:
        gpu = self._gpu(handle, "nvmlDeviceGetMigMode")
        return [int(gpu.mig_enabled), int(gpu.mig_enabled)]

    def nvmlDeviceGetMemoryInfo(self, handle: FakeGpu | FakeMig) -> SimpleNamespace:
        if isinstance(handle, FakeMig):
            return SimpleNamespace(used=handle.memory_used_mb * MiB, total=handle.memory_total_mb * MiB)
        gpu = self._gpu(handle, "nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(used=gpu.memory_used_mb * MiB, total=gpu.memory_total_mb * MiB)

    def nvmlDeviceGetUtilizationRates(self, handle: FakeGpu) -> SimpleNamespace:
        gpu = self._gpu(handle, "nvmlDeviceGetUtilizationRates")
        if gpu.mig_enabled:
            raise NVMLError_NotSupported()  # as NVML answers for a GPU in MIG mode
        return SimpleNamespace(gpu=gpu.utilization, memory=0)

    def nvmlDeviceGetPowerUsage(self, handle: FakeGpu) -> int:
        return self._gpu(handle, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetTemperature(self, handle: FakeGpu, sensor: int) -> int:
        return self._gpu(handle, "nvmlDeviceGetTemperature").temperature_c

    def nvmlDeviceGetTotalEccErrors(self, handle: FakeGpu, error_type: int, counter: int) -> int:
        return self._gpu(handle, "nvmlDeviceGetTotalEccErrors").ecc_uncorrected

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeGpu) -> list[SimpleNamespace]:
        gpu = self._gpu(handle, "nvmlDeviceGetComputeRunningProcesses")
        return [SimpleNamespace(pid=pid, usedGpuMemory=mb * MiB) for pid, mb in gpu.processes]

    # --- MIG --------------------------------------------------------------------------------
    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle: FakeGpu, profile: int) -> SimpleNamespace:
        self._gpu(handle, "profiles")
        if profile not in H100_PROFILES:
            raise NVMLError_NotSupported()
        profile_id, name = H100_PROFILES[profile]
        return SimpleNamespace(id=profile_id, name=name)

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: FakeGpu) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: FakeGpu, index: int) -> FakeMig:
        gpu = self._gpu(handle, "migs")
        if index >= len(gpu.migs):
            raise NVMLError_NotFound()
        return gpu.migs[index]

    def nvmlDeviceGetGpuInstanceId(self, mig: FakeMig) -> int:
        return mig.gi_id

    def nvmlDeviceGetGpuInstanceById(self, handle: FakeGpu, gi_id: int) -> FakeMig:
        return next(m for m in handle.migs if m.gi_id == gi_id)

    def nvmlGpuInstanceGetInfo(self, gi: FakeMig) -> SimpleNamespace:
        profile_id = H100_PROFILES[gi.profile_index][0]
        return SimpleNamespace(
            id=gi.gi_id, profileId=profile_id, placement=SimpleNamespace(start=gi.start, size=gi.size)
        )

    # --- GPM (Hopper and later) ---------------------------------------------------------------
    def nvmlGpmQueryDeviceSupport(self, handle: FakeGpu) -> SimpleNamespace:
        return SimpleNamespace(version=1, isSupportedDevice=int(self._gpu(handle, "gpm").hopper))

    def nvmlGpmSampleAlloc(self) -> SimpleNamespace:
        return SimpleNamespace(gpu=None, gi_id=None)

    def nvmlGpmSampleFree(self, sample: SimpleNamespace) -> None:
        self.samples_freed += 1

    def nvmlGpmMigSampleGet(self, handle: FakeGpu, gi_id: int, sample: SimpleNamespace) -> SimpleNamespace:
        if not handle.hopper:
            raise NVMLError_NotSupported()
        sample.gpu, sample.gi_id = handle, gi_id
        return sample

    class c_nvmlGpmMetricsGet_t:
        def __init__(self) -> None:
            self.version = 0
            self.numMetrics = 0
            self.sample1 = self.sample2 = None
            self.metrics = [SimpleNamespace(metricId=0, value=0.0) for _ in range(4)]

    def nvmlGpmMetricsGet(self, request) -> object:
        sample = request.sample2
        mig = next(m for m in sample.gpu.migs if m.gi_id == sample.gi_id)
        request.metrics[0].value = mig.utilization
        return request

    # --- events -------------------------------------------------------------------------------
    def nvmlEventSetCreate(self) -> list:
        return self.events

    def nvmlDeviceRegisterEvents(self, handle: FakeGpu, kinds: int, event_set: list) -> None:
        self.registered.add(self._gpu(handle, "events").uuid)

    def nvmlEventSetWait(self, event_set: list, timeout_ms: int) -> SimpleNamespace:
        if not event_set:
            raise NVMLError_Timeout()
        return event_set.pop(0)

    def xid(self, gpu: FakeGpu, code: int) -> None:
        """The driver reports XID `code` on `gpu`."""
        self.events.append(
            SimpleNamespace(device=gpu, eventType=nvmlEventTypeXidCriticalError, eventData=code)
        )
