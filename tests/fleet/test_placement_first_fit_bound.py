"""What "never behind first fit" costs: a check by exhaustion that no rule can have it and ever beat it.

Two workloads share their first request, a 1g slice on an empty GPU. On the first, [1g, 4g], a
rule accepts both only if the 1g leaves the 4g's memory slots free; first fit puts the 1g at slot
0 (or cuts the GPU into 1g slices) and turns the 4g away. On the second workload, first fit
accepts every request. The tests below try every place the first 1g can go (every start, or
every layout a "layouts" GPU can be cut into) and, after it, the best continuation of each
workload that any rule could reach, even one that knew the future. Every first move that wins
the first workload loses the second. A rule decides the first 1g's place before it sees the
second request, so any rule that is never behind first fit must put it where first fit does,
and the same holds in every state that has such a pair of continuations. The engine does better
than first fit on average by taking exactly these choices (bench/README.md, "Random workload
families"), so it is behind on some workloads, by design.
"""

from __future__ import annotations

from functools import cache

from portal.fleet.geometry import GPU_MODELS, MEMORY_SLOTS, ProfileShape, fits
from portal.fleet.placement import Placement, first_fit, place
from tests.fleet.test_placement import H100, mig_gpu, run_sequence, shape, slice_request

WINS_4G = ["1g.10gb", "4g.40gb"]  # first fit accepts 1 of 2
DYNAMIC_FIRST_FIT_WINS = ["1g.10gb", "3g.40gb", "2g.20gb", "1g.10gb"]  # first fit accepts 4 of 4
LAYOUTS_FIRST_FIT_WINS = ["1g.10gb"] * 7  # first fit cuts 7 x 1g and accepts all 7

Ranges = tuple[tuple[str, int], ...]


def _add(cut: Ranges, candidate: ProfileShape, start: int) -> Ranges | None:
    """`cut` with `candidate` at `start`, or None where the geometry or the per-GPU counts forbid it."""
    shapes = [(shape(name), at) for name, at in cut]
    if not fits([(at, s.size) for s, at in shapes], candidate, start):
        return None
    if sum(s.name == candidate.name for s, _ in shapes) >= candidate.max_count:
        return None
    if candidate.media and any(s.media for s, _ in shapes):
        return None
    return tuple(sorted((*cut, (candidate.name, start)), key=lambda item: item[1]))


def _best_dynamic(held: Ranges, rest: tuple[str, ...]) -> int:
    """The most of `rest` any rule accepts, in order, on a "dynamic" GPU holding `held` (all kept)."""

    @cache
    def best(state: Ranges, index: int) -> int:
        if index == len(rest):
            return 0
        wanted = shape(rest[index])
        result = best(state, index + 1)  # turned away (or left to wait)
        for start in wanted.starts:
            after = _add(state, wanted, start)
            if after is not None:
                result = max(result, 1 + best(after, index + 1))
        return result

    return best(held, 0)


def _layouts() -> set[Ranges]:
    """Every layout an empty H100 can be cut into (maximal or not), by exhaustion: the memory
    slots each takes as a bit mask, at most one +me slice, each profile within its count."""
    shapes = list(GPU_MODELS[H100].profiles)
    found: dict[Ranges, tuple[int, bool]] = {(): (0, False)}  # layout -> (slots taken, has +me)
    frontier: list[Ranges] = [()]
    while frontier:
        cut = frontier.pop()
        taken, media = found[cut]
        for candidate in shapes:
            if (candidate.media and media) or sum(p == candidate.name for p, _ in cut) >= candidate.max_count:
                continue
            for start in candidate.starts:
                slots = ((1 << candidate.size) - 1) << start
                if start + candidate.size > MEMORY_SLOTS or slots & taken:
                    continue
                after = tuple(sorted((*cut, (candidate.name, start)), key=lambda item: item[1]))
                if after not in found:
                    found[after] = (taken | slots, media or candidate.media)
                    frontier.append(after)
    return set(found)


def _best_layout(layout: Ranges, requests: list[str]) -> int:
    """The most of `requests` a layout accepts when nothing on it is released: one per free slice
    of the profile (a "layouts" GPU holding anything is not re-partitioned)."""
    return sum(min(requests.count(name), sum(p == name for p, _ in layout)) for name in set(requests))


def _accepted(decisions: list) -> int:
    return sum(isinstance(d, Placement) for d in decisions)


def test_dynamic_first_fit_scores_of_the_two_workloads():
    assert _accepted(run_sequence(first_fit, [mig_gpu(1)], WINS_4G)) == 1
    assert _accepted(run_sequence(first_fit, [mig_gpu(1)], DYNAMIC_FIRST_FIT_WINS)) == 4


def test_dynamic_every_first_move_that_beats_first_fit_once_loses_to_it_on_the_other():
    one = shape("1g.10gb")
    moves: list[tuple[int | None, Ranges]] = [(None, ())]  # turned away (or left waiting) first
    for start in one.starts:
        held = _add((), one, start)
        assert held is not None
        moves.append((start, held))
    winners = []
    for start, held in moves:
        taken = 0 if start is None else 1
        wins = taken + _best_dynamic(held, tuple(WINS_4G[1:]))
        other = taken + _best_dynamic(held, tuple(DYNAMIC_FIRST_FIT_WINS[1:]))
        if wins > 1:
            winners.append(start)
            assert other < 4, f"a 1g at slot {start} would beat first fit on both workloads"
    assert winners == [4, 5, 6]  # the slots that keep the 4g's slots 0-3 free


def test_the_engine_takes_such_a_move_and_pays_for_it_on_the_other_workload():
    """With no demand known the engine keeps the 4g's slots free: ahead on one, behind on the other."""
    assert _accepted(run_sequence(place, [mig_gpu(1)], WINS_4G)) == 2
    assert _accepted(run_sequence(place, [mig_gpu(1)], DYNAMIC_FIRST_FIT_WINS)) == 3


def test_layouts_every_first_cut_that_beats_first_fit_once_loses_to_it_on_the_other():
    layouts = [layout for layout in _layouts() if any(p == "1g.10gb" for p, _ in layout)]
    assert len(layouts) == 2080  # every H100 layout that holds a 1g.10gb, not a handful
    first_fit_cut = first_fit([mig_gpu(1, mig_mode="layouts")], slice_request("1g.10gb"))
    assert isinstance(first_fit_cut, Placement) and first_fit_cut.layout is not None
    assert _best_layout(first_fit_cut.layout, WINS_4G) == 1
    assert _best_layout(first_fit_cut.layout, LAYOUTS_FIRST_FIT_WINS) == 7
    winners = [layout for layout in layouts if _best_layout(layout, WINS_4G) == 2]
    assert winners
    for layout in winners:
        assert _best_layout(layout, LAYOUTS_FIRST_FIT_WINS) < 7, layout
