"""Run request streams through an engine, validating every decision and timing each one."""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field

from bench.checker import Checker
from bench.workloads import Arrival, checker_rows
from portal.fleet.geometry import COMPUTE_SLICES, ProfileShape, gpu_model
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
    """The engine under test, on an incremental FleetState. Slices of "dynamic" GPUs are
    destroyed on release; those of "layouts" GPUs stay cut. The demand that shapes a new layout
    is the recent mix of slice requests per GPU type (each request weighs 1, decaying by
    DEMAND_DECAY per later request of its type), as the portal takes it from recent requests."""

    name = "best-fit"
    DEMAND_DECAY = 0.98

    def __init__(self, gpus: list[GpuView], *, whole_on_empty_mig: bool) -> None:
        self.state = FleetState(gpus)
        self.whole_on_empty_mig = whole_on_empty_mig
        self.layouts = {g.gpu_id for g in gpus if g.mig_mode == "layouts"}
        self.demand: dict[str, dict[str, float]] = {}

    def place(self, request: Request) -> Placement | NoFit:
        demand = None
        if isinstance(request, SliceRequest):
            demand = self.demand.setdefault(request.gpu_type, {})
            for name in demand:
                demand[name] *= self.DEMAND_DECAY
            demand[request.profile.name] = demand.get(request.profile.name, 0.0) + 1.0
        return self.state.place(request, whole_on_empty_mig=self.whole_on_empty_mig, demand=demand)

    def apply(self, placement: Placement, request: Request) -> None:
        self.state.apply(placement, request.profile if isinstance(request, SliceRequest) else None)

    def release(self, placement: Placement) -> None:
        destroy = placement.profile is not None and placement.gpu_ids[0] not in self.layouts
        self.state.release(placement, destroy_slice=destroy)


class FirstFit:
    """The baseline: `first_fit` over plain GpuViews of the requested type, kept current here."""

    name = "first-fit"

    def __init__(self, gpus: list[GpuView], *, whole_on_empty_mig: bool) -> None:
        self.by_id = {
            g.gpu_id: GpuView(
                g.gpu_id,
                g.node,
                g.index,
                g.gpu_type,
                g.mig_enabled,
                slices=list(g.slices),
                mig_mode=g.mig_mode,
            )
            for g in gpus
        }
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
                self.by_id[gpu_id].slices = []  # free slices go with the GPU
            return
        shape = request.profile
        gpu = self.by_id[placement.gpu_ids[0]]
        assert placement.start is not None
        if placement.layout is not None:
            gpu.slices = [
                SliceView(None, name, start, cut.size, False, cut.media)
                for name, start in placement.layout
                if (cut := _shape(gpu.gpu_type, name))
            ]
        end = placement.start + shape.size
        # what stays: held slices, and free ones clear of the new slice (those in its way go)
        others = [s for s in gpu.slices if s.held or s.start + s.size <= placement.start or s.start >= end]
        gpu.slices = [*others, SliceView(None, shape.name, placement.start, shape.size, True, shape.media)]

    def release(self, placement: Placement) -> None:
        for gpu_id in placement.gpu_ids:
            gpu = self.by_id[gpu_id]
            if placement.profile is None:
                gpu.whole_held = False
                continue
            others = [s for s in gpu.slices if s.start != placement.start]
            if gpu.mig_mode == "layouts":  # the slice stays cut, free
                held = next(s for s in gpu.slices if s.start == placement.start)
                others.append(SliceView(None, held.profile, held.start, held.size, False, held.media))
            gpu.slices = others


Engine = BestFit | FirstFit


def _shape(gpu_type: str, profile: str) -> ProfileShape:
    model = gpu_model(gpu_type)
    shape = model.profile(profile) if model else None
    assert shape is not None, f"{gpu_type} has no {profile}"
    return shape


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
    checker = Checker(checker_rows(gpus))
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
