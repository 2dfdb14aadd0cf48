"""Fleets and request streams for the placement benchmark: seeded synthetic ones, or JSON input."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from portal.fleet.geometry import COMPUTE_SLICES, ProfileShape, gpu_model
from portal.fleet.placement import (
    FleetState,
    GpuView,
    Placement,
    Request,
    SliceRequest,
    SliceView,
    WholeRequest,
)

GPU_TYPES = ("a100-80gb", "h100-80gb", "h200-141gb")


@dataclass(frozen=True)
class NodeSpec:
    node: str
    gpu_type: str
    gpus: int
    mig: bool
    # GPU index -> the (profile, start) slices it carries before the first event, all free
    layouts: dict[int, tuple[tuple[str, int], ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Arrival:
    """A request arriving at `t` that, if placed, holds its GPUs for `hold` seconds."""

    t: float
    id: str
    request: Request
    hold: float


@dataclass(frozen=True)
class Mix:
    """The shape of a synthetic workload."""

    name: str
    load: float  # offered demand / fleet capacity, in GPU-equivalents
    slice_share: float  # fraction of requests that ask for one MIG slice
    mean_hold: float = 3600.0
    whole_on_empty_mig: bool = True
    # profile class (by compute slices and media) -> weight; names are resolved per GPU model
    profiles: dict[str, float] = field(
        default_factory=lambda: {
            "1g": 0.30,
            "1g+me": 0.04,
            "1g-2x": 0.10,
            "2g": 0.22,
            "3g": 0.22,
            "4g": 0.08,
            "7g": 0.04,
        }
    )
    counts: dict[int, float] = field(default_factory=lambda: {1: 0.45, 2: 0.25, 4: 0.18, 8: 0.12})


def views(fleet: list[NodeSpec], mig_mode: str = "dynamic") -> list[GpuView]:
    """The GPUs of a fleet description, holding nothing, with ids in node order."""
    result = []
    for spec in fleet:
        model = gpu_model(spec.gpu_type)
        for index in range(spec.gpus):
            slices = []
            for profile, start in spec.layouts.get(index, ()):
                shape = model.profile(profile) if model else None
                assert shape is not None, f"{spec.gpu_type} has no {profile}"
                slices.append(SliceView(None, profile, start, shape.size, False, shape.media))
            result.append(
                GpuView(
                    len(result), spec.node, index, spec.gpu_type, spec.mig, slices=slices, mig_mode=mig_mode
                )
            )
    return result


def checker_rows(gpus: list[GpuView]) -> list[tuple]:
    """The fleet as the independent checker takes it: ids, places, modes and starting layouts."""
    return [
        (
            g.gpu_id,
            g.node,
            g.index,
            g.gpu_type,
            g.mig_enabled,
            g.mig_mode,
            [(s.profile, s.start) for s in g.slices],
        )
        for g in gpus
    ]


def mixed_fleet(gpus: int = 1000, per_node: int = 8) -> list[NodeSpec]:
    """A100, H100 and H200 nodes of 8 GPUs in turn; every other node of a type has MIG on."""
    fleet = []
    for number in range(gpus // per_node):
        gpu_type = GPU_TYPES[number % len(GPU_TYPES)]
        mig = (number // len(GPU_TYPES)) % 2 == 1
        fleet.append(
            NodeSpec(f"{gpu_type.split('-')[0]}-{'m' if mig else 'w'}{number:03d}", gpu_type, per_node, mig)
        )
    return fleet


def profile_by_class(gpu_type: str, label: str) -> ProfileShape:
    """The profile of a GPU model for a class label such as "3g", "1g+me" or "1g-2x"."""
    model = gpu_model(gpu_type)
    assert model is not None
    for shape in model.profiles:
        cls = f"{shape.compute_slices}g"
        if shape.media:
            cls += "+me"
        elif shape.compute_slices == 1 and shape.size == 2:
            cls = "1g-2x"
        if cls == label:
            return shape
    raise KeyError(label)


def synthetic(mix: Mix, fleet: list[NodeSpec], arrivals: int, seed: int) -> list[Arrival]:
    """Poisson arrivals with exponential holding times, sized to offer `mix.load` of the fleet."""
    rng = random.Random(seed)
    labels, label_weights = zip(*mix.profiles.items(), strict=True)
    counts, count_weights = zip(*mix.counts.items(), strict=True)
    shapes = {(t, label): profile_by_class(t, label) for t in GPU_TYPES for label in labels}
    mean_slice = sum(w * shapes[(GPU_TYPES[0], lb)].compute_slices for lb, w in mix.profiles.items())
    mean_slice /= sum(label_weights) * COMPUTE_SLICES
    mean_whole = sum(c * w for c, w in mix.counts.items()) / sum(count_weights)
    mean_demand = mix.slice_share * mean_slice + (1 - mix.slice_share) * mean_whole
    capacity = sum(spec.gpus for spec in fleet)
    rate = mix.load * capacity / (mean_demand * mix.mean_hold)
    types = sorted({spec.gpu_type for spec in fleet})
    t = 0.0
    result = []
    for number in range(arrivals):
        t += rng.expovariate(rate)
        gpu_type = rng.choice(types)
        request: Request
        if rng.random() < mix.slice_share:
            label = rng.choices(labels, label_weights)[0]
            request = SliceRequest(gpu_type, shapes[(gpu_type, label)])
        else:
            request = WholeRequest(gpu_type, rng.choices(counts, count_weights)[0])
        result.append(Arrival(t, f"r{number}", request, rng.expovariate(1 / mix.mean_hold)))
    return result


def small_h100_snapshot(gpus: int, rng: random.Random) -> list[GpuView]:
    """A few MIG H100s, some already holding a random layout of slices (for the optimum check)."""
    fleet = views([NodeSpec("small", "h100-80gb", gpus, True)])
    state = FleetState(fleet)
    profiles = gpu_model("h100-80gb").profiles  # type: ignore[union-attr]
    for _ in range(rng.randint(0, gpus * 2)):
        shape = rng.choice(profiles[:5])
        gpu = rng.choice(fleet)
        start = rng.choice(shape.starts)
        try:
            state.apply(Placement(gpu.node, (gpu.gpu_id,), "seed", shape.name, start), shape)
        except ValueError:
            continue
    return state.views()


def small_layouts_snapshot(
    gpus: int, rng: random.Random, layout: Callable[[random.Random], tuple]
) -> list[GpuView]:
    """A few "layouts" H100s: some uncut, some with a full layout (from `layout`) of which some
    slices are held (for the optimum check in layouts mode)."""
    result = []
    for view in views([NodeSpec("small", "h100-80gb", gpus, True)], "layouts"):
        slices = []
        if rng.random() < 0.6:
            busy = rng.random() < 0.6
            for profile, start in layout(rng):
                shape = gpu_model("h100-80gb").profile(profile)  # type: ignore[union-attr]
                assert shape is not None
                held = busy and rng.random() < 0.5
                slices.append(SliceView(None, profile, start, shape.size, held, shape.media))
        result.append(dataclasses.replace(view, slices=slices))
    return result
