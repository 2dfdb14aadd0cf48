"""Random workload families for the placement benchmark: many fleets and streams, not a chosen few.

Each draw picks, from one seeded generator: the fleet (3-40 nodes of 4 or 8 GPUs, one to three
GPU types, 10-90 % of nodes with MIG on, node names in random order so MIG and plain nodes
interleave), the requests (0-60 % whole GPUs with random weights over 1, 2, 4 and 8 GPUs; slices
over a random subset of the seven profile classes with random weights), the hold times
(exponential, log-normal or a short/long mix, mean 10 min to 2 h), the load (0.5 to 1.4 of the
fleet) and, in half the draws, layouts already on the MIG GPUs before the first event (the GPU
Operator's named ones or random full ones). The same draw runs through the engine and through
first fit, and the difference in accepted requests is what `bench/placement.py --draws` reports.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from bench.workloads import GPU_TYPES, Arrival, NodeSpec, profile_by_class
from portal.fleet.geometry import COMPUTE_SLICES, MEMORY_SLOTS, gpu_model
from portal.fleet.placement import Request, SliceRequest, WholeRequest

CLASSES = ("1g", "1g+me", "1g-2x", "2g", "3g", "4g", "7g")
# The GPU Operator's default MIG configs that apply to every GPU of a node, by profile class.
NAMED_LAYOUTS = {
    "all-1g": (("1g", 0), ("1g", 1), ("1g", 2), ("1g", 3), ("1g", 4), ("1g", 5), ("1g", 6)),
    "all-2g": (("2g", 0), ("2g", 2), ("2g", 4)),
    "all-3g": (("3g", 0), ("3g", 4)),
    "all-7g": (("7g", 0),),
    "all-balanced": (("2g", 0), ("1g", 2), ("1g", 3), ("3g", 4)),
}


@dataclass(frozen=True)
class Draw:
    """One random workload: its fleet, its stream, and the knobs that made them (for the report)."""

    number: int
    fleet: list[NodeSpec]
    arrivals: list[Arrival]
    whole_on_empty_mig: bool
    knobs: str


def _dirichlet(rng: random.Random, keys: list, keep: float) -> dict:
    chosen = [k for k in keys if rng.random() < keep] or [rng.choice(keys)]
    weights = {k: rng.gammavariate(1.0, 1.0) for k in chosen}
    total = sum(weights.values())
    return {k: w / total for k, w in weights.items()}


def _random_layout(rng: random.Random, gpu_type: str) -> tuple[tuple[str, int], ...]:
    """A random full layout: profiles dropped in random order where the geometry lets them."""
    model = gpu_model(gpu_type)
    assert model is not None
    shapes = list(model.profiles)
    taken: set[int] = set()
    layout: list[tuple[str, int]] = []
    media = False
    for _ in range(20):
        shape = rng.choice(shapes)
        starts = [
            s for s in shape.starts
            if s + shape.size <= MEMORY_SLOTS and not taken & set(range(s, s + shape.size))
        ]  # fmt: skip
        if (
            not starts
            or (shape.media and media)
            or sum(p == shape.name for p, _ in layout) >= shape.max_count
        ):
            continue
        start = rng.choice(starts)
        layout.append((shape.name, start))
        taken |= set(range(start, start + shape.size))
        media = media or shape.media
    return tuple(sorted(layout, key=lambda item: item[1]))


def _named_layout(name: str, gpu_type: str) -> tuple[tuple[str, int], ...]:
    return tuple((profile_by_class(gpu_type, label).name, start) for label, start in NAMED_LAYOUTS[name])


def _hold(rng: random.Random, kind: str, mean: float) -> float:
    if kind == "exponential":
        return rng.expovariate(1 / mean)
    if kind == "lognormal":
        sigma = 1.0
        return rng.lognormvariate(math.log(mean) - sigma * sigma / 2, sigma)
    # short/long: 80 % short sessions at a quarter of the mean, 20 % long ones making up the rest
    return rng.expovariate(1 / (mean / 4)) if rng.random() < 0.8 else rng.expovariate(1 / (mean * 4))


def draw(number: int, seed: int, arrivals: int = 1200, stream: int | None = None) -> Draw:
    """Draw `number` of the family seeded `seed` (the same pair always gives the same workload).

    `stream` keeps the draw's fleet and knobs but draws another stream of requests from them: the
    same kind of workload, another sample of it."""
    rng = random.Random(f"{seed}:{number}")
    types = rng.sample(GPU_TYPES, rng.randint(1, len(GPU_TYPES)))
    per_node = rng.choice((4, 8))
    nodes = rng.randint(3, 40)
    mig_share = rng.uniform(0.1, 0.9)
    layouts_share = rng.uniform(0.2, 1.0) if rng.random() < 0.5 else 0.0
    named = rng.random() < 0.5
    fleet = []
    names = rng.sample(range(100_000), nodes)
    for n in range(nodes):
        gpu_type = types[n % len(types)]
        mig = rng.random() < mig_share
        layouts = {}
        if mig:
            for index in range(per_node):
                if rng.random() < layouts_share:
                    if named:
                        layouts[index] = _named_layout(rng.choice(sorted(NAMED_LAYOUTS)), gpu_type)
                    else:
                        layouts[index] = _random_layout(rng, gpu_type)
        fleet.append(NodeSpec(f"node-{names[n]:05d}", gpu_type, per_node, mig, layouts))
    fleet.sort(key=lambda spec: spec.node)
    if not any(spec.mig for spec in fleet):
        first = fleet[0]
        fleet[0] = NodeSpec(first.node, first.gpu_type, first.gpus, True)
    whole_share = rng.uniform(0.0, 0.6)
    counts = _dirichlet(rng, [c for c in (1, 2, 4, 8) if c <= per_node], keep=0.8)
    mix = _dirichlet(rng, list(CLASSES), keep=0.7)
    hold_kind = rng.choice(("exponential", "lognormal", "short/long"))
    mean_hold = rng.uniform(600, 7200)
    load = rng.uniform(0.5, 1.4)
    whole_on_empty_mig = rng.random() < 0.8
    mean_slice = (
        sum(w * profile_by_class(types[0], c).compute_slices for c, w in mix.items()) / COMPUTE_SLICES
    )
    mean_whole = sum(c * w for c, w in counts.items())
    mean_demand = (1 - whole_share) * mean_slice + whole_share * mean_whole
    rate = load * nodes * per_node / (mean_demand * mean_hold)
    present = sorted({spec.gpu_type for spec in fleet})
    classes, class_weights = zip(*mix.items(), strict=True)
    sizes, size_weights = zip(*counts.items(), strict=True)
    if stream is not None:
        rng = random.Random(f"{seed}:{number}:stream:{stream}")
    t = 0.0
    requests = []
    for k in range(arrivals):
        t += rng.expovariate(rate)
        gpu_type = rng.choice(present)
        request: Request
        if rng.random() < whole_share:
            request = WholeRequest(gpu_type, rng.choices(sizes, size_weights)[0])
        else:
            request = SliceRequest(
                gpu_type, profile_by_class(gpu_type, rng.choices(classes, class_weights)[0])
            )
        requests.append(Arrival(t, f"r{k}", request, _hold(rng, hold_kind, mean_hold)))
    mig_gpus = sum(spec.gpus for spec in fleet if spec.mig)
    knobs = (
        f"{nodes}x{per_node} GPUs ({'/'.join(types)}), {mig_gpus} MIG, "
        f"pre-cut {'named' if named else 'random'} {layouts_share:.0%}, whole {whole_share:.0%}, "
        f"load {load:.2f}, {hold_kind} hold {mean_hold / 60:.0f} min, "
        f"profiles {','.join(f'{c}:{w:.2f}' for c, w in mix.items())}, "
        f"whole_on_empty_mig={whole_on_empty_mig}"
    )
    return Draw(number, fleet, requests, whole_on_empty_mig, knobs)
