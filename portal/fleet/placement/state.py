"""Incremental fleet state: the engine's indexes over a snapshot, with apply and release.

`place` answers from indexes that `apply` and `release` keep current, so a decision costs about
the same on 10 GPUs as on 1,000. The stateless `engine.place` builds one per call; the queue
drain and the benchmark keep one and apply their own decisions to it, so two requests never get
the same GPU or slot.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from portal.fleet.geometry import MEMORY_SLOTS, ProfileShape, gpu_model
from portal.fleet.placement.tables import MEDIA_BIT, Choice, choices, range_mask, shape_key
from portal.fleet.placement.types import GpuView, NoFit, Placement, Request, SliceView, WholeRequest

POLICIES = frozenset({"per_gpu", "idle_node", "never"})


class PlacementConflict(ValueError):
    """A placement that does not fit the state it is applied to (a stale or foreign decision)."""


class _Slice:
    """A MIG instance on a GPU in the working state."""

    __slots__ = ("held", "media", "profile", "size", "slice_id")

    def __init__(self, slice_id: int | None, profile: str, size: int, held: bool, media: bool) -> None:
        self.slice_id, self.profile, self.size, self.held, self.media = slice_id, profile, size, held, media


class _Group:
    """The GPUs of one type on one node that are free to hand out whole."""

    __slots__ = ("free_mig", "free_plain", "node", "rank")

    def __init__(self, node: str, rank: int) -> None:
        self.node, self.rank = node, rank
        self.free_plain: dict[int, None] = {}  # non-MIG GPUs, free
        self.free_mig: dict[int, None] = {}  # MIG GPUs with no slice at all, free


class _Gpu:
    """One GPU in the working state: its slices as an 8-bit slot mask, and where it is filed."""

    __slots__ = (
        "cut_key", "gpu_id", "gpu_type", "group", "index", "mask", "media", "mig", "mig_use", "node",
        "policy", "rank", "reconfiguring", "slices", "whole_held",
    )  # fmt: skip

    def __init__(self, view: GpuView, rank: int, group: _Group) -> None:
        if view.mig_change_policy not in POLICIES:
            raise ValueError(f"GPU {view.gpu_id}: unknown mig_change_policy {view.mig_change_policy!r}")
        self.gpu_id, self.node, self.index, self.gpu_type = view.gpu_id, view.node, view.index, view.gpu_type
        self.mig, self.whole_held, self.reconfiguring = view.mig_enabled, view.whole_held, view.reconfiguring
        self.policy, self.rank, self.group = view.mig_change_policy, rank, group
        self.slices: dict[int, _Slice] = {}
        self.mask = 0
        self.media = False
        self.cut_key: int | None = None
        self.mig_use: str | None = None  # a MIG GPU's use as counted by type: "slices", "whole" or None
        for s in view.slices:
            self.slices[s.start] = _Slice(s.slice_id, s.profile, s.size, s.held, s.media)
            self.mask |= range_mask(s.start, s.size)
            self.media = self.media or s.media

    def label(self) -> str:
        """How reasons name the GPU: node/index."""
        return f"{self.node}/{self.index}"


class FleetState:
    """A mutable, indexed copy of a fleet snapshot that the engine decides over."""

    def __init__(self, gpus: Iterable[GpuView]) -> None:
        self._gpus: dict[int, _Gpu] = {}
        self._node_gpus: dict[str, list[_Gpu]] = defaultdict(list)
        self._held_on_node: dict[str, int] = defaultdict(int)
        self._groups: dict[str, list[_Group]] = defaultdict(list)
        self._cut: dict[str, dict[int, dict[int, None]]] = defaultdict(dict)
        self._free: dict[tuple[str, str], dict[tuple[int, int], None]] = defaultdict(dict)
        self._mig_gpus: dict[str, int] = defaultdict(int)
        self._shapes: dict[tuple[str, str], ProfileShape | None] = {}
        # Per type and use ("slices", "whole"): how many MIG GPUs carry slices or are held whole.
        self._mig_use: dict[tuple[str, str], int] = defaultdict(int)
        groups: dict[tuple[str, str], _Group] = {}
        ordered = sorted(gpus, key=lambda v: (v.node, v.index, v.gpu_id))
        for rank, view in enumerate(ordered):
            if view.gpu_id in self._gpus:
                raise ValueError(f"GPU {view.gpu_id} appears twice in the snapshot")
            group = groups.get((view.node, view.gpu_type))
            if group is None:
                group = groups[(view.node, view.gpu_type)] = _Group(view.node, len(groups))
                self._groups[view.gpu_type].append(group)
            gpu = self._gpus[view.gpu_id] = _Gpu(view, rank, group)
            self._node_gpus[gpu.node].append(gpu)
            self._mig_gpus[gpu.gpu_type] += gpu.mig
            for start, s in gpu.slices.items():
                self._held_on_node[gpu.node] += s.held
                if not s.held and not gpu.reconfiguring:
                    self._free[(gpu.gpu_type, s.profile)][(gpu.gpu_id, start)] = None
        for gpu in self._gpus.values():
            self._refresh(gpu)

    # -- deciding --------------------------------------------------------------------------------

    def place(self, request: Request, *, whole_on_empty_mig: bool = False) -> Placement | NoFit:
        """Decide where `request` goes, without changing the state (see `apply`).

        `whole_on_empty_mig` lets a MIG-enabled GPU with no slices be handed out whole (the
        benchmark's workload mode); the portal keeps MIG GPUs for slices.
        """
        if isinstance(request, WholeRequest):
            return self._place_whole(request, whole_on_empty_mig)
        return self._place_slice(request.gpu_type, request.profile)

    def _place_whole(self, request: WholeRequest, whole_on_empty_mig: bool) -> Placement | NoFit:
        gpu_type, count = request.gpu_type, request.count
        if count < 1:
            return NoFit("a whole-GPU request needs at least one GPU")
        # Empty MIG GPUs (where they may go whole) are whole-GPU capacity like plain ones, unless
        # slices hold more of this type's MIG GPUs than whole requests do: then they are kept for
        # slices and taken only where no node fits on plain GPUs.
        spare_mig = whole_on_empty_mig and (
            self._mig_use[(gpu_type, "slices")] > self._mig_use[(gpu_type, "whole")]
        )
        best: tuple[tuple[bool, int, int, int, int], _Group, int] | None = None
        runner_up: tuple[bool, int, int, int, int] | None = None
        most = 0
        for group in self._groups.get(gpu_type, ()):
            plain = len(group.free_plain)
            free = plain + (len(group.free_mig) if whole_on_empty_mig else 0)
            most = max(most, free)
            if free < count:
                continue
            mig_used = max(0, count - plain)
            # The GPUs that count as free on this node, and how many of them the request leaves.
            room = plain if spare_mig and mig_used == 0 else free
            left = room - count
            # Break the fewest free blocks of 4 and of 8 GPUs, then leave the fewest free GPUs
            # (best fit), then plain GPUs before empty MIG ones, then node order.
            key = (spare_mig and mig_used > 0, _blocks(room) - _blocks(left), left, mig_used, group.rank)
            if best is None or key < best[0]:
                runner_up = best[0] if best else None
                best = (key, group, room)
            elif runner_up is None or key < runner_up:
                runner_up = key
        if best is None:
            plural = "" if count == 1 else "s"
            return NoFit(
                f"no {gpu_type} node with {count} free GPU{plural} (at most {most} free on one node)"
            )
        key, group, room = best
        _, _, left, mig_used, _ = key
        rank = self._rank
        chosen = sorted(group.free_plain, key=rank)[: count - mig_used]
        chosen += sorted(group.free_mig, key=rank)[:mig_used]
        chosen.sort(key=rank)
        return Placement(
            node=group.node,
            gpu_ids=tuple(chosen),
            reason=_whole_reason(request, group.node, room, key, runner_up, spare_mig),
        )

    def _rank(self, gpu_id: int) -> int:
        return self._gpus[gpu_id].rank

    def _known_shape(self, gpu_type: str, shape: ProfileShape) -> bool:
        """Whether `shape` is a profile of `gpu_type` (types unknown to the geometry pass)."""
        key = (gpu_type, shape.name)
        if key not in self._shapes:
            model = gpu_model(gpu_type)
            self._shapes[key] = shape if model is None else model.profile(shape.name)
        return self._shapes[key] == shape

    def _place_slice(self, gpu_type: str, shape: ProfileShape) -> Placement | NoFit:
        if not self._known_shape(gpu_type, shape):
            return NoFit(f"{gpu_type} offers no {shape.name} profile")
        free = self._free.get((gpu_type, shape.name))
        if free:
            gpu_id, start = min(free, key=lambda item: (self._gpus[item[0]].rank, item[1]))
            gpu = self._gpus[gpu_id]
            return Placement(
                node=gpu.node,
                gpu_ids=(gpu_id,),
                profile=shape.name,
                start=start,
                slice_id=gpu.slices[start].slice_id,
                reason=f"reuses the free {shape.name} slice on {gpu.label()} at slot {start}",
            )
        buckets = self._cut.get(gpu_type)
        if not self._mig_gpus.get(gpu_type):
            return NoFit(f"no MIG-enabled {gpu_type} GPU for a {shape.name} slice")
        if not buckets:
            return NoFit(
                f"no free {shape.name} slice on {gpu_type}, and no {gpu_type} GPU may be cut now"
                " (MIG change policy, reconfiguration or all held)"
            )
        index = _choice_index(shape)
        ranked = sorted((index[key] for key in buckets if key in index), key=lambda item: item[0])
        for _, choice in ranked:
            gpu = self._pick(buckets[choice.key], shape, choice)
            if gpu is not None:
                return self._cut_placement(gpu, shape, choice)
        return NoFit(f"no {gpu_type} with a free {shape.name} position")

    def _pick(self, bucket: dict[int, None], shape: ProfileShape, choice: Choice) -> _Gpu | None:
        """The GPU of a same-layout bucket to cut on; on an empty GPU, the node with fewest empties."""
        gpus = (self._gpus[gpu_id] for gpu_id in bucket)
        if _needs_count_check(shape):
            gpus = (
                g for g in gpus if sum(s.profile == shape.name for s in g.slices.values()) < shape.max_count
            )
        if choice.key == 0:
            return min(gpus, key=lambda g: (len(g.group.free_mig), g.rank), default=None)
        return min(gpus, key=lambda g: g.rank, default=None)

    def _cut_placement(self, gpu: _Gpu, shape: ProfileShape, choice: Choice) -> Placement:
        if choice.key == 0:
            reason = f"no partly-cut {gpu.gpu_type} had room; cuts empty {gpu.label()} at slot {choice.start}"
        elif choice.run_after:
            reason = f"best fit: leaves a {choice.run_after}-slot run free on {gpu.label()}"
        else:
            reason = f"best fit: fills {gpu.label()}"
        return Placement(
            node=gpu.node, gpu_ids=(gpu.gpu_id,), profile=shape.name, start=choice.start, reason=reason
        )

    # -- changing --------------------------------------------------------------------------------

    def apply(self, placement: Placement, shape: ProfileShape | None = None) -> None:
        """Record `placement` as held: whole GPUs, an existing free slice, or a new slice.

        A new slice's size comes from `shape`, or from the geometry by the GPU's type. Raises
        PlacementConflict when the placement does not fit the current state.
        """
        if placement.profile is None:
            gpus = [self._get(gpu_id) for gpu_id in placement.gpu_ids]
            if len(set(placement.gpu_ids)) != len(gpus):
                raise PlacementConflict(f"placement names a GPU twice: {placement.gpu_ids}")
            for gpu in gpus:
                if gpu.whole_held or gpu.slices or gpu.reconfiguring or gpu.node != placement.node:
                    raise PlacementConflict(f"{gpu.label()} cannot be handed out whole now")
            for gpu in gpus:
                gpu.whole_held = True
                self._refresh(gpu)
            return
        gpu, start = self._slice_target(placement, taking=True)
        existing = gpu.slices.get(start)
        if existing is not None and not existing.held and existing.profile == placement.profile:
            existing.held = True
            self._free[(gpu.gpu_type, existing.profile)].pop((gpu.gpu_id, start), None)
        else:
            shape = shape or self._shape_for(gpu, placement.profile)
            if shape.name != placement.profile:
                raise PlacementConflict(f"placement is for {placement.profile}, shape is {shape.name}")
            self._check_cut(gpu, shape, start)
            gpu.slices[start] = _Slice(None, shape.name, shape.size, True, shape.media)
            gpu.mask |= range_mask(start, shape.size)
            gpu.media = gpu.media or shape.media
        self._held_on_node[gpu.node] += 1
        if self._held_on_node[gpu.node] == 1:
            self._refresh_node(gpu.node)
        else:
            self._refresh(gpu)

    def release(self, placement: Placement, *, destroy_slice: bool = False) -> None:
        """End the hold `placement` recorded; a slice stays cut and free unless `destroy_slice`."""
        if placement.profile is None:
            for gpu_id in placement.gpu_ids:
                gpu = self._get(gpu_id)
                if not gpu.whole_held:
                    raise PlacementConflict(f"{gpu.label()} is not held whole")
                gpu.whole_held = False
                self._refresh(gpu)
            return
        gpu, start = self._slice_target(placement, taking=False)
        existing = gpu.slices.get(start)
        if existing is None or not existing.held or existing.profile != placement.profile:
            raise PlacementConflict(f"no held {placement.profile} at slot {start} on {gpu.label()}")
        existing.held = False
        if destroy_slice:
            del gpu.slices[start]
            gpu.mask &= ~range_mask(start, existing.size)
            gpu.media = any(s.media for s in gpu.slices.values())
        elif not gpu.reconfiguring:
            self._free[(gpu.gpu_type, existing.profile)][(gpu.gpu_id, start)] = None
        self._held_on_node[gpu.node] -= 1
        if self._held_on_node[gpu.node] == 0:
            self._refresh_node(gpu.node)
        else:
            self._refresh(gpu)

    def views(self) -> list[GpuView]:
        """The state as a plain snapshot, in (node, index) order."""
        return [
            GpuView(
                gpu_id=g.gpu_id, node=g.node, index=g.index, gpu_type=g.gpu_type, mig_enabled=g.mig,
                whole_held=g.whole_held, reconfiguring=g.reconfiguring, mig_change_policy=g.policy,
                slices=[
                    SliceView(s.slice_id, s.profile, start, s.size, s.held, s.media)
                    for start, s in sorted(g.slices.items())
                ],
            )
            for g in sorted(self._gpus.values(), key=lambda g: g.rank)
        ]  # fmt: skip

    # -- internals -------------------------------------------------------------------------------

    def _get(self, gpu_id: int) -> _Gpu:
        gpu = self._gpus.get(gpu_id)
        if gpu is None:
            raise PlacementConflict(f"GPU {gpu_id} is not in this fleet")
        return gpu

    def _slice_target(self, placement: Placement, *, taking: bool) -> tuple[_Gpu, int]:
        if len(placement.gpu_ids) != 1 or placement.start is None:
            raise PlacementConflict("a slice placement names one GPU and a start slot")
        gpu = self._get(placement.gpu_ids[0])
        if taking and (not gpu.mig or gpu.whole_held or gpu.reconfiguring or gpu.node != placement.node):
            raise PlacementConflict(f"{gpu.label()} cannot take a slice now")
        return gpu, placement.start

    def _shape_for(self, gpu: _Gpu, profile: str) -> ProfileShape:
        shape = self._shapes.get((gpu.gpu_type, profile))
        if shape is None:
            model = gpu_model(gpu.gpu_type)
            shape = model.profile(profile) if model else None
        if shape is None:
            raise PlacementConflict(f"{gpu.gpu_type} offers no {profile} profile")
        return shape

    def _check_cut(self, gpu: _Gpu, shape: ProfileShape, start: int) -> None:
        if gpu.cut_key is None:
            raise PlacementConflict(f"{gpu.label()} may not be cut now ({gpu.policy} policy)")
        bits = range_mask(start, shape.size)
        if start not in shape.starts or start + shape.size > MEMORY_SLOTS or bits & gpu.mask:
            raise PlacementConflict(f"{shape.name} does not fit at slot {start} on {gpu.label()}")
        if shape.media and gpu.media:
            raise PlacementConflict(f"{gpu.label()} already has a media-extension slice")
        if sum(s.profile == shape.name for s in gpu.slices.values()) >= shape.max_count:
            raise PlacementConflict(f"{gpu.label()} already has {shape.max_count} {shape.name}")

    def _refresh_node(self, node: str) -> None:
        for gpu in self._node_gpus[node]:
            self._refresh(gpu)

    def _refresh(self, gpu: _Gpu) -> None:
        """Re-file `gpu` in the cut buckets and the whole-GPU free sets after a change."""
        key = None
        may_cut = gpu.policy == "per_gpu" or (gpu.policy == "idle_node" and not self._held_on_node[gpu.node])
        if gpu.mig and not gpu.reconfiguring and not gpu.whole_held and may_cut:
            key = gpu.mask | (MEDIA_BIT if gpu.media else 0)
        if key != gpu.cut_key:
            buckets = self._cut[gpu.gpu_type]
            if gpu.cut_key is not None:
                bucket = buckets[gpu.cut_key]
                del bucket[gpu.gpu_id]
                if not bucket:
                    del buckets[gpu.cut_key]
            if key is not None:
                buckets.setdefault(key, {})[gpu.gpu_id] = None
            gpu.cut_key = key
        if gpu.mig:
            use = "slices" if gpu.slices else "whole" if gpu.whole_held else None
            if use != gpu.mig_use:
                if gpu.mig_use is not None:
                    self._mig_use[(gpu.gpu_type, gpu.mig_use)] -= 1
                if use is not None:
                    self._mig_use[(gpu.gpu_type, use)] += 1
                gpu.mig_use = use
        group = gpu.group
        if gpu.reconfiguring or gpu.whole_held or gpu.slices:
            group.free_plain.pop(gpu.gpu_id, None)
            group.free_mig.pop(gpu.gpu_id, None)
        elif gpu.mig:
            group.free_mig[gpu.gpu_id] = None
        else:
            group.free_plain[gpu.gpu_id] = None


def _blocks(free: int) -> int:
    """Whole-GPU room on a node with `free` GPUs free: how many 4-GPU plus 8-GPU requests it takes."""
    return free // 4 + free // 8


def _whole_reason(
    request: WholeRequest,
    node: str,
    room: int,
    key: tuple[bool, int, int, int, int],
    runner_up: tuple[bool, int, int, int, int] | None,
    spare_mig: bool,
) -> str:
    """The reason for a whole-GPU placement, naming the rule that set it apart from the next best."""
    _, lost, left, mig_used, _ = key
    gpu_type, count = request.gpu_type, request.count
    reason = f"best fit: {count} of {room} free {gpu_type} on {node}, leaves {left} free there"
    if runner_up is None:
        reason += "; the only node with room"
    elif key[0] != runner_up[0]:
        reason += "; keeps empty MIG GPUs for slices"
    elif lost != runner_up[1]:
        reason += "; breaks the fewest free blocks of 4 or 8 GPUs"
    elif left != runner_up[2]:
        reason += "; the tightest fit"
    elif mig_used != runner_up[3]:
        reason += "; plain GPUs before empty MIG ones"
    else:
        reason += "; first of equal fits in node order"
    if mig_used:
        why = "no node fits on plain GPUs" if spare_mig else "slices hold no more of them than whole requests"
        reason += f"; takes {mig_used} empty MIG GPU{'' if mig_used == 1 else 's'} ({why})"
    return reason


_INDEXES: dict[tuple[int, tuple[int, ...], bool], dict[int, tuple[int, Choice]]] = {}


def _choice_index(shape: ProfileShape) -> dict[int, tuple[int, Choice]]:
    """State key -> (preference order, choice) for a shape, built once per shape."""
    key = shape_key(shape)
    index = _INDEXES.get(key)
    if index is None:
        index = _INDEXES[key] = {c.key: (order, c) for order, c in enumerate(choices(*key))}
    return index


def _needs_count_check(shape: ProfileShape) -> bool:
    """Whether the per-profile cap is tighter than the slots (and the one-+me rule) already make it."""
    if shape.media:
        return shape.max_count < 1
    return shape.max_count < len(shape.starts)
