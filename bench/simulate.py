"""Run request streams through an engine, validating every decision and timing each one."""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field

from bench.checker import Checker
from bench.workloads import Arrival
from portal.fleet.geometry import COMPUTE_SLICES
from portal.fleet.placement import (
    FleetState,
    GpuView,
    NoFit,
    Placement,
    Request,
    SliceRequest,
    SliceView,
    first_fit,
)


class BestFit:
    """The engine under test, on an incremental FleetState; slices are destroyed on release."""

    name = "best-fit"

    def __init__(self, gpus: list[GpuView], *, whole_on_empty_mig: bool) -> None:
        self.state = FleetState(gpus)
        self.whole_on_empty_mig = whole_on_empty_mig

    def place(self, request: Request) -> Placement | NoFit:
        return self.state.place(request, whole_on_empty_mig=self.whole_on_empty_mig)

    def apply(self, placement: Placement, request: Request) -> None:
        self.state.apply(placement, request.profile if isinstance(request, SliceRequest) else None)

    def release(self, placement: Placement) -> None:
        self.state.release(placement, destroy_slice=True)


class FirstFit:
    """The baseline: `first_fit` over plain GpuViews of the requested type, kept current here."""

    name = "first-fit"

    def __init__(self, gpus: list[GpuView], *, whole_on_empty_mig: bool) -> None:
        self.by_id = {g.gpu_id: GpuView(g.gpu_id, g.node, g.index, g.gpu_type, g.mig_enabled) for g in gpus}
        self.by_type: dict[str, list[GpuView]] = {}
        for gpu in sorted(self.by_id.values(), key=lambda g: (g.node, g.index)):
            self.by_type.setdefault(gpu.gpu_type, []).append(gpu)
        self.whole_on_empty_mig = whole_on_empty_mig

    def place(self, request: Request) -> Placement | NoFit:
        gpus = self.by_type.get(request.gpu_type, [])
        return first_fit(gpus, request, whole_on_empty_mig=self.whole_on_empty_mig)

    def apply(self, placement: Placement, request: Request) -> None:
        if not isinstance(request, SliceRequest):
            for gpu_id in placement.gpu_ids:
                self.by_id[gpu_id].whole_held = True
            return
        shape = request.profile
        gpu = self.by_id[placement.gpu_ids[0]]
        assert placement.start is not None
        gpu.slices.append(SliceView(None, shape.name, placement.start, shape.size, True, shape.media))

    def release(self, placement: Placement) -> None:
        for gpu_id in placement.gpu_ids:
            gpu = self.by_id[gpu_id]
            if placement.profile is None:
                gpu.whole_held = False
            else:
                gpu.slices = [s for s in gpu.slices if s.start != placement.start]


Engine = BestFit | FirstFit


@dataclass
class Stats:
    """What one run of a stream through one engine gave."""

    engine: str
    arrivals: int = 0
    accepted: int = 0
    events: int = 0
    decision_ns: list[int] = field(default_factory=list)
    wall_s: float = 0.0
    busy_sum: float = 0.0  # sum over arrivals of GPUs in use (for the mean)
    served_sum: float = 0.0  # sum over arrivals of GPU-equivalents held
    asked: float = 0.0  # GPU-equivalents requested
    granted: float = 0.0  # GPU-equivalents placed

    def add(self, other: Stats) -> None:
        """Fold another run of the same engine into this one (for several seeds)."""
        self.arrivals += other.arrivals
        self.accepted += other.accepted
        self.events += other.events
        self.decision_ns += other.decision_ns
        self.wall_s += other.wall_s
        self.busy_sum += other.busy_sum
        self.served_sum += other.served_sum
        self.asked += other.asked
        self.granted += other.granted

    @property
    def served_share(self) -> float:
        return self.granted / self.asked if self.asked else 0.0

    @property
    def acceptance(self) -> float:
        return self.accepted / self.arrivals if self.arrivals else 0.0

    @property
    def mean_busy(self) -> float:
        return self.busy_sum / self.arrivals if self.arrivals else 0.0

    @property
    def density(self) -> float:
        """GPU-equivalents held per GPU in use: how tightly the engine packs."""
        return self.served_sum / self.busy_sum if self.busy_sum else 0.0

    def percentile_us(self, q: float) -> float:
        ordered = sorted(self.decision_ns)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000 if ordered else 0.0

    @property
    def decisions_per_s(self) -> float:
        total = sum(self.decision_ns)
        return len(self.decision_ns) / (total / 1e9) if total else 0.0


def _demand(request: Request) -> float:
    if isinstance(request, SliceRequest):
        return request.profile.compute_slices / COMPUTE_SLICES
    return float(request.count)


def run_stream(
    engine: Engine, gpus: list[GpuView], arrivals: list[Arrival], *, whole_on_empty_mig: bool
) -> Stats:
    """Arrivals in time order; a placed request leaves after its hold; rejected ones are dropped."""
    checker = Checker([(g.gpu_id, g.node, g.index, g.gpu_type, g.mig_enabled) for g in gpus])
    stats = Stats(engine.name)
    departures: list[tuple[float, str, Placement]] = []
    served = 0.0
    demand: dict[str, float] = {}
    clock = time.perf_counter_ns
    started = time.perf_counter()
    for arrival in arrivals:
        while departures and departures[0][0] <= arrival.t:
            _, owner, placement = heapq.heappop(departures)
            engine.release(placement)
            checker.release(owner)
            served -= demand.pop(owner)
            stats.events += 1
        stats.events += 1
        stats.arrivals += 1
        stats.asked += _demand(arrival.request)
        begun = clock()
        decision = engine.place(arrival.request)
        stats.decision_ns.append(clock() - begun)
        if isinstance(decision, Placement):
            checker.place(arrival.id, arrival.request, decision, whole_on_empty_mig=whole_on_empty_mig)
            engine.apply(decision, arrival.request)
            stats.accepted += 1
            demand[arrival.id] = _demand(arrival.request)
            served += demand[arrival.id]
            stats.granted += demand[arrival.id]
            heapq.heappush(departures, (arrival.t + arrival.hold, arrival.id, decision))
        stats.busy_sum += checker.busy
        stats.served_sum += served
    while departures:
        _, owner, placement = heapq.heappop(departures)
        engine.release(placement)
        checker.release(owner)
        stats.events += 1
    stats.wall_s = time.perf_counter() - started
    return stats
