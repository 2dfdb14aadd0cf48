"""Precomputed MIG tables over a GPU's 8-bit memory-slot occupancy mask.

A GPU's layout, as far as what fits next is concerned, is its occupied-slot mask plus whether it
already has a media (`+me`) slice: 512 states. Every per-state question the engine asks (where
would this profile go, how much future room would that cost) is answered once here, from the
geometry table, so a decision is a few dictionary look-ups instead of a search.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from portal.fleet.geometry import GPU_MODELS, MEMORY_SLOTS, ProfileShape

FULL_MASK = (1 << MEMORY_SLOTS) - 1
MEDIA_BIT = 1 << MEMORY_SLOTS  # set in a state key when the GPU already holds a +me slice


def range_mask(start: int, size: int) -> int:
    """The bit mask of memory slots [start, start + size)."""
    return ((1 << size) - 1) << start


def _geometric_shapes() -> dict[tuple[int, tuple[int, ...]], int]:
    """Distinct (size, starts) shapes of every known model, with their compute slices."""
    shapes: dict[tuple[int, tuple[int, ...]], int] = {}
    for model in GPU_MODELS.values():
        for shape in model.profiles:
            shapes[(shape.size, shape.starts)] = shape.compute_slices
    return shapes


SHAPES = _geometric_shapes()


def max_instances(mask: int, size: int, starts: tuple[int, ...]) -> int:
    """How many more instances of a (size, starts) shape fit beside the occupied `mask`."""

    def best(occupied: int, from_index: int) -> int:
        result = 0
        for position in range(from_index, len(starts)):
            bits = range_mask(starts[position], size)
            if bits & occupied == 0 and starts[position] + size <= MEMORY_SLOTS:
                result = max(result, 1 + best(occupied | bits, position + 1))
        return result

    return best(mask, 0)


# Per shape, in SHAPES order: how many more instances fit beside each occupied mask.
INSTANCES: tuple[tuple[int, ...], ...] = tuple(
    tuple(max_instances(mask, size, starts) for mask in range(FULL_MASK + 1)) for size, starts in SHAPES
)
# The weights `room` uses when nothing is known of demand: compute slices, so losing room for a
# big profile costs more than losing room for a 1g and a small slice lands where it breaks the
# fewest large aligned runs.
COMPUTE_WEIGHTS: tuple[int, ...] = tuple(SHAPES.values())


@cache
def room(weights: tuple[int, ...] = COMPUTE_WEIGHTS) -> tuple[int, ...]:
    """Future room left by each layout: per shape, how many more fit, times the shape's weight."""
    return tuple(sum(w * INSTANCES[k][mask] for k, w in enumerate(weights)) for mask in range(FULL_MASK + 1))


QUANTA = 5


def demand_weights(demand: dict[tuple[int, tuple[int, ...]], float]) -> tuple[int, ...]:
    """Room weights from demand per shape (size, starts): each shape's share of the requests,
    in fifths, plus one so no shape's room is worth nothing. Coarse on purpose: the tables
    built for a weight vector are cached, and demand that barely moved reuses them."""
    total = sum(demand.values())
    if total <= 0:
        return COMPUTE_WEIGHTS
    return tuple(1 + round(QUANTA * demand.get(shape, 0.0) / total) for shape in SHAPES)


def _longest_free_run(mask: int) -> int:
    longest = current = 0
    for slot in range(MEMORY_SLOTS):
        current = 0 if mask >> slot & 1 else current + 1
        longest = max(longest, current)
    return longest


FREE_RUN: tuple[int, ...] = tuple(_longest_free_run(mask) for mask in range(FULL_MASK + 1))


@dataclass(frozen=True)
class Choice:
    """The best start for one profile in one GPU state, and what it costs."""

    key: int  # state key: occupied mask, plus MEDIA_BIT when a +me slice is present
    start: int
    loss: int  # room lost by cutting the slice here
    run_after: int  # longest free run of slots left on the GPU


def shape_key(shape: ProfileShape) -> tuple[int, tuple[int, ...], bool]:
    return (shape.size, shape.starts, shape.media)


@cache
def choices(
    size: int, starts: tuple[int, ...], media: bool, weights: tuple[int, ...] = COMPUTE_WEIGHTS
) -> tuple[Choice, ...]:
    """Every GPU state that can take this shape, best state first, with its best start.

    Order: partly-cut GPUs before empty ones (keep whole GPUs whole), then least room lost
    (room weighted by `weights`, see `room`), then the fuller GPU (classic best fit), then the
    lower mask for a stable order.
    """
    room_left = room(weights)
    found: list[tuple[tuple[int, int, int, int], Choice]] = []
    for key in range(2 * (FULL_MASK + 1)):
        mask, has_media = key & FULL_MASK, bool(key & MEDIA_BIT)
        if media and has_media:
            continue
        if has_media and mask == 0:
            continue  # a media slice occupies a slot, so this state cannot exist
        options = []
        for start in starts:
            bits = range_mask(start, size)
            if start + size <= MEMORY_SLOTS and bits & mask == 0:
                after = mask | bits
                options.append((room_left[mask] - room_left[after], -FREE_RUN[after], start))
        if not options:
            continue
        loss, neg_run, start = min(options)
        rank = (mask == 0, loss, -mask.bit_count(), key)
        found.append((rank, Choice(key=key, start=start, loss=loss, run_after=-neg_run)))
    found.sort(key=lambda item: item[0])
    return tuple(choice for _, choice in found)
