"""Exact cases for the two MIG modes: "layouts" GPUs change only by a whole new layout while they
hold nothing; "dynamic" GPUs are cut slice by slice and free slices give way to a new cut."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from portal.fleet.placement import (
    FleetState,
    NoFit,
    Placement,
    PlacementConflict,
    QueuedRequest,
    WholeRequest,
    drain,
    first_fit,
)
from tests.fleet.test_placement import H100, held, mig_gpu, shape, slice_request

ROOT = Path(__file__).resolve().parents[2]


def layouts_gpu(gpu_id: int, *slices, **kwargs):
    return mig_gpu(gpu_id, *slices, mig_mode="layouts", **kwargs)


def test_an_empty_layouts_gpu_is_cut_whole_and_the_next_request_takes_a_free_slice() -> None:
    state = FleetState([layouts_gpu(0)])
    first = state.place(slice_request("1g.10gb"))
    assert isinstance(first, Placement) and first.layout is not None
    assert len(first.layout) == 7 and {p for p, _ in first.layout} == {"1g.10gb"}
    assert (first.profile, first.start) in first.layout
    state.apply(first)
    second = state.place(slice_request("1g.10gb"))
    assert isinstance(second, Placement)
    assert second.layout is None and second.gpu_ids == (0,) and second.start != first.start


def test_a_gpu_holding_a_slice_is_never_re_partitioned() -> None:
    gpu = layouts_gpu(0, held("1g.10gb", 0), held("3g.40gb", 4, is_held=False))
    decision = FleetState([gpu]).place(slice_request("2g.20gb"))
    assert isinstance(decision, NoFit)
    assert "waiting for a h100-80gb GPU with nothing on it to re-partition" in decision.reason


def test_the_layout_follows_demand() -> None:
    demand = {"3g.40gb": 1.0, "1g.10gb": 1.0}
    decision = FleetState([layouts_gpu(0)]).place(slice_request("3g.40gb"), demand=demand)
    assert isinstance(decision, Placement) and decision.layout is not None
    profiles = sorted(p for p, _ in decision.layout)
    assert profiles.count("3g.40gb") == 1 and "1g.10gb" in profiles
    # the layout is legal: no overlap
    slots = [slot for p, s in decision.layout for slot in range(s, s + shape(p).size)]
    assert len(slots) == len(set(slots))


def test_a_layout_for_a_request_that_starts_at_once_weighs_demand_per_memory_slot() -> None:
    # Demand is the recent mix, a forecast: a 4g.40gb cut for it would hold four slots for one
    # request. A queued request's layout covers the queue as asked.
    demand = {"1g.10gb": 1.0, "4g.40gb": 1.0}
    at_once = FleetState([layouts_gpu(0)]).place(slice_request("1g.10gb"), demand=demand)
    assert isinstance(at_once, Placement) and at_once.layout is not None
    assert [p for p, _ in at_once.layout] == ["1g.10gb"] * 7
    queued = FleetState([layouts_gpu(0)]).place(slice_request("1g.10gb"), demand=demand, reshape_idle=True)
    assert isinstance(queued, Placement) and queued.layout is not None
    assert sorted(p for p, _ in queued.layout) == ["1g.10gb"] * 3 + ["4g.40gb"]


def test_released_slices_stay_cut_and_cannot_be_destroyed_alone() -> None:
    state = FleetState([layouts_gpu(0)])
    decision = state.place(slice_request("3g.40gb"))
    assert isinstance(decision, Placement)
    state.apply(decision)
    with pytest.raises(PlacementConflict):
        state.release(decision, destroy_slice=True)
    state.release(decision)
    (view,) = state.views()
    assert [(s.profile, s.held) for s in view.slices] == [("3g.40gb", False), ("3g.40gb", False)]


def test_an_idle_gpu_with_a_layout_is_re_partitioned_when_no_free_slice_fits() -> None:
    gpu = layouts_gpu(0, held("3g.40gb", 0, is_held=False), held("3g.40gb", 4, is_held=False))
    decision = FleetState([gpu]).place(slice_request("1g.10gb"))
    assert isinstance(decision, Placement) and decision.layout is not None
    assert "re-partitions idle n0/0" in decision.reason


def test_an_uncut_gpu_is_re_partitioned_before_one_whose_layout_is_in_demand() -> None:
    cut = layouts_gpu(0, held("3g.40gb", 0, is_held=False), held("3g.40gb", 4, is_held=False))
    decision = FleetState([cut, layouts_gpu(1)]).place(
        slice_request("1g.10gb"), demand={"1g.10gb": 1.0, "3g.40gb": 1.0}
    )
    assert isinstance(decision, Placement) and decision.gpu_ids == (1,)


def test_a_free_slice_on_a_busy_gpu_is_taken_before_one_on_an_idle_gpu() -> None:
    idle = layouts_gpu(0, held("3g.40gb", 0, is_held=False))
    busy = layouts_gpu(1, held("3g.40gb", 0, is_held=False), held("3g.40gb", 4))
    decision = FleetState([idle, busy]).place(slice_request("3g.40gb"))
    assert isinstance(decision, Placement) and decision.gpu_ids == (1,) and decision.layout is None


def test_a_whole_request_takes_an_idle_layouts_gpu_and_its_free_slices_go() -> None:
    state = FleetState([layouts_gpu(0, held("3g.40gb", 0, is_held=False))])
    decision = state.place(WholeRequest(H100, 1), whole_on_empty_mig=True)
    assert isinstance(decision, Placement) and decision.gpu_ids == (0,)
    state.apply(decision)
    (view,) = state.views()
    assert view.whole_held and view.slices == []
    assert isinstance(state.place(slice_request("3g.40gb")), NoFit)


def test_free_slices_of_a_reconfiguring_layouts_gpu_may_be_taken_but_it_is_not_re_cut() -> None:
    gpu = layouts_gpu(0, held("1g.10gb", 0), held("1g.10gb", 1, is_held=False), reconfiguring=True)
    state = FleetState([gpu])
    decision = state.place(slice_request("1g.10gb"))
    assert isinstance(decision, Placement) and decision.start == 1
    assert isinstance(state.place(slice_request("7g.80gb")), NoFit)


def test_a_dynamic_cut_destroys_the_free_slices_in_its_way() -> None:
    gpu = mig_gpu(0, held("1g.10gb", 0), held("1g.10gb", 4, is_held=False), held("1g.10gb", 5, is_held=False))
    state = FleetState([gpu])
    decision = Placement("n0", (0,), "test", "3g.40gb", 4)
    state.apply(decision)
    (view,) = state.views()
    assert [(s.profile, s.start, s.held) for s in view.slices] == [("1g.10gb", 0, True), ("3g.40gb", 4, True)]


def test_first_fit_cuts_the_first_idle_layouts_gpu_into_the_requested_profile_only() -> None:
    busy = layouts_gpu(0, held("1g.10gb", 0))
    decision = first_fit([busy, layouts_gpu(1)], slice_request("2g.20gb"))
    assert isinstance(decision, Placement) and decision.gpu_ids == (1,)
    assert decision.layout == (("2g.20gb", 0), ("2g.20gb", 2), ("2g.20gb", 4))


def run_bench(tmp_path: Path, workload: object) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "workload.json"
    path.write_text(json.dumps(workload))
    return subprocess.run(
        [sys.executable, "bench/placement.py", "--workload", str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


LAYOUTS = {
    "mig_mode": "layouts",
    "fleet": [
        {
            "node": "n0", "gpu_type": H100, "gpus": 2, "mig": True,
            "layouts": {"0": [{"profile": "3g.40gb", "start": 0}, {"profile": "3g.40gb", "start": 4}]},
        }
    ],
    "events": [
        {"t": 0, "op": "place", "id": "a", "gpu_type": H100, "mig_profile": "3g.40gb"},
        {"t": 1, "op": "place", "id": "b", "gpu_type": H100, "mig_profile": "4g.40gb"},
        {"t": 2, "op": "place", "id": "c", "gpu_type": H100, "mig_profile": "1g.10gb"},
        {"t": 3, "op": "release", "id": "a"},
        {"t": 4, "op": "place", "id": "d", "gpu_type": H100, "mig_profile": "3g.40gb"},
    ],
}  # fmt: skip


def test_bench_layouts_mode_reports_each_re_partition_and_keeps_released_slices(tmp_path: Path) -> None:
    result = run_bench(tmp_path, LAYOUTS)
    assert result.returncode == 0, result.stderr
    a, b, c, d = json.loads(result.stdout)["decisions"]
    # a takes a slice of the layout that was there; b re-partitions the empty GPU 1 whole, and
    # the demand seen so far (3g, 4g) shapes the rest of its layout
    assert (a["gpu"], a["start"], a["layout"]) == (0, 0, None)
    assert b["gpu"] == 1
    assert b["layout"] == [{"profile": "4g.40gb", "start": 0}, {"profile": "3g.40gb", "start": 4}]
    # both GPUs hold a slice now, and neither has a free 1g: nothing may be re-partitioned
    assert c == {"id": "c", "placed": False, "reason": (
        "no free 1g.10gb slice on h100-80gb; waiting for a h100-80gb GPU with nothing on it to re-partition"
    )}  # fmt: skip
    # a's 3g stays cut after release; d takes a free 3g with no re-partition, on the busy GPU 1
    # first, so GPU 0 (holding nothing again) stays free to be re-partitioned
    assert (d["gpu"], d["profile"], d["start"], d["layout"]) == (1, "3g.40gb", 4, None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"mig_mode": "static"}, "'mig_mode' must be 'dynamic' or 'layouts'"),
        (
            {"fleet": [{"node": "n0", "gpu_type": H100, "gpus": 1, "mig": True,
                        "layouts": {"0": [{"profile": "3g.40gb", "start": 2}]}}]},
            "3g.40gb cannot start at slot 2",
        ),
        (
            {"fleet": [{"node": "n0", "gpu_type": H100, "gpus": 1, "mig": True, "layouts": {"3": []}}]},
            "not a GPU index below 1",
        ),
        (
            {"fleet": [{"node": "n0", "gpu_type": H100, "gpus": 1, "layouts": {"0": []}}]},
            "'layouts' given for a node without MIG",
        ),
    ],
)  # fmt: skip
def test_bench_rejects_bad_modes_and_layouts(tmp_path: Path, change: dict, message: str) -> None:
    result = run_bench(tmp_path, {**LAYOUTS, **change})
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_a_queued_request_re_partitions_an_idle_gpu_whose_layout_serves_the_queue_poorly() -> None:
    idle = layouts_gpu(
        0, held("3g.40gb", 0, is_held=False), *(held("1g.10gb", start, is_held=False) for start in (4, 5, 6))
    )
    demand = {"2g.20gb": 4.0, "3g.40gb": 1.0}  # nobody wants the 1g.10gb slices
    state = FleetState([idle])
    # A request that would start at once takes the free slice: no layout change to wait for.
    assert state.place(slice_request("3g.40gb"), demand=demand).layout is None
    # One that already waits in a queue, with 2g requests behind it, re-partitions instead.
    reshaped = state.place(slice_request("3g.40gb"), demand=demand, reshape_idle=True)
    assert isinstance(reshaped, Placement) and reshaped.layout is not None
    assert "2g.20gb" in {profile for profile, _ in reshaped.layout}


def test_the_drain_shapes_a_layout_for_the_requests_behind_the_one_it_places() -> None:
    queue = [
        QueuedRequest(1, 0, 1.0, slice_request("3g.40gb")),
        QueuedRequest(2, 0, 2.0, slice_request("1g.20gb")),
        QueuedRequest(3, 0, 3.0, slice_request("1g.20gb")),
    ]
    decisions = dict(drain(queue, [layouts_gpu(0)], now=10.0))
    first = decisions[1]
    assert first.layout is not None
    assert sorted(p for p, _ in first.layout) == ["1g.20gb", "1g.20gb", "3g.40gb"]
    assert decisions[2].layout is None and decisions[3].layout is None  # slices of that layout
