"""Property tests: random request and release sequences never break the MIG geometry.

Every decision is checked by a small independent checker written here from geometry.py's table
(allowed starts, sizes, per-profile caps, one +me per GPU), which shares no code with the engine.
Fleets mix both MIG modes: "dynamic" GPUs are cut slice by slice, "layouts" GPUs change only by
a whole new layout, and only while nothing on them is held.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from portal.fleet.geometry import GPU_MODELS, MEMORY_SLOTS, ProfileShape
from portal.fleet.placement import (
    FleetState,
    GpuView,
    NoFit,
    Placement,
    SliceRequest,
    SliceView,
    WholeRequest,
    drain,
    place,
)

TYPES = ("h100-80gb", "a100-80gb")
POLICIES = ("per_gpu", "idle_node", "never")
MODES = ("dynamic", "layouts")


def profiles(gpu_type: str) -> tuple[ProfileShape, ...]:
    return GPU_MODELS[gpu_type].profiles


@dataclass
class Slot:
    """One MIG instance the checker knows about."""

    profile: str
    start: int
    size: int
    held: bool


@dataclass
class Gpu:
    view: GpuView
    whole: bool = False
    slices: dict[int, Slot] = field(default_factory=dict)


class Checker:
    """Independent ground truth: judges each decision against the geometry, then records it."""

    def __init__(self, gpus: list[GpuView]) -> None:
        self.gpus = {
            g.gpu_id: Gpu(
                g, g.whole_held, {s.start: Slot(s.profile, s.start, s.size, s.held) for s in g.slices}
            )
            for g in gpus
        }

    def node_has_held_slice(self, node: str) -> bool:
        return any(s.held for g in self.gpus.values() if g.view.node == node for s in g.slices.values())

    def may_change(self, gpu: Gpu) -> bool:
        view = gpu.view
        if not view.mig_enabled or view.reconfiguring or gpu.whole or view.mig_change_policy == "never":
            return False
        return not (view.mig_change_policy == "idle_node" and self.node_has_held_slice(view.node))

    def repartitionable(self, gpu: Gpu) -> bool:
        held = any(s.held for s in gpu.slices.values())
        return gpu.view.mig_mode == "layouts" and self.may_change(gpu) and not held

    def legal_new_slice(self, gpu: Gpu, shape: ProfileShape, start: int) -> bool:
        if gpu.view.mig_mode == "layouts" or not self.may_change(gpu):
            return False
        if start not in shape.starts or start + shape.size > MEMORY_SLOTS:
            return False
        wanted = set(range(start, start + shape.size))
        if any(wanted & set(range(s.start, s.start + s.size)) for s in gpu.slices.values() if s.held):
            return False
        # free slices in the way of a new one on a "dynamic" GPU are destroyed
        kept = [
            s for s in gpu.slices.values() if s.held or not wanted & set(range(s.start, s.start + s.size))
        ]
        if sum(1 for s in kept if s.profile == shape.name) >= shape.max_count:
            return False
        return not (shape.media and any(s.profile.endswith("+me") for s in kept))

    def reusable(self, gpu: Gpu, shape: ProfileShape, start: int) -> bool:
        existing = gpu.slices.get(start)
        view = gpu.view
        return (
            existing is not None
            and not existing.held
            and existing.profile == shape.name
            and (not view.reconfiguring or view.mig_mode == "layouts")
        )

    def free_whole(self, gpu: Gpu, gpu_type: str, whole_on_empty_mig: bool) -> bool:
        view = gpu.view
        return (
            view.gpu_type == gpu_type
            and not gpu.whole
            and not any(s.held for s in gpu.slices.values())
            and not view.reconfiguring
            and (whole_on_empty_mig or not view.mig_enabled)
        )

    def check(self, request, decision: Placement | NoFit, whole_on_empty_mig: bool) -> None:
        if isinstance(request, WholeRequest):
            self._check_whole(request, decision, whole_on_empty_mig)
        else:
            self._check_slice(request, decision)

    def _check_whole(
        self, request: WholeRequest, decision: Placement | NoFit, whole_on_empty_mig: bool
    ) -> None:
        free_by_node: dict[str, int] = {}
        for gpu in self.gpus.values():
            if self.free_whole(gpu, request.gpu_type, whole_on_empty_mig):
                free_by_node[gpu.view.node] = free_by_node.get(gpu.view.node, 0) + 1
        if isinstance(decision, NoFit):
            assert max(free_by_node.values(), default=0) < request.count, "NoFit although a node had room"
            return
        assert decision.profile is None and len(set(decision.gpu_ids)) == request.count
        for gpu_id in decision.gpu_ids:
            gpu = self.gpus[gpu_id]
            assert gpu.view.node == decision.node
            assert self.free_whole(gpu, request.gpu_type, whole_on_empty_mig), f"GPU {gpu_id} not free whole"
        for gpu_id in decision.gpu_ids:
            self.gpus[gpu_id].whole = True
            self.gpus[gpu_id].slices = {}  # a MIG GPU's free slices go with it

    def _check_slice(self, request: SliceRequest, decision: Placement | NoFit) -> None:
        shape = request.profile
        candidates = [g for g in self.gpus.values() if g.view.gpu_type == request.gpu_type]
        if isinstance(decision, NoFit):
            for gpu in candidates:
                for start in range(MEMORY_SLOTS):
                    assert not self.reusable(gpu, shape, start), "NoFit although a free slice existed"
                    assert not self.legal_new_slice(gpu, shape, start), "NoFit although a position was legal"
                assert not self.repartitionable(gpu), "NoFit although a layouts GPU held nothing"
            return
        gpu = self.gpus[decision.gpu_ids[0]]
        start = decision.start
        assert start is not None and decision.profile == shape.name and gpu.view.gpu_type == request.gpu_type
        if decision.layout is None and self.reusable(gpu, shape, start):
            gpu.slices[start].held = True
            return
        ignored = [g for g in candidates for s in range(MEMORY_SLOTS) if self.reusable(g, shape, s)]
        # A free slice on a GPU in use is never passed over. One on an idle GPU may be: a queued
        # request may re-partition an idle "layouts" GPU rather than lock its layout, and a
        # "dynamic" request cuts beside slices in use rather than start one more GPU.
        assert not any(any(s.held for s in g.slices.values()) for g in ignored), "free slice ignored"
        if ignored and decision.layout is None:
            assert any(s.held for s in gpu.slices.values()), "free slice ignored for an idle GPU"
        if decision.layout is not None:
            assert self.repartitionable(gpu), "re-partitioned a GPU that holds something or may not change"
            assert (shape.name, start) in decision.layout
            gpu.slices = {}
            for profile, at in decision.layout:
                cut = GPU_MODELS[gpu.view.gpu_type].profile(profile)
                assert cut is not None and self.legal_new_slice_on(gpu, cut, at), (
                    f"bad layout {decision.layout}"
                )
                gpu.slices[at] = Slot(profile, at, cut.size, at == start)
            return
        assert self.legal_new_slice(gpu, shape, start), f"illegal {shape.name} at {start}"
        wanted = set(range(start, start + shape.size))
        gpu.slices = {
            at: s
            for at, s in gpu.slices.items()
            if s.held or not wanted & set(range(s.start, s.start + s.size))
        }
        gpu.slices[start] = Slot(shape.name, start, shape.size, True)

    @staticmethod
    def legal_new_slice_on(gpu: Gpu, shape: ProfileShape, start: int) -> bool:
        """Geometry alone: whether `shape` fits at `start` beside the GPU's slices."""
        if start not in shape.starts or start + shape.size > MEMORY_SLOTS:
            return False
        wanted = set(range(start, start + shape.size))
        if any(wanted & set(range(s.start, s.start + s.size)) for s in gpu.slices.values()):
            return False
        if sum(1 for s in gpu.slices.values() if s.profile == shape.name) >= shape.max_count:
            return False
        return not (shape.media and any(s.profile.endswith("+me") for s in gpu.slices.values()))

    def release(self, decision: Placement, destroy: bool) -> None:
        for gpu_id in decision.gpu_ids:
            gpu = self.gpus[gpu_id]
            if decision.profile is None:
                gpu.whole = False
            elif destroy:
                del gpu.slices[decision.start]  # type: ignore[arg-type]
            else:
                gpu.slices[decision.start].held = False  # type: ignore[index]

    def assert_invariants(self) -> None:
        for gpu in self.gpus.values():
            taken: set[int] = set()
            for s in gpu.slices.values():
                slots = set(range(s.start, s.start + s.size))
                assert not taken & slots, "overlapping slices"
                taken |= slots
            assert not (gpu.whole and gpu.slices), "a GPU held whole carries slices"
            assert sum(1 for s in gpu.slices.values() if s.profile.endswith("+me")) <= 1


@st.composite
def fleets(draw) -> list[GpuView]:
    gpus: list[GpuView] = []
    for node_number in range(draw(st.integers(1, 3))):
        gpu_type = draw(st.sampled_from(TYPES))
        policy = draw(st.sampled_from(POLICIES))
        mode = draw(st.sampled_from(MODES))
        for index in range(draw(st.integers(1, 4))):
            mig = draw(st.booleans())
            slices: list[SliceView] = []
            if mig:
                for shape in draw(st.lists(st.sampled_from(profiles(gpu_type)), max_size=3)):
                    start = draw(st.sampled_from(shape.starts))
                    taken = {slot for s in slices for slot in range(s.start, s.start + s.size)}
                    if taken & set(range(start, start + shape.size)) or (
                        shape.media and any(s.media for s in slices)
                    ):
                        continue
                    slices.append(
                        SliceView(
                            len(gpus) * 10 + start,
                            shape.name,
                            start,
                            shape.size,
                            draw(st.booleans()),
                            shape.media,
                        )
                    )
            gpus.append(
                GpuView(
                    gpu_id=len(gpus), node=f"n{node_number}", index=index, gpu_type=gpu_type, mig_enabled=mig,
                    whole_held=not mig and draw(st.booleans()), slices=slices,
                    reconfiguring=draw(st.integers(0, 9)) == 0, mig_change_policy=policy, mig_mode=mode,
                )
            )  # fmt: skip
    return gpus


@st.composite
def requests(draw):
    gpu_type = draw(st.sampled_from(TYPES))
    if draw(st.booleans()):
        return WholeRequest(gpu_type, draw(st.sampled_from((1, 2, 3, 4))))
    return SliceRequest(gpu_type, draw(st.sampled_from(profiles(gpu_type))))


operations = st.lists(
    st.one_of(
        st.tuples(st.just("place"), requests()),
        st.tuples(st.just("release"), st.integers(0, 50), st.booleans()),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleet=fleets(), ops=operations, whole_on_empty_mig=st.booleans())
def test_random_sequences_never_break_the_geometry_or_double_book(fleet, ops, whole_on_empty_mig) -> None:
    state = FleetState(fleet)
    checker = Checker(fleet)
    live: list[Placement] = []
    for op in ops:
        if op[0] == "place":
            request = op[1]
            decision = state.place(request, whole_on_empty_mig=whole_on_empty_mig)
            checker.check(request, decision, whole_on_empty_mig)
            if isinstance(decision, Placement):
                state.apply(decision)
                live.append(decision)
        elif live:
            decision = live.pop(op[1] % len(live))
            destroy = op[2] and checker.gpus[decision.gpu_ids[0]].view.mig_mode == "dynamic"
            state.release(decision, destroy_slice=destroy)
            checker.release(decision, destroy)
        checker.assert_invariants()


@settings(max_examples=40, deadline=None)
@given(fleet=fleets(), ops=st.lists(requests(), max_size=12), whole_on_empty_mig=st.booleans())
def test_stateless_place_agrees_with_the_incremental_state(fleet, ops, whole_on_empty_mig) -> None:
    state = FleetState(fleet)
    for request in ops:
        decision = state.place(request, whole_on_empty_mig=whole_on_empty_mig)
        assert place(state.views(), request, whole_on_empty_mig=whole_on_empty_mig) == decision
        if isinstance(decision, Placement):
            state.apply(decision)


@settings(max_examples=40, deadline=None)
@given(
    fleet=fleets(),
    queue=st.lists(st.tuples(st.integers(0, 3), st.floats(0, 2000), requests()), max_size=12),
    now=st.floats(0, 4000),
)
def test_drain_never_double_books(fleet, queue, now) -> None:
    items = [(n, priority, queued_at, request) for n, (priority, queued_at, request) in enumerate(queue)]
    decisions = drain(items, fleet, now=now, starvation_seconds=1000)
    checker = Checker(fleet)
    by_id = {item[0]: item[3] for item in items}
    assert len({rid for rid, _ in decisions}) == len(decisions)
    for rid, decision in decisions:
        checker.check(by_id[rid], decision, whole_on_empty_mig=False)
        checker.assert_invariants()
