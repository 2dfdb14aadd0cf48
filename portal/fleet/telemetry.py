"""GPU telemetry from the node agents: readings folded into per-minute rows as they arrive, the
GPUs' health as NVML reports it (lost, XID errors: admins told once), and the series a workload's
page and API read. Services and selectors of the fleet's telemetry, kept apart from placement."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q, Sum

from portal.accounts.models import User
from portal.accounts.selectors import platform_admins
from portal.accounts.services import notify
from portal.audit.services import audit_record
from portal.core.errors import ValidationFailed
from portal.fleet.models import Allocation, Gpu, GpuHour, GpuMinute, GpuPeriod, Node
from portal.fleet.truth import fleet_reconcile_node

STEPS = {60: "minute", 3600: "hour"}


@dataclass
class _Fold:
    gpu: Gpu
    mig_start: int | None = None
    samples: int = 0
    utilization_sum: float = 0.0
    utilization_samples: int = 0
    memory_used_mb_max: int = 0
    memory_total_mb: int = 0
    power_watts_sum: float = 0.0
    processes_max: int = 0

    def add(self, utilization: Any, used: Any, total: Any, power: Any = None, processes: int = 0) -> None:
        self.samples += 1
        if isinstance(utilization, int | float):
            self.utilization_sum += float(utilization)
            self.utilization_samples += 1
        self.memory_used_mb_max = max(self.memory_used_mb_max, int(used or 0))
        self.memory_total_mb = max(self.memory_total_mb, int(total or 0))
        self.power_watts_sum += float(power or 0)
        self.processes_max = max(self.processes_max, processes)

    def merge(self, other: _Fold) -> None:
        """Take in another fold of the same device (the minutes of an hour)."""
        self.samples += other.samples
        self.utilization_sum += other.utilization_sum
        self.utilization_samples += other.utilization_samples
        self.memory_used_mb_max = max(self.memory_used_mb_max, other.memory_used_mb_max)
        self.memory_total_mb = max(self.memory_total_mb, other.memory_total_mb)
        self.power_watts_sum += other.power_watts_sum
        self.processes_max = max(self.processes_max, other.processes_max)


@dataclass(frozen=True)
class Recorded:
    readings: int
    devices: int
    unknown_nodes: list[str]
    dropped: int


def _health(gpu_reading: dict) -> tuple[str, str]:
    error = str(gpu_reading.get("error") or "")
    if "lost" in error.lower() or "reset" in error.lower():
        return "lost", f"NVML: {error}"
    codes = gpu_reading.get("xid_events")
    xids = [code for code in codes if isinstance(code, int)] if isinstance(codes, list) else []
    if xids:
        return "xid", f"XID {', '.join(str(code) for code in xids)}"
    return "ok", ""


@transaction.atomic
def telemetry_record(*, readings: list[dict], dropped: int = 0) -> Recorded:
    """Fold a node agent's batch of readings into per-minute rows and the GPUs' health, and
    correct the records of each node to its newest reading (see portal.fleet.truth)."""
    if not isinstance(readings, list) or not all(isinstance(r, dict) for r in readings):
        raise ValidationFailed("`readings` must be a list of node readings.", fields={"readings": ["a list"]})
    folds: dict[tuple[str, datetime], _Fold] = {}
    seen: dict[int, datetime] = {}  # GPU -> its newest reading in the batch
    unknown: list[str] = []
    names = {str(r.get("node", "")) for r in readings}
    nodes = {node.name: node for node in Node.objects.filter(name__in=names).prefetch_related("gpus")}
    newest: dict[str, dict] = {}  # node -> its newest reading, the one the records follow
    health: list[tuple[Gpu, dict]] = []
    for reading in readings:
        node = nodes.get(str(reading.get("node", "")))
        if node is None:
            unknown.append(str(reading.get("node", "")))
            continue
        moment = reading.get("taken_at")
        if not isinstance(moment, int | float) or isinstance(moment, bool) or not 0 < moment < 2**33:
            raise ValidationFailed(
                "Each reading's `taken_at` is a Unix time in seconds.", fields={"readings": ["taken_at"]}
            )
        if moment >= newest.get(node.name, {}).get("taken_at", 0):
            newest[node.name] = reading
        taken = datetime.fromtimestamp(moment, UTC)
        minute = taken.replace(second=0, microsecond=0)
        by_uuid = {gpu.uuid: gpu for gpu in node.gpus.all()}
        by_index = {gpu.index: gpu for gpu in node.gpus.all()}
        items = reading.get("gpus")
        for item in items if isinstance(items, list) else []:
            gpu = by_uuid.get(str(item.get("uuid", ""))) if isinstance(item, dict) else None
            if gpu is None and isinstance(item, dict) and isinstance(item.get("index"), int):
                gpu = by_index.get(item["index"])
            if gpu is None:
                continue
            health.append((gpu, item))
            seen[gpu.pk] = max(taken, seen.get(gpu.pk, taken))
            if not item.get("error"):
                _fold_gpu(folds, gpu, item, minute)
    hours: dict[tuple[str, datetime], _Fold] = {}
    for (device, minute), fold in folds.items():
        _fold_into(GpuMinute, "minute", device, minute, fold)
        hour = hours.setdefault((device, minute.replace(minute=0)), _Fold(fold.gpu, mig_start=fold.mig_start))
        hour.merge(fold)
    for (device, hour_start), fold in hours.items():
        _fold_into(GpuHour, "hour", device, hour_start, fold)
    # The records first: correcting them takes the GPU type's lock, which placement and discovery
    # take before any GPU row, so no GPU row is written before it here either.
    for name, reading in newest.items():
        fleet_reconcile_node(node=nodes[name], reading=reading)
    for gpu, item in health:
        _observe_health(gpu, item)
    by_moment: dict[datetime, list[int]] = {}  # one update per reading time, not per GPU
    for gpu_id, taken in seen.items():
        by_moment.setdefault(taken, []).append(gpu_id)
    for taken, gpu_ids in by_moment.items():
        Gpu.objects.filter(pk__in=gpu_ids).update(seen_at=taken)
    return Recorded(
        readings=len(readings), devices=len({d for d, _ in folds}), unknown_nodes=unknown, dropped=dropped
    )


def _fold_gpu(folds: dict[tuple[str, datetime], _Fold], gpu: Gpu, item: dict, minute: datetime) -> None:
    """A GPU's figures (or its MIG devices') into the minute's folds; a figure that is not a
    number is skipped, a MIG device without its placement too."""
    numbers = {
        key: value if isinstance(value, int | float) and not isinstance(value, bool) else None
        for key, value in item.items()
    }
    if not item.get("mig_enabled"):
        processes = item.get("processes")
        fold = folds.setdefault((gpu.uuid, minute), _Fold(gpu))
        fold.add(numbers.get("utilization_percent"), numbers.get("memory_used_mb"), numbers.get("memory_total_mb"),
                 numbers.get("power_watts"), len(processes) if isinstance(processes, list) else 0)  # fmt: skip
    migs = item.get("mig_devices")
    for mig in migs if isinstance(migs, list) else []:
        if not isinstance(mig, dict) or not isinstance(mig.get("start"), int) or not 0 <= mig["start"] < 8:
            continue
        figures = {
            k: v if isinstance(v, int | float) and not isinstance(v, bool) else None for k, v in mig.items()
        }
        fold = folds.setdefault((str(mig.get("uuid")), minute), _Fold(gpu, mig_start=mig["start"]))
        fold.add(
            figures.get("utilization_percent"), figures.get("memory_used_mb"), figures.get("memory_total_mb")
        )


def _fold_into(model: type[GpuPeriod], field: str, device: str, moment: datetime, fold: _Fold) -> None:
    """Add folded readings of a device to its row of `model` (its minute, or its hour)."""
    row, _ = model.objects.select_for_update().get_or_create(
        device=device, **{field: moment}, defaults={"gpu": fold.gpu, "mig_start": fold.mig_start}
    )
    row.samples += fold.samples
    row.utilization_sum += fold.utilization_sum
    row.utilization_samples += fold.utilization_samples
    row.memory_used_mb_max = max(row.memory_used_mb_max, fold.memory_used_mb_max)
    row.memory_total_mb = max(row.memory_total_mb, fold.memory_total_mb)
    row.power_watts_sum += fold.power_watts_sum
    row.processes_max = max(row.processes_max, fold.processes_max)
    row.save()


def telemetry_prune(*, now: datetime, minute_days: int, hour_days: int) -> tuple[int, int]:
    """Forget minutes and hours past their retention; how many of each went."""
    minutes, _ = GpuMinute.objects.filter(minute__lt=now - timedelta(days=minute_days)).delete()
    hours, _ = GpuHour.objects.filter(hour__lt=now - timedelta(days=hour_days)).delete()
    return minutes, hours


def _observe_health(gpu: Gpu, item: dict) -> None:
    """Record what NVML says of the GPU; a GPU turning lost or reporting XID errors is audited
    and the platform admins are told (once per change, not per reading)."""
    health, detail = _health(item)
    if health == gpu.health or (health == "ok" and gpu.health == "xid"):
        return  # XID errors stay until an admin clears them; "ok" readings do not undo them
    Gpu.objects.filter(pk=gpu.pk).update(health=health, health_detail=detail[:300])
    gpu.health, gpu.health_detail = health, detail
    audit_record(actor=None, action=f"gpu.{health}", obj=gpu, detail=detail)
    for admin in platform_admins():
        notify(kind="fleet", user=admin, message=f"GPU {gpu} on {gpu.node.name}: {detail}", link="/fleet/")


def gpu_health_clear(*, user: User, gpu_ids: list[int]) -> int:
    """An admin has looked at these GPUs (reset, replaced, or the XID was an application's):
    back to placement. Audited; how many were cleared."""
    cleared = 0
    for gpu in Gpu.objects.filter(pk__in=gpu_ids).exclude(health="ok").select_related("node"):
        Gpu.objects.filter(pk=gpu.pk).update(health="ok", health_detail="")
        audit_record(
            actor=user, action="gpu.cleared", obj=gpu, detail=f"was {gpu.health}: {gpu.health_detail}"
        )
        cleared += 1
    return cleared


@dataclass(frozen=True)
class Point:
    at: datetime
    utilization: float | None
    memory_used_mb: int
    memory_total_mb: int


def workload_utilization(*, workload: Any, start: datetime, end: datetime, step: int) -> list[Point]:
    """The devices a workload held, minute by minute (or hour by hour), within [start, end):
    mean utilization over the devices and time that had a figure, memory summed over devices."""
    if step not in STEPS:
        raise ValidationFailed(
            f"`step` is one of {', '.join(str(s) for s in STEPS)} seconds.", fields={"step": ["60 or 3600"]}
        )
    if end <= start or end - start > timedelta(days=366):
        raise ValidationFailed(
            "`from` must come before `to`, at most a year apart.", fields={"to": ["after from"]}
        )
    holds = (
        Allocation.objects.filter(workload=workload, started_at__lt=end)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))
        .select_related("mig_slice")
    )
    model, field = (GpuMinute, "minute") if step == 60 else (GpuHour, "hour")
    wanted = Q(pk__in=[])
    for hold in holds:
        held_from = max(hold.started_at, start)
        if step == 3600:
            held_from = held_from.replace(minute=0, second=0, microsecond=0)  # the hour it began in
        window = Q(
            **{f"{field}__gte": held_from, f"{field}__lt": min(hold.ended_at or end, end)}, gpu_id=hold.gpu_id
        )
        if hold.mig_slice_id:
            wanted |= window & Q(mig_start=hold.mig_slice.start)
        else:
            wanted |= window & Q(mig_start__isnull=True)
    rows = (
        model.objects.filter(wanted)
        .values(field)
        .annotate(
            utilization_sum=Sum("utilization_sum"),
            measured=Sum("utilization_samples"),
            used=Sum("memory_used_mb_max"),  # over the workload's devices
            total=Sum("memory_total_mb"),
        )
        .order_by(field)
        .values_list(field, "utilization_sum", "measured", "used", "total")
    )
    points = [
        Point(moment, round(utilization / measured, 1) if measured else None, used or 0, total or 0)
        for moment, utilization, measured, used, total in rows
    ]
    return points
