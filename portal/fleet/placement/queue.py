"""Queue ordering: which queued requests to place now, and where. Pure, like the engine.

The rule `drain` applies, in one pass over a working copy of the snapshot:

1. Order: requests that have waited at least `starvation_seconds` ("starving") come first, oldest
   first; then the rest by priority (higher first), then by arrival (`queued_at`), then by id.
2. Each request in that order is placed if it fits the working copy, with every earlier decision
   of the pass already applied, so two requests never get the same GPU or slot. One that does not
   fit waits, and requests behind it may still be placed: smaller requests backfill around a large
   one that does not fit yet.
3. Reservation: a starving request that does not fit reserves its pool for the rest of the pass:
   nothing behind it of the same GPU type and kind (whole GPUs, or MIG slices; with
   `whole_on_empty_mig` the two share one pool) is placed, so capacity that departures free
   collects for it instead of going to smaller requests backfilled ahead of it. A request that
   could not fit even on an idle fleet (more GPUs than any node has, no MIG GPU of its type)
   reserves nothing, so it cannot block its pool forever.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import NamedTuple

from portal.fleet.placement.state import FleetState
from portal.fleet.placement.types import GpuView, Placement, Request, SliceRequest, WholeRequest

DEFAULT_STARVATION_SECONDS = 900.0


class QueuedRequest(NamedTuple):
    """A request waiting to be placed; `queued_at` is in seconds, on the same clock as `now`."""

    id: Hashable
    priority: int
    queued_at: float
    request: Request


def drain(
    queue: Iterable[QueuedRequest | tuple[Hashable, int, float, Request]],
    gpus: Sequence[GpuView],
    *,
    now: float,
    starvation_seconds: float = DEFAULT_STARVATION_SECONDS,
    whole_on_empty_mig: bool = False,
    demand: Mapping[str, Mapping[str, float]] | None = None,
) -> list[tuple[Hashable, Placement]]:
    """The queued requests to place now, with their placements, in decision order.

    `demand` is the recent mix of slice profiles per GPU type; the slice requests of the queue
    still waiting (the one being placed included) are added to it, so a GPU re-partitioned for one queued request is cut
    for the ones behind it too, and an idle GPU whose layout serves them poorly is re-partitioned
    rather than locked by taking one of its slices (see FleetState.place, `reshape_idle`).
    Requests not in the result stay queued. The snapshot `gpus` is not modified.
    """
    items = [QueuedRequest(*item) for item in queue]
    wanted: dict[str, dict[str, float]] = {t: dict(mix) for t, mix in (demand or {}).items()}
    for item in items:
        if isinstance(item.request, SliceRequest):
            mix = wanted.setdefault(item.request.gpu_type, {})
            mix[item.request.profile.name] = mix.get(item.request.profile.name, 0.0) + 1.0
    state = FleetState(gpus)
    ceilings = _Ceilings(gpus, whole_on_empty_mig)

    def order(item: QueuedRequest) -> tuple[bool, float, float, str]:
        starving = now - item.queued_at >= starvation_seconds
        if starving:
            return (False, item.queued_at, 0.0, str(item.id))
        return (True, -item.priority, item.queued_at, str(item.id))

    decisions: list[tuple[Hashable, Placement]] = []
    reserved: set[tuple[str, str]] = set()
    for item in sorted(items, key=order):
        mix = wanted.get(item.request.gpu_type) if isinstance(item.request, SliceRequest) else None
        pool = _pool(item.request, whole_on_empty_mig)
        if pool in reserved:
            continue
        placement = state.place(
            item.request,
            whole_on_empty_mig=whole_on_empty_mig,
            demand={p: w for p, w in mix.items() if w > 0} if mix else None,
            reshape_idle=True,
        )
        if isinstance(placement, Placement):
            state.apply(placement, None if isinstance(item.request, WholeRequest) else item.request.profile)
            decisions.append((item.id, placement))
            if mix is not None and placement.profile:  # placed: no longer demand still waiting
                mix[placement.profile] -= 1.0
        elif now - item.queued_at >= starvation_seconds and ceilings.could_ever_fit(item.request):
            reserved.add(pool)
    return decisions


def _pool(request: Request, whole_on_empty_mig: bool) -> tuple[str, str]:
    """Which capacity a request competes for: (GPU type, "whole" | "slice" | "any")."""
    if whole_on_empty_mig:
        return (request.gpu_type, "any")
    return (request.gpu_type, "whole" if isinstance(request, WholeRequest) else "slice")


class _Ceilings:
    """What the fleet could hold if every current holder left (for the reservation rule)."""

    def __init__(self, gpus: Sequence[GpuView], whole_on_empty_mig: bool) -> None:
        self._whole_per_node: dict[tuple[str, str], int] = {}
        self._cuttable: set[str] = set()
        self._existing: set[tuple[str, str]] = set()
        for gpu in gpus:
            if whole_on_empty_mig or not gpu.mig_enabled:
                key = (gpu.gpu_type, gpu.node)
                self._whole_per_node[key] = self._whole_per_node.get(key, 0) + 1
            if gpu.mig_enabled:
                if gpu.mig_change_policy != "never":
                    self._cuttable.add(gpu.gpu_type)
                self._existing.update((gpu.gpu_type, s.profile) for s in gpu.slices)

    def could_ever_fit(self, request: Request) -> bool:
        if isinstance(request, WholeRequest):
            most = max(
                (n for (gpu_type, _), n in self._whole_per_node.items() if gpu_type == request.gpu_type),
                default=0,
            )
            return 1 <= request.count <= most
        return (
            request.gpu_type in self._cuttable or (request.gpu_type, request.profile.name) in self._existing
        )
