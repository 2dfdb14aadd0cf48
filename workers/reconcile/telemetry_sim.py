"""Telemetry for the simulated cluster: what node agents would report of its held GPUs, so the
embedded default shows live utilization charts. Each workload keeps a character of its own (busy,
idle or spiky, by its id), its GPUs idle when nothing holds them; every cut MIG slice is read, and
each device names the holder's pod as the kubelet would. The readings go the same way as
a real agent's: through `telemetry_record`."""

from __future__ import annotations

import math
import time
from collections import defaultdict

from portal.fleet.models import Allocation, Gpu, MigSlice
from portal.fleet.telemetry import telemetry_record

SIMULATED = "simulated"


def _utilization(workload_id: int | None, now: float) -> float:
    if workload_id is None:
        return 0.0
    character = workload_id % 3
    if character == 0:  # busy: training
        return round(82 + 10 * math.sin(now / 90 + workload_id), 1)
    if character == 1:  # idle: a notebook left open
        return round(0.5 + 0.5 * math.sin(now / 300), 1)
    return 95.0 if int(now // 60 + workload_id) % 4 == 0 else 3.0  # spiky: bursts a minute in four


def _pods(hold: Allocation | None) -> list[dict]:
    """Who the simulated kubelet gave the device to: the holder's pod, once it has a namespace."""
    if hold is None or hold.workload is None or not hold.workload.namespace:
        return []
    return [{"namespace": hold.workload.namespace, "pod": f"replica-{hold.replica}", "container": "main",
             "resource": "nvidia.com/gpu"}]  # fmt: skip


def simulate_telemetry(now: float | None = None) -> int:
    """One reading of every GPU of every simulated cluster; how many GPUs were read."""
    now = now or time.time()
    gpus = list(Gpu.objects.filter(node__cluster__driver=SIMULATED).select_related("node", "gpu_type"))
    holds: dict[int, list[Allocation]] = defaultdict(list)
    for hold in Allocation.objects.filter(released_at__isnull=True, gpu__in=gpus).select_related(
        "mig_slice", "workload"
    ):
        holds[hold.gpu_id].append(hold)
    slices: dict[int, list[MigSlice]] = defaultdict(list)  # what the GPUs have: the cut slices
    for mig_slice in MigSlice.objects.filter(gpu__in=gpus, state=MigSlice.State.READY):
        slices[mig_slice.gpu_id].append(mig_slice)
    nodes: dict[str, list[dict]] = defaultdict(list)
    for gpu in gpus:
        total = gpu.gpu_type.memory_gb * 1024
        item: dict = {
            "index": gpu.index,
            "uuid": gpu.uuid,
            "product": gpu.gpu_type.name,
            "mig_enabled": gpu.mig_enabled,
        }
        if gpu.mig_enabled:
            by_slice = {hold.mig_slice_id: hold for hold in holds[gpu.pk]}
            item["mig_devices"] = []
            for mig_slice in slices[gpu.pk]:
                hold = by_slice.get(mig_slice.pk)
                holder = hold.workload_id if hold else None
                memory = int(total * mig_slice.size / 8)
                item["mig_devices"].append(
                    {
                        "uuid": f"MIG-{gpu.uuid}-{mig_slice.start}",
                        "start": mig_slice.start,
                        "size": mig_slice.size,
                        "profile": mig_slice.profile,
                        "utilization_percent": _utilization(holder, now),
                        "memory_used_mb": int(memory * (0.6 if holder else 0)),
                        "memory_total_mb": memory,
                        "pods": _pods(hold),
                    }
                )
        else:
            holder = holds[gpu.pk][0].workload_id if holds[gpu.pk] else None
            utilization = _utilization(holder, now)
            item.update(
                utilization_percent=int(utilization),
                memory_used_mb=int(total * (0.7 if holder else 0.0)),
                memory_total_mb=total,
                power_watts=round(70 + 6 * utilization, 1),
                processes=[{"pid": 1000 + (holder or 0), "used_memory_mb": int(total * 0.7)}]
                if holder
                else [],
                pods=_pods(holds[gpu.pk][0] if holds[gpu.pk] else None),
            )
        nodes[gpu.node.name].append(item)
    readings = [{"node": node, "taken_at": now, "gpus": items} for node, items in nodes.items()]
    if readings:
        telemetry_record(readings=readings)
    return len(gpus)
