"""The optimum for small snapshots, from an integer program (PuLP with CBC), and the gap to it.

On a few MIG GPUs, some already cut, a batch of slice requests is placed by the engine (through
`drain`, in arrival order), by first fit, and by the integer program, which maximises accepted
requests and then minimises GPUs in use. The gap says how far online best fit is from offline.

In "layouts" mode a GPU holding a slice offers only its free slices, and a GPU holding nothing
may take any whole layout: the integer program chooses among both.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from dataclasses import dataclass

import pulp

from bench.families import _random_layout
from bench.simulate import FirstFit
from bench.workloads import Mix, profile_by_class, small_h100_snapshot, small_layouts_snapshot
from portal.fleet.geometry import MEMORY_SLOTS, ProfileShape
from portal.fleet.placement import GpuView, Placement, SliceRequest, drain

GPU_TYPE = "h100-80gb"


@dataclass(frozen=True)
class Outcome:
    accepted: int
    gpus_used: int


def by_engine(gpus: list[GpuView], batch: list[ProfileShape]) -> Outcome:
    queue = [(n, 0, float(n), SliceRequest(GPU_TYPE, shape)) for n, shape in enumerate(batch)]
    decisions = drain(queue, gpus, now=float(len(batch)))
    touched = {p.gpu_ids[0] for _, p in decisions}
    return Outcome(
        len(decisions), sum(1 for g in gpus if any(s.held for s in g.slices) or g.gpu_id in touched)
    )


def by_first_fit(gpus: list[GpuView], batch: list[ProfileShape]) -> Outcome:
    engine = FirstFit(gpus, whole_on_empty_mig=False)
    accepted = 0
    for shape in batch:
        request = SliceRequest(GPU_TYPE, shape)
        decision = engine.place(request)
        if isinstance(decision, Placement):
            engine.apply(decision, request)
            accepted += 1
    return Outcome(accepted, _used_held(list(engine.by_id.values())))


def _used_held(gpus: list[GpuView]) -> int:
    return sum(1 for g in gpus if any(s.held for s in g.slices))


def by_integer_program(gpus: list[GpuView], batch: list[ProfileShape]) -> Outcome:
    """Maximise accepted requests, then minimise GPUs in use, over every legal (GPU, start)."""
    demand = Counter(shape.name for shape in batch)
    shapes = {shape.name: shape for shape in batch}
    problem = pulp.LpProblem("mig_batch", pulp.LpMaximize)
    x: dict[tuple[str, int, int], pulp.LpVariable] = {}
    fresh: dict[int, pulp.LpVariable] = {}
    for g in gpus:
        if g.mig_mode == "layouts" and any(s.held for s in g.slices):
            for s in g.slices:  # a GPU in use keeps its layout: only its free slices are offered
                if not s.held and s.profile in shapes:
                    x[(s.profile, g.gpu_id, s.start)] = pulp.LpVariable(
                        f"x_{s.profile}_{g.gpu_id}_{s.start}", cat="Binary"
                    )
            continue
        if g.mig_mode == "layouts":  # holds nothing: any whole layout, as on an empty GPU
            g = dataclasses.replace(g, slices=[])
        taken = {slot for s in g.slices for slot in range(s.start, s.start + s.size)}
        has_media = any(s.media for s in g.slices)
        if not g.slices:
            fresh[g.gpu_id] = pulp.LpVariable(f"used_{g.gpu_id}", cat="Binary")
        for name, shape in shapes.items():
            if shape.media and has_media:
                continue
            here = []
            for start in shape.starts:
                if not taken & set(range(start, start + shape.size)):
                    var = x[(name, g.gpu_id, start)] = pulp.LpVariable(
                        f"x_{name}_{g.gpu_id}_{start}", cat="Binary"
                    )
                    here.append(var)
                    if g.gpu_id in fresh:
                        problem += var <= fresh[g.gpu_id]
            existing = sum(1 for s in g.slices if s.profile == name)
            if here:
                problem += pulp.lpSum(here) <= shape.max_count - existing
        media_vars = [v for (name, gid, _), v in x.items() if gid == g.gpu_id and shapes[name].media]
        if media_vars:
            problem += pulp.lpSum(media_vars) <= 1
        for slot in range(MEMORY_SLOTS):
            covering = [
                v for (name, gid, start), v in x.items()
                if gid == g.gpu_id and start <= slot < start + shapes[name].size
            ]  # fmt: skip
            if len(covering) > 1:
                problem += pulp.lpSum(covering) <= 1
    for name, count in demand.items():
        problem += pulp.lpSum(v for (n, _, _), v in x.items() if n == name) <= count
    problem += (len(gpus) + 1) * pulp.lpSum(x.values()) - pulp.lpSum(fresh.values())
    problem.solve(pulp.PULP_CBC_CMD(msg=False))
    accepted = round(sum(v.value() or 0 for v in x.values()))
    used = _used_held(gpus) + round(sum(v.value() or 0 for v in fresh.values()))
    return Outcome(accepted, used)


@dataclass(frozen=True)
class GapReport:
    snapshots: int
    engine: Outcome
    first_fit: Outcome
    optimum: Outcome
    worst_engine_gap: float  # largest per-snapshot shortfall in accepted requests, as a fraction
    engine_gpu_gap: float  # extra GPUs used where the engine accepted as many as the optimum


def compare(snapshots: int, seed: int, mix: Mix, mode: str = "dynamic") -> GapReport:
    """Place random batches on random small snapshots three ways and add the outcomes up."""
    rng = random.Random(seed)
    labels, weights = zip(*mix.profiles.items(), strict=True)
    totals = {"engine": [0, 0], "first_fit": [0, 0], "optimum": [0, 0]}
    worst = 0.0
    equal_used = [0, 0]
    for _ in range(snapshots):
        if mode == "layouts":
            gpus = small_layouts_snapshot(rng.randint(2, 5), rng, lambda r: _random_layout(r, GPU_TYPE))
        else:
            gpus = small_h100_snapshot(rng.randint(2, 5), rng)
        free_slots = sum(MEMORY_SLOTS - sum(s.size for s in g.slices if s.held) for g in gpus)
        batch = []
        while sum(shape.size for shape in batch) < free_slots * rng.uniform(0.4, 1.2):
            batch.append(profile_by_class(GPU_TYPE, rng.choices(labels, weights)[0]))
        outcomes = {
            "engine": by_engine(gpus, batch),
            "first_fit": by_first_fit(gpus, batch),
            "optimum": by_integer_program(gpus, batch),
        }
        for key, outcome in outcomes.items():
            totals[key][0] += outcome.accepted
            totals[key][1] += outcome.gpus_used
        best, mine = outcomes["optimum"], outcomes["engine"]
        if mine.accepted > best.accepted:
            raise AssertionError(f"engine beat the optimum: {mine} > {best}")
        if best.accepted:
            worst = max(worst, (best.accepted - mine.accepted) / best.accepted)
        if mine.accepted == best.accepted:
            equal_used[0] += mine.gpus_used
            equal_used[1] += best.gpus_used
    return GapReport(
        snapshots=snapshots,
        engine=Outcome(*totals["engine"]),
        first_fit=Outcome(*totals["first_fit"]),
        optimum=Outcome(*totals["optimum"]),
        worst_engine_gap=worst,
        engine_gpu_gap=(equal_used[0] - equal_used[1]) / equal_used[1] if equal_used[1] else 0.0,
    )
