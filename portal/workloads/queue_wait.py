"""How long a queued request is likely to wait: its place in the queue of its GPU pool and the
expiries of what runs there and of what is placed before it.

A pool is one GPU type as whole GPUs (counted in GPUs) or as MIG slices (counted in memory
slots, 8 to a GPU). The estimate replays the queue in order: each request ahead is placed when
what is free now plus what the earliest expiries free is enough for it, and holds its share
until its own lifetime ends; the request is placed next. It ignores slice geometry and the
backfill of small requests around a large one, so it says "about". Work without an expiry
frees nothing on a schedule: when the expiries are not enough, the wait is unknown.

Four queries for any number of workloads: the queued rows of their GPU types, what is placed
on those types, the schedulable GPUs, and the GPU types' models.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from math import ceil

from django.db.models import Count
from django.utils import timezone

from portal.core.text import seconds_words
from portal.fleet.geometry import MEMORY_SLOTS
from portal.fleet.models import Gpu, GpuType
from portal.workloads.models import Workload, WorkloadState

# Placed work that still holds its GPUs.
_HOLDING = (WorkloadState.PROVISIONING, WorkloadState.RUNNING, WorkloadState.TERMINATING)
_FIELDS = ("pk", "gpu_type_id", "mig_profile", "gpu_count", "replicas", "start_at")


@dataclass(frozen=True)
class QueueWait:
    """A queued request's estimated wait: `seconds` None when nothing scheduled frees room for it."""

    seconds: int | None
    start_at: datetime | None

    @property
    def label(self) -> str:
        if self.seconds is None:
            return "unknown"
        if self.seconds < 60:
            return "under a minute"
        return f"about {seconds_words(self.seconds)}"  # "about 40 minutes", "about 1 h 56 min"


def _units(row: dict, models: dict[int, object]) -> int:
    """What a workload takes of its pool: whole GPUs, or memory slots of MIG slices."""
    replicas = max(row["replicas"] or 1, 1)
    if not row["mig_profile"]:
        return (row["gpu_count"] or 1) * replicas
    model = models.get(row["gpu_type_id"])
    shape = model.profile(row["mig_profile"]) if model is not None else None
    return (shape.size if shape is not None else MEMORY_SLOTS) * replicas


def _pool(row: dict) -> tuple[int, bool]:
    return row["gpu_type_id"], bool(row["mig_profile"])


def _expiry(row: dict, now: datetime) -> datetime | None:
    if row["expires_at"] is not None:
        return row["expires_at"]
    if row["ttl_hours"] is not None:  # placed, not running yet: its lifetime starts soon
        return now + timedelta(hours=float(row["ttl_hours"]))
    return None


def estimated_waits(workloads: list[Workload], *, now: datetime | None = None) -> dict[int, QueueWait]:
    """The estimated wait of each queued workload in `workloads`, by id (four queries at most)."""
    now = now or timezone.now()
    wanted = [w for w in workloads if w.state == WorkloadState.QUEUED]
    if not wanted:
        return {}
    type_ids = {w.gpu_type_id for w in wanted}
    queued = list(
        Workload.objects.filter(state=WorkloadState.QUEUED, gpu_type_id__in=type_ids)
        .order_by("-priority", "queued_at", "pk")
        .values(*_FIELDS, "expires_at", "ttl_hours")
    )
    placed = list(
        Workload.objects.filter(state__in=_HOLDING, gpu_type_id__in=type_ids).values(
            *_FIELDS, "expires_at", "ttl_hours"
        )
    )
    capacity: dict[tuple[int, bool], int] = {}
    gpu_rows = (
        Gpu.objects.filter(gpu_type_id__in=type_ids, node__schedulable=True)
        .values("gpu_type_id", "mig_enabled")
        .annotate(count=Count("pk"))
    )
    for gpus in gpu_rows:
        per_gpu = MEMORY_SLOTS if gpus["mig_enabled"] else 1
        capacity[(gpus["gpu_type_id"], gpus["mig_enabled"])] = gpus["count"] * per_gpu
    models = {gpu_type.pk: gpu_type.model for gpu_type in GpuType.objects.filter(pk__in=type_ids)}

    held: dict[tuple[int, bool], int] = defaultdict(int)
    freed_by: dict[tuple[int, bool], list[tuple[datetime, int]]] = defaultdict(list)
    for row in placed:
        units = _units(row, models)
        held[_pool(row)] += units
        expiry = _expiry(row, now)
        if expiry is not None:
            freed_by[_pool(row)].append((expiry, units))
    for expiries in freed_by.values():
        expiries.sort()

    waits: dict[int, QueueWait] = {}
    wanted_ids = {w.pk for w in wanted}
    by_pool: dict[tuple[int, bool], list[dict]] = defaultdict(list)
    for row in queued:
        by_pool[_pool(row)].append(row)
    for pool, rows in by_pool.items():
        if not wanted_ids.intersection(row["pk"] for row in rows):
            continue
        size = capacity.get(pool, 0)
        replay = _Replay(free=size - held[pool], size=size, releases=freed_by[pool], now=now)
        waits.update(replay.run(rows, wanted_ids, models))
    return waits


@dataclass
class _Replay:
    """One pool's queue placed in order against the expiries ahead of it."""

    free: int
    size: int
    releases: list[tuple[datetime, int]]
    now: datetime

    def run(self, rows: list[dict], wanted_ids: set[int], models: dict[int, object]) -> dict[int, QueueWait]:
        waits: dict[int, QueueWait] = {}
        heap = list(self.releases)
        heapq.heapify(heap)
        clock = self.now  # nobody is placed before the one ahead of them
        blocked = False  # one ahead waits on something no expiry frees: so does everyone behind it
        for row in rows:
            wanted = row["pk"] in wanted_ids
            start_at = row["start_at"]
            if start_at is not None and start_at > self.now and not wanted:
                continue  # a scheduled start does not hold the queue before its time
            need = _units(row, models)
            if need > self.size or blocked:
                if wanted:
                    waits[row["pk"]] = QueueWait(seconds=None, start_at=None)
                continue  # one that never fits here does not hold the queue either
            ready = max(clock, start_at) if start_at is not None else clock
            while heap and heap[0][0] <= ready:  # what has ended by then
                self.free += heapq.heappop(heap)[1]
            while self.free < need and heap:  # wait for the next expiries
                expiry, units = heapq.heappop(heap)
                self.free += units
                ready = max(ready, expiry)
            if self.free < need:
                blocked = True
                if wanted:
                    waits[row["pk"]] = QueueWait(seconds=None, start_at=None)
                continue
            self.free -= need
            clock = ready
            if wanted:
                seconds = max(0, ceil((ready - self.now).total_seconds()))
                waits[row["pk"]] = QueueWait(seconds=seconds, start_at=self.now + timedelta(seconds=seconds))
            ends = _expiry(row, ready)
            if ends is not None:
                heapq.heappush(heap, (ends, need))
        return waits


def estimated_wait(workload: Workload, *, now: datetime | None = None) -> QueueWait | None:
    """One workload's estimated wait; None when it is not queued."""
    return estimated_waits([workload], now=now).get(workload.pk)
