"""Exact cases for the MIG-aware placement engine, the queue drain and the benchmark's JSON mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from portal.fleet.geometry import GPU_MODELS, ProfileShape
from portal.fleet.placement import (
    FleetState,
    GpuView,
    NoFit,
    Placement,
    PlacementConflict,
    QueuedRequest,
    SliceRequest,
    SliceView,
    WholeRequest,
    drain,
    first_fit,
    place,
)

H100 = "h100-80gb"
ROOT = Path(__file__).resolve().parents[2]


def shape(name: str, gpu_type: str = H100) -> ProfileShape:
    found = GPU_MODELS[gpu_type].profile(name)
    assert found is not None
    return found


def held(name: str, start: int, *, is_held: bool = True, slice_id: int | None = None) -> SliceView:
    s = shape(name)
    return SliceView(slice_id, name, start, s.size, is_held, s.media)


def mig_gpu(gpu_id: int, *slices: SliceView, node: str = "n0", **kwargs: object) -> GpuView:
    return GpuView(gpu_id, node, gpu_id, H100, True, slices=list(slices), **kwargs)  # type: ignore[arg-type]


def slice_request(name: str) -> SliceRequest:
    return SliceRequest(H100, shape(name))


def run_sequence(engine, gpus: list[GpuView], names: list[str]) -> list[Placement | NoFit]:
    """Place slices one after another on a working copy, applying each decision."""
    work = [
        GpuView(g.gpu_id, g.node, g.index, g.gpu_type, g.mig_enabled, slices=list(g.slices)) for g in gpus
    ]
    results = []
    for name in names:
        decision = engine(work, slice_request(name))
        results.append(decision)
        if isinstance(decision, Placement):
            gpu = next(g for g in work if g.gpu_id == decision.gpu_ids[0])
            gpu.slices.append(held(name, decision.start or 0))
    return results


# -- slices: geometry and best fit ---------------------------------------------------------------


def test_3g_after_seven_1g_does_not_fit_that_gpu_but_fits_an_empty_one() -> None:
    full = mig_gpu(0, *(held("1g.10gb", start) for start in range(7)))
    assert place([full], slice_request("3g.40gb")) == NoFit("no h100-80gb with a free 3g.40gb position")
    decision = place([full, mig_gpu(1)], slice_request("3g.40gb"))
    assert isinstance(decision, Placement)
    assert decision.gpu_ids == (1,)
    assert decision.start in (0, 4)


def test_first_1g_goes_to_slot_6_and_keeps_the_4_slot_run_at_0() -> None:
    decision = place([mig_gpu(0)], slice_request("1g.10gb"))
    assert isinstance(decision, Placement)
    assert decision.start == 6
    assert decision.creates_slice


def test_after_three_1g_a_4g_still_fits_where_first_fit_broke_it() -> None:
    names = ["1g.10gb"] * 3 + ["4g.40gb"]
    best = run_sequence(place, [mig_gpu(0)], names)
    first = run_sequence(first_fit, [mig_gpu(0)], names)
    assert [p.start for p in best if isinstance(p, Placement)] == [6, 5, 4, 0]
    assert isinstance(first[-1], NoFit)


def test_slice_goes_to_partly_cut_gpu_before_empty_one() -> None:
    decision = place([mig_gpu(0), mig_gpu(1, held("3g.40gb", 4))], slice_request("1g.10gb"))
    assert isinstance(decision, Placement)
    assert decision.gpu_ids == (1,)
    assert decision.start in (0, 1, 2, 3)


def test_small_slice_fills_the_tight_gpu_and_keeps_the_other_gpus_4_slot_run() -> None:
    # GPU 0 has slots 0-3 free (room for a 4g); GPU 1 has only slots 0-1 free.
    roomy = mig_gpu(0, held("3g.40gb", 4))
    tight = mig_gpu(1, held("2g.20gb", 2), held("3g.40gb", 4))
    best = run_sequence(place, [roomy, tight], ["2g.20gb", "4g.40gb"])
    first = run_sequence(first_fit, [roomy, tight], ["2g.20gb", "4g.40gb"])
    assert isinstance(best[0], Placement) and best[0].gpu_ids == (1,)
    assert best[0].reason == "best fit: fills n0/1"
    assert isinstance(best[1], Placement) and best[1].gpu_ids == (0,)
    assert isinstance(first[1], NoFit)


def test_free_slice_of_the_exact_profile_is_reused_first() -> None:
    spare = mig_gpu(0, held("2g.20gb", 4, is_held=False, slice_id=42))
    decision = place([mig_gpu(1), spare], slice_request("2g.20gb"))
    assert isinstance(decision, Placement)
    assert (decision.gpu_ids, decision.slice_id, decision.start) == ((0,), 42, 4)
    assert not decision.creates_slice
    assert "reuses" in decision.reason


def test_at_most_one_media_slice_per_gpu() -> None:
    with_media = mig_gpu(0, held("1g.10gb+me", 0))
    assert isinstance(place([with_media], slice_request("1g.10gb+me")), NoFit)
    decision = place([with_media, mig_gpu(1, held("3g.40gb", 4))], slice_request("1g.10gb+me"))
    assert isinstance(decision, Placement) and decision.gpu_ids == (1,)


def test_a_free_slice_on_an_idle_dynamic_gpu_waits_until_no_gpu_in_use_can_take_the_slice() -> None:
    idle = mig_gpu(0, held("1g.10gb", 6, is_held=False, slice_id=7), node="n1")
    busy = mig_gpu(1, held("3g.40gb", 4))
    decision = place([idle, busy], slice_request("1g.10gb"))
    assert isinstance(decision, Placement)
    assert decision.gpu_ids == (1,) and decision.creates_slice
    full = mig_gpu(1, held("4g.40gb", 0), held("3g.40gb", 4))
    decision = place([idle, full], slice_request("1g.10gb"))
    assert isinstance(decision, Placement)
    assert (decision.gpu_ids, decision.slice_id) == ((0,), 7)


def test_gpu_held_whole_gets_no_slices() -> None:
    gpus = [mig_gpu(0, whole_held=True)]
    assert isinstance(place(gpus, slice_request("1g.10gb")), NoFit)


def test_profile_of_another_model_is_refused() -> None:
    h200 = GpuView(0, "n0", 0, "h200-141gb", True)
    decision = place([h200], SliceRequest("h200-141gb", shape("1g.10gb")))
    assert decision == NoFit("h200-141gb offers no 1g.10gb profile")


# -- policies and reconfiguration ----------------------------------------------------------------


def test_policy_never_only_reuses_existing_free_slices() -> None:
    empty = mig_gpu(0, mig_change_policy="never")
    assert isinstance(place([empty], slice_request("1g.10gb")), NoFit)
    spare = mig_gpu(1, held("1g.10gb", 3, is_held=False, slice_id=7), mig_change_policy="never")
    decision = place([empty, spare], slice_request("1g.10gb"))
    assert isinstance(decision, Placement) and decision.slice_id == 7


def test_policy_idle_node_cuts_only_on_nodes_without_held_slices() -> None:
    busy = [
        mig_gpu(0, held("1g.10gb", 6), mig_change_policy="idle_node"),
        mig_gpu(1, mig_change_policy="idle_node"),
    ]
    assert isinstance(place(busy, slice_request("3g.40gb")), NoFit)
    idle = GpuView(2, "n1", 0, H100, True, mig_change_policy="idle_node")
    decision = place([*busy, idle], slice_request("3g.40gb"))
    assert isinstance(decision, Placement) and decision.node == "n1"


def test_policy_idle_node_still_reuses_a_free_slice_on_a_busy_node() -> None:
    gpu = mig_gpu(
        0, held("1g.10gb", 6), held("2g.20gb", 0, is_held=False, slice_id=9), mig_change_policy="idle_node"
    )
    decision = place([gpu], slice_request("2g.20gb"))
    assert isinstance(decision, Placement) and decision.slice_id == 9


def test_policy_per_gpu_cuts_beside_slices_in_use() -> None:
    gpu = mig_gpu(0, held("1g.10gb", 6))
    assert isinstance(place([gpu], slice_request("3g.40gb")), Placement)


def test_reconfiguring_gpus_are_skipped() -> None:
    spare = mig_gpu(0, held("1g.10gb", 6, is_held=False, slice_id=1), reconfiguring=True)
    assert isinstance(place([spare], slice_request("1g.10gb")), NoFit)
    plain = GpuView(1, "n0", 1, H100, False, reconfiguring=True)
    assert isinstance(place([plain], WholeRequest(H100, 1)), NoFit)


# -- whole GPUs ----------------------------------------------------------------------------------


def plain_node(node: str, gpus: int, busy: int, first_id: int) -> list[GpuView]:
    return [GpuView(first_id + i, node, i, H100, False, whole_held=i < busy) for i in range(gpus)]


def test_whole_request_goes_to_the_node_leaving_fewest_stranded() -> None:
    fleet = plain_node("a", 8, 3, 0) + plain_node("b", 8, 4, 8) + plain_node("c", 8, 0, 16)
    decision = place(fleet, WholeRequest(H100, 4))
    assert isinstance(decision, Placement)
    assert decision.node == "b" and decision.gpu_ids == (12, 13, 14, 15)
    assert "leaves 0 free" in decision.reason
    baseline = first_fit(fleet, WholeRequest(H100, 4))
    assert isinstance(baseline, Placement) and baseline.node == "a"


def test_whole_request_never_takes_a_gpu_holding_slices_or_a_mig_gpu() -> None:
    fleet = [mig_gpu(0), mig_gpu(1, held("1g.10gb", 6, is_held=False))]
    assert place(fleet, WholeRequest(H100, 1)) == NoFit(
        "no h100-80gb node with 1 free GPU (at most 0 free on one node)"
    )
    decision = place(fleet, WholeRequest(H100, 1), whole_on_empty_mig=True)
    assert isinstance(decision, Placement) and decision.gpu_ids == (0,)


def test_whole_request_prefers_plain_gpus_over_empty_mig_ones_unless_mig_fits_exactly() -> None:
    mig_node = [mig_gpu(n, node="m") for n in range(3)]
    decision = place([*mig_node, *plain_node("w", 3, 0, 10)], WholeRequest(H100, 2), whole_on_empty_mig=True)
    assert isinstance(decision, Placement) and decision.node == "w"
    exact = place([*mig_node[:2], *plain_node("w", 3, 0, 10)], WholeRequest(H100, 2), whole_on_empty_mig=True)
    assert isinstance(exact, Placement) and exact.node == "m"


def test_whole_request_needs_all_its_gpus_on_one_node() -> None:
    fleet = plain_node("a", 8, 6, 0) + plain_node("b", 8, 6, 8)
    assert isinstance(place(fleet, WholeRequest(H100, 3)), NoFit)


def place_in_turn(
    gpus: list[GpuView], requests: list[WholeRequest | SliceRequest]
) -> list[Placement | NoFit]:
    """Place requests one after another on one FleetState (MIG GPUs may go whole), applying each."""
    state = FleetState(gpus)
    decisions = []
    for request in requests:
        decision = state.place(request, whole_on_empty_mig=True)
        if isinstance(decision, Placement):
            state.apply(decision, request.profile if isinstance(request, SliceRequest) else None)
        decisions.append(decision)
    return decisions


def test_whole_request_fills_a_mig_node_held_whole_and_keeps_the_empty_node_for_8_gpus() -> None:
    # MIG node m: 6 of 8 GPUs held whole, 2 empty; no GPU of the type carries a slice. The old rule
    # (plain GPUs before empty MIG ones) put the 1-GPU request on the empty plain node w, which
    # left no node with 8 free GPUs for the next request.
    mig_node = [mig_gpu(n, node="m", whole_held=n < 6) for n in range(8)]
    one, eight = place_in_turn(
        [*mig_node, *plain_node("w", 8, 0, 10)], [WholeRequest(H100, 1), WholeRequest(H100, 8)]
    )
    assert isinstance(one, Placement) and one.node == "m" and one.gpu_ids == (6,)
    assert one.reason == (
        "best fit: 1 of 2 free h100-80gb on m, leaves 1 free there; breaks the fewest free blocks of"
        " 4 or 8 GPUs; takes 1 empty MIG GPU (slices hold no more of them than whole requests)"
    )
    assert isinstance(eight, Placement) and eight.node == "w" and eight.gpu_ids == tuple(range(10, 18))


def test_whole_request_keeps_the_last_empty_mig_gpu_for_slices_where_slices_hold_the_mig_gpus() -> None:
    # Slices hold 7 of m's 8 MIG GPUs, so its empty one is kept for slices even though it would
    # fit a 1-GPU request exactly; the old rule (exact fit first) took it and the 7g was refused.
    mig_node = [mig_gpu(n, *([held("7g.80gb", 0)] if n < 7 else []), node="m") for n in range(8)]
    one, slice_7g = place_in_turn(
        [*mig_node, *plain_node("w", 8, 5, 10)], [WholeRequest(H100, 1), slice_request("7g.80gb")]
    )
    assert isinstance(one, Placement) and one.node == "w" and one.gpu_ids == (15,)
    assert one.reason == (
        "best fit: 1 of 3 free h100-80gb on w, leaves 2 free there; keeps empty MIG GPUs for slices"
    )
    assert isinstance(slice_7g, Placement) and slice_7g.gpu_ids == (7,) and slice_7g.start == 0


def test_whole_request_keeps_a_free_block_of_4_rather_than_fit_tightest() -> None:
    # a has 4 free, b 5. The tightest fit for 1 GPU is a (3 left), which leaves room for one 4-GPU
    # request only; taking it from b keeps a 4-GPU block free on both nodes.
    fleet = plain_node("a", 8, 4, 0) + plain_node("b", 8, 3, 8)
    one, four, another_four = place_in_turn(fleet, [WholeRequest(H100, n) for n in (1, 4, 4)])
    assert isinstance(one, Placement) and one.node == "b"
    assert one.reason == (
        "best fit: 1 of 5 free h100-80gb on b, leaves 4 free there; breaks the fewest free blocks of 4 or 8 GPUs"
    )
    assert isinstance(four, Placement) and four.node == "a"
    assert (
        four.reason
        == "best fit: 4 of 4 free h100-80gb on a, leaves 0 free there; first of equal fits in node order"
    )
    assert isinstance(another_four, Placement) and another_four.node == "b"
    assert (
        another_four.reason
        == "best fit: 4 of 4 free h100-80gb on b, leaves 0 free there; the only node with room"
    )


# -- the incremental state -----------------------------------------------------------------------


def test_state_refuses_a_placement_that_overlaps() -> None:
    state = FleetState([mig_gpu(0, held("3g.40gb", 4))])
    with pytest.raises(PlacementConflict):
        state.apply(Placement("n0", (0,), "stale", "2g.20gb", 4))


def test_state_release_frees_the_slot_for_the_next_request() -> None:
    state = FleetState([mig_gpu(0)])
    first = state.place(slice_request("7g.80gb"))
    assert isinstance(first, Placement)
    state.apply(first)
    assert isinstance(state.place(slice_request("1g.10gb")), NoFit)
    state.release(first, destroy_slice=True)
    assert isinstance(state.place(slice_request("1g.10gb")), Placement)


# -- the queue -----------------------------------------------------------------------------------


def test_drain_places_higher_priority_first() -> None:
    fleet = plain_node("a", 1, 0, 0)
    queue = [
        QueuedRequest("low", 0, 1.0, WholeRequest(H100, 1)),
        QueuedRequest("high", 5, 2.0, WholeRequest(H100, 1)),
    ]
    assert [rid for rid, _ in drain(queue, fleet, now=10.0)] == ["high"]


def test_drain_backfills_a_small_request_around_a_big_one() -> None:
    fleet = plain_node("a", 8, 4, 0)
    queue = [("big", 0, 1.0, WholeRequest(H100, 8)), ("small", 0, 2.0, WholeRequest(H100, 2))]
    assert [rid for rid, _ in drain(queue, fleet, now=10.0, starvation_seconds=600)] == ["small"]


def test_starving_request_stops_smaller_ones_being_backfilled_ahead_of_it() -> None:
    fleet = plain_node("a", 8, 4, 0)
    queue = [("big", 0, 1.0, WholeRequest(H100, 8)), ("small", 0, 2.0, WholeRequest(H100, 2))]
    assert drain(queue, fleet, now=1000.0, starvation_seconds=600) == []
    other_type = [*fleet, GpuView(99, "x", 0, "a100-80gb", False)]
    queue.append(("elsewhere", 0, 3.0, WholeRequest("a100-80gb", 1)))
    assert [rid for rid, _ in drain(queue, other_type, now=1000.0, starvation_seconds=600)] == ["elsewhere"]


def test_starving_request_that_could_never_fit_reserves_nothing() -> None:
    fleet = plain_node("a", 8, 4, 0)
    queue = [("huge", 0, 1.0, WholeRequest(H100, 16)), ("small", 0, 2.0, WholeRequest(H100, 2))]
    assert [rid for rid, _ in drain(queue, fleet, now=1000.0, starvation_seconds=600)] == ["small"]


def test_starving_low_priority_request_goes_before_a_fresh_high_priority_one() -> None:
    fleet = plain_node("a", 1, 0, 0)
    queue = [("old", 0, 1.0, WholeRequest(H100, 1)), ("urgent", 9, 999.0, WholeRequest(H100, 1))]
    assert [rid for rid, _ in drain(queue, fleet, now=1000.0, starvation_seconds=600)] == ["old"]


def test_drain_never_gives_two_requests_the_same_slot() -> None:
    queue = [(n, 0, float(n), slice_request("3g.40gb")) for n in range(3)]
    decisions = drain(queue, [mig_gpu(0)], now=5.0)
    assert sorted(p.start for _, p in decisions) == [0, 4]


# -- the benchmark's JSON mode -------------------------------------------------------------------

EXAMPLE = {
    "fleet": [{"node": "n0", "gpu_type": H100, "gpus": 8, "mig": True}],
    "events": [
        {"t": 0, "op": "place", "id": "r1", "gpu_type": H100, "count": 2},
        {"t": 1, "op": "place", "id": "r2", "gpu_type": H100, "mig_profile": "3g.40gb"},
        {"t": 2, "op": "release", "id": "r1"},
    ],
}


def run_bench(tmp_path: Path, workload: object | str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "workload.json"
    path.write_text(workload if isinstance(workload, str) else json.dumps(workload))
    return subprocess.run(
        [sys.executable, "bench/placement.py", "--workload", str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_bench_workload_mode_prints_one_json_line_of_decisions(tmp_path: Path) -> None:
    result = run_bench(tmp_path, EXAMPLE)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0]) == {
        "decisions": [
            {"id": "r1", "placed": True, "node": "n0", "gpus": [0, 1]},
            # 3g at slot 4 keeps slots 0-3 for a 4g.40gb; at slot 0 it would not.
            {"id": "r2", "placed": True, "node": "n0", "gpu": 2, "profile": "3g.40gb", "start": 4},
        ]
    }


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        ({"fleet": [{"node": "n0", "gpu_type": "h900", "gpus": 8}], "events": []}, "unknown gpu_type 'h900'"),
        (
            {
                **EXAMPLE,
                "events": [{"t": 0, "op": "place", "id": "x", "gpu_type": H100, "mig_profile": "5g.50gb"}],
            },
            "no MIG profile '5g.50gb'",
        ),
        ({**EXAMPLE, "events": [{"t": 0, "op": "release", "id": "ghost"}]}, "release of unknown id 'ghost'"),
        ('{"fleet": [', "is not valid JSON"),
    ],
)
def test_bench_workload_mode_rejects_bad_input_with_exit_code_2(
    tmp_path: Path, workload: object, message: str
) -> None:
    result = run_bench(tmp_path, workload)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
