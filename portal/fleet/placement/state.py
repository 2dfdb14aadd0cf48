"""Incremental fleet state: the engine's indexes over a snapshot, with apply and release.

`place` answers from indexes that `apply` and `release` keep current, so a decision costs about
the same on 10 GPUs as on 1,000. The stateless `engine.place` builds one per call; the queue
drain and the benchmark keep one and apply their own decisions to it, so two requests never get
the same GPU or slot.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from portal.fleet.geometry import MEMORY_SLOTS, ProfileShape, gpu_model
from portal.fleet.placement.tables import (
    COMPUTE_WEIGHTS,
    MEDIA_BIT,
    Choice,
    choices,
    demand_weights,
    range_mask,
    shape_key,
)
from portal.fleet.placement.types import GpuView, NoFit, Placement, Request, SliceView, WholeRequest

POLICIES = frozenset({"per_gpu", "idle_node", "never"})
MODES = frozenset({"dynamic", "layouts"})


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
        "cut_key", "gpu_id", "gpu_type", "group", "held", "index", "layouts", "mask", "media", "mig",
        "mig_use", "node", "policy", "rank", "reconfiguring", "repartitionable", "slices", "whole_held",
    )  # fmt: skip

    def __init__(self, view: GpuView, rank: int, group: _Group) -> None:
        if view.mig_change_policy not in POLICIES:
            raise ValueError(f"GPU {view.gpu_id}: unknown mig_change_policy {view.mig_change_policy!r}")
        if view.mig_mode not in MODES:
            raise ValueError(f"GPU {view.gpu_id}: unknown mig_mode {view.mig_mode!r}")
        self.gpu_id, self.node, self.index, self.gpu_type = view.gpu_id, view.node, view.index, view.gpu_type
        self.mig, self.whole_held, self.reconfiguring = view.mig_enabled, view.whole_held, view.reconfiguring
        self.policy, self.rank, self.group = view.mig_change_policy, rank, group
        self.layouts = view.mig_mode == "layouts"
        self.slices: dict[int, _Slice] = {}
        self.mask = 0
        self.media = False
        self.held = 0  # slices held
        self.cut_key: int | None = None  # "dynamic": filed by layout where a new slice may be cut
        self.repartitionable = False  # "layouts": holds nothing and may take a new layout now
        self.mig_use: str | None = None  # a MIG GPU's use as counted by type: "slices", "whole" or None
        for s in view.slices:
            self.slices[s.start] = _Slice(s.slice_id, s.profile, s.size, s.held, s.media)
            self.mask |= range_mask(s.start, s.size)
            self.media = self.media or s.media
            self.held += s.held

    def held_key(self) -> int:
        """The state key of what it holds: held slices' slots, and MEDIA_BIT for a held +me. On a
        "dynamic" GPU that is what a new cut must fit beside: a free slice in the way goes."""
        key = 0
        for start, s in self.slices.items():
            if s.held:
                key |= range_mask(start, s.size) | (MEDIA_BIT if s.media else 0)
        return key

    def offers_free_slices(self) -> bool:
        """Whether its free slices may be taken: a "layouts" GPU's are being cut along with its
        new layout, so they are, even while it changes; a "dynamic" GPU's wait for the change."""
        return self.layouts or not self.reconfiguring

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
        self._repartition: dict[str, dict[int, None]] = defaultdict(dict)  # "layouts" GPUs, by type
        self._layouts_gpus: dict[str, int] = defaultdict(int)
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
            self._layouts_gpus[gpu.gpu_type] += gpu.mig and gpu.layouts
            for start, s in gpu.slices.items():
                self._held_on_node[gpu.node] += s.held
                if not s.held and gpu.offers_free_slices():
                    self._free[(gpu.gpu_type, s.profile)][(gpu.gpu_id, start)] = None
        for gpu in self._gpus.values():
            self._refresh(gpu)

    # -- deciding --------------------------------------------------------------------------------

    def place(
        self,
        request: Request,
        *,
        whole_on_empty_mig: bool = False,
        demand: Mapping[str, float] | None = None,
        reshape_idle: bool = False,
    ) -> Placement | NoFit:
        """Decide where `request` goes, without changing the state (see `apply`).

        `whole_on_empty_mig` lets a MIG-enabled GPU that holds nothing be handed out whole (the
        benchmark's workload mode); the portal keeps MIG GPUs for slices. `demand` weighs the
        profiles of the request's GPU type (recent requests, the queue): it shapes the layout
        a "layouts" GPU is re-partitioned into; without it the layout is all of the requested
        profile. `reshape_idle` lets a request that would take a free slice of an idle
        "layouts" GPU re-partition that GPU instead, where a layout shaped by `demand` offers
        clearly more of what is wanted: worth a layout change for requests that already wait
        in a queue, not for one that would start at once. It also marks `demand` as the queue
        itself, which a new layout covers as asked; without it demand is a forecast, and the
        layout weighs it per memory slot (see `_repartition_placement`).
        """
        if isinstance(request, WholeRequest):
            return self._place_whole(request, whole_on_empty_mig)
        return self._place_slice(request.gpu_type, request.profile, demand, reshape_idle)

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
        # MIG GPUs with no layout before those whose free slices would go.
        chosen += sorted(group.free_mig, key=lambda gpu_id: (self._gpus[gpu_id].mask != 0, rank(gpu_id)))[
            :mig_used
        ]
        chosen.sort(key=rank)
        return Placement(
            node=group.node,
            gpu_ids=tuple(chosen),
            reason=_whole_reason(request, group.node, room, key, runner_up, spare_mig),
        )

    def _weights(self, gpu_type: str, demand: Mapping[str, float] | None) -> tuple[int, ...]:
        """Room weights for cutting `gpu_type`: from demand where it is known, else by compute."""
        if not demand:
            return COMPUTE_WEIGHTS
        model = gpu_model(gpu_type)
        by_shape: dict[tuple[int, tuple[int, ...]], float] = defaultdict(float)
        for profile in model.profiles if model else ():
            by_shape[(profile.size, profile.starts)] += demand.get(profile.name, 0.0)
        return demand_weights(by_shape)

    def _rank(self, gpu_id: int) -> int:
        return self._gpus[gpu_id].rank

    def _known_shape(self, gpu_type: str, shape: ProfileShape) -> bool:
        """Whether `shape` is a profile of `gpu_type` (types unknown to the geometry pass)."""
        key = (gpu_type, shape.name)
        if key not in self._shapes:
            model = gpu_model(gpu_type)
            self._shapes[key] = shape if model is None else model.profile(shape.name)
        return self._shapes[key] == shape

    def _place_slice(
        self, gpu_type: str, shape: ProfileShape, demand: Mapping[str, float] | None, reshape_idle: bool
    ) -> Placement | NoFit:
        if not self._known_shape(gpu_type, shape):
            return NoFit(f"{gpu_type} offers no {shape.name} profile")
        free = self._free.get((gpu_type, shape.name))
        if free:
            # A free slice on a GPU already in use first: a GPU that holds nothing stays free to
            # be re-partitioned or handed out whole.
            gpu_id, start = min(
                free, key=lambda item: (not self._gpus[item[0]].held, self._gpus[item[0]].rank, item[1])
            )
            gpu = self._gpus[gpu_id]
            if not gpu.held and not gpu.layouts:
                # A free slice on an idle "dynamic" GPU only where no GPU in use can take the
                # slice: taking it would start one more GPU (and, on another node, break that
                # node's free block for whole requests) where a cut beside slices in use costs
                # nothing of the sort.
                beside = self._cut_beside_held(gpu_type, shape, demand)
                if beside is not None:
                    return beside
            if reshape_idle and not gpu.held and gpu.repartitionable and demand:
                # Taking a slice of an idle GPU fixes its layout for as long as the slice is held:
                # where a layout shaped by demand would offer clearly more of what is wanted,
                # re-partition it instead.
                better = self._repartition_placement(gpu, shape, demand, per_slot=False)
                assert better.layout is not None
                now = [(s.profile, at) for at, s in gpu.slices.items()]
                if _usefulness(better.layout, demand) >= _usefulness(now, demand) + 1:
                    return better
            return Placement(
                node=gpu.node,
                gpu_ids=(gpu_id,),
                profile=shape.name,
                start=start,
                slice_id=gpu.slices[start].slice_id,
                reason=f"reuses the free {shape.name} slice on {gpu.label()} at slot {start}",
            )
        if not self._mig_gpus.get(gpu_type):
            return NoFit(f"no MIG-enabled {gpu_type} GPU for a {shape.name} slice")
        buckets = self._cut.get(gpu_type)
        if buckets:
            index = _choice_index(shape, self._weights(gpu_type, demand))
            ranked = sorted((index[key] for key in buckets if key in index), key=lambda item: item[0])
            for _, choice in ranked:
                gpu = self._pick(buckets[choice.key], shape, choice)
                if gpu is not None:
                    return self._cut_placement(gpu, shape, choice)
        idle = self._repartition.get(gpu_type)
        if idle:
            wanted = demand or {shape.name: 1.0}
            # Where taking the GPU breaks no free block of 4 or 8 GPUs for whole requests, the GPU
            # whose free slices are least in demand goes, one with no layout before a cut one,
            # then on the node with the fewest GPUs left free for whole requests.
            gpu = min(
                (self._gpus[gpu_id] for gpu_id in idle),
                key=lambda g: (
                    _blocks(len(g.group.free_mig)) - _blocks(len(g.group.free_mig) - 1),
                    sum(wanted.get(s.profile, 0.0) for s in g.slices.values()),
                    g.mask != 0,
                    len(g.group.free_mig),
                    g.rank,
                ),
            )
            return self._repartition_placement(gpu, shape, wanted, per_slot=not reshape_idle)
        if self._layouts_gpus.get(gpu_type):
            return NoFit(
                f"no free {shape.name} slice on {gpu_type}; waiting for a {gpu_type} GPU with nothing"
                " on it to re-partition"
            )
        if not buckets:
            return NoFit(
                f"no free {shape.name} slice on {gpu_type}, and no {gpu_type} GPU may be cut now"
                " (MIG change policy, reconfiguration or all held)"
            )
        return NoFit(f"no {gpu_type} with a free {shape.name} position")

    def _cut_beside_held(
        self, gpu_type: str, shape: ProfileShape, demand: Mapping[str, float] | None
    ) -> Placement | None:
        """The best cut for `shape` on a "dynamic" GPU that already holds slices, if any."""
        buckets = self._cut.get(gpu_type)
        if not buckets:
            return None
        index = _choice_index(shape, self._weights(gpu_type, demand))
        ranked = sorted((index[key] for key in buckets if key and key in index), key=lambda item: item[0])
        for _, choice in ranked:
            gpu = self._pick(buckets[choice.key], shape, choice)
            if gpu is not None:
                return self._cut_placement(gpu, shape, choice)
        return None

    def _repartition_placement(
        self, gpu: _Gpu, shape: ProfileShape, demand: Mapping[str, float], *, per_slot: bool
    ) -> Placement:
        """Re-partition an idle "layouts" GPU into a whole layout and take one of its slices.

        The requested slice goes where it keeps the most room; then, while anything fits, the
        profile whose demand is least covered by the type's free slices (demand / (1 + free
        slices of it, counting this layout's)) goes at its best start. Profiles with no demand
        are not cut; slots nothing is wanted for stay uncut.

        `per_slot` divides that score by the profile's memory slots: for a request that starts
        at once, demand is the recent mix, a forecast, and a GPU keeps its layout for as long
        as any slice of it is held, so a large slice cut for the forecast can stay reserved
        for its profile while smaller requests that would fit in its slots are turned away.
        For queued requests the demand is the queue itself, and the layout covers it as asked.
        """
        start = _choice_index(shape)[0][1].start
        layout = [(shape.name, start)]
        key = range_mask(start, shape.size) | (MEDIA_BIT if shape.media else 0)
        counts = {shape.name: 1}
        added: dict[str, int] = {}
        model = gpu_model(gpu.gpu_type)
        profiles = [p for p in (model.profiles if model else (shape,)) if demand.get(p.name, 0) > 0]
        supply = {p.name: len(self._free.get((gpu.gpu_type, p.name), ())) for p in profiles}
        for s in gpu.slices.values():  # the GPU's own free slices go with its old layout
            if s.profile in supply:
                supply[s.profile] -= 1
        while True:
            best: tuple[float, int, ProfileShape, Choice] | None = None
            for number, profile in enumerate(profiles):
                found = _choice_index(profile).get(key)
                if found is None or counts.get(profile.name, 0) >= profile.max_count:
                    continue
                score = demand[profile.name] / (1 + supply[profile.name] + added.get(profile.name, 0))
                if per_slot:
                    score /= profile.size
                if best is None or (score, -number) > (best[0], -best[1]):
                    best = (score, number, profile, found[1])
            if best is None:
                break
            _, _, profile, choice = best
            layout.append((profile.name, choice.start))
            counts[profile.name] = counts.get(profile.name, 0) + 1
            added[profile.name] = added.get(profile.name, 0) + 1
            key |= range_mask(choice.start, profile.size) | (MEDIA_BIT if profile.media else 0)
        layout.sort(key=lambda item: item[1])
        cut = ", ".join(f"{name}@{at}" for name, at in layout)
        return Placement(
            node=gpu.node,
            gpu_ids=(gpu.gpu_id,),
            profile=shape.name,
            start=start,
            layout=tuple(layout),
            reason=f"no free {shape.name} slice; re-partitions idle {gpu.label()} into {cut}",
        )

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
                if gpu.whole_held or gpu.held or gpu.reconfiguring or gpu.node != placement.node:
                    raise PlacementConflict(f"{gpu.label()} cannot be handed out whole now")
            for gpu in gpus:
                self._clear_layout(gpu)  # free slices of a MIG GPU that holds nothing go
                gpu.whole_held = True
                self._refresh(gpu)
            return
        gpu, start = self._slice_target(placement, taking=True)
        if placement.layout is not None:
            if (placement.profile, start) not in placement.layout:
                raise PlacementConflict(
                    f"the new layout of {gpu.label()} has no {placement.profile} at slot {start}"
                )
            self._repartition_to(gpu, placement.layout)
        existing = gpu.slices.get(start)
        if existing is not None and not existing.held and existing.profile == placement.profile:
            existing.held = True
            self._free[(gpu.gpu_type, existing.profile)].pop((gpu.gpu_id, start), None)
        elif gpu.layouts:
            raise PlacementConflict(
                f"{gpu.label()} has no free {placement.profile} at slot {start}, and its slices are cut"
                " only by re-partitioning it whole"
            )
        else:
            shape = shape or self._shape_for(gpu, placement.profile)
            if shape.name != placement.profile:
                raise PlacementConflict(f"placement is for {placement.profile}, shape is {shape.name}")
            self._check_cut(gpu, shape, start)
            bits = range_mask(start, shape.size)
            for at, s in list(gpu.slices.items()):  # free slices in the way are destroyed
                if range_mask(at, s.size) & bits:
                    self._free[(gpu.gpu_type, s.profile)].pop((gpu.gpu_id, at), None)
                    del gpu.slices[at]
                    gpu.mask &= ~range_mask(at, s.size)
            gpu.media = any(s.media for s in gpu.slices.values())
            gpu.slices[start] = _Slice(None, shape.name, shape.size, True, shape.media)
            gpu.mask |= range_mask(start, shape.size)
            gpu.media = gpu.media or shape.media
        gpu.held += 1
        self._held_on_node[gpu.node] += 1
        if self._held_on_node[gpu.node] == 1:
            self._refresh_node(gpu.node)
        else:
            self._refresh(gpu)

    def release(self, placement: Placement, *, destroy_slice: bool = False) -> None:
        """End the hold `placement` recorded; a slice stays cut and free unless `destroy_slice`
        (on "dynamic" GPUs only: a "layouts" GPU's slices change only with its whole layout)."""
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
        if destroy_slice and gpu.layouts:
            raise PlacementConflict(
                f"{gpu.label()} keeps its layout: a slice of it cannot be destroyed alone"
            )
        existing.held = False
        gpu.held -= 1
        if destroy_slice:
            del gpu.slices[start]
            gpu.mask &= ~range_mask(start, existing.size)
            gpu.media = any(s.media for s in gpu.slices.values())
        elif gpu.offers_free_slices():
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
                mig_mode="layouts" if g.layouts else "dynamic",
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
        changing = gpu.reconfiguring and (placement.layout is not None or not gpu.offers_free_slices())
        if taking and (not gpu.mig or gpu.whole_held or changing or gpu.node != placement.node):
            raise PlacementConflict(f"{gpu.label()} cannot take a slice now")
        return gpu, placement.start

    def _clear_layout(self, gpu: _Gpu) -> None:
        """Drop the (free) slices of a GPU that holds nothing."""
        for start, s in gpu.slices.items():
            self._free[(gpu.gpu_type, s.profile)].pop((gpu.gpu_id, start), None)
        gpu.slices, gpu.mask, gpu.media = {}, 0, False

    def _repartition_to(self, gpu: _Gpu, layout: tuple[tuple[str, int], ...]) -> None:
        """Give an idle "layouts" GPU a new layout, every slice free; raises PlacementConflict
        when the GPU may not change now or the layout breaks the geometry."""
        if not gpu.layouts or not gpu.repartitionable:
            raise PlacementConflict(f"{gpu.label()} may not be re-partitioned now")
        slices: dict[int, _Slice] = {}
        mask, media, counts = 0, False, defaultdict(int)
        for profile, start in layout:
            shape = self._shape_for(gpu, profile)
            bits = range_mask(start, shape.size)
            counts[profile] += 1
            if start not in shape.starts or start + shape.size > MEMORY_SLOTS or bits & mask:
                raise PlacementConflict(f"layout puts {profile} at slot {start} on {gpu.label()}")
            if (shape.media and media) or counts[profile] > shape.max_count:
                raise PlacementConflict(f"layout has too many {profile} for {gpu.label()}")
            slices[start] = _Slice(None, profile, shape.size, False, shape.media)
            mask, media = mask | bits, media or shape.media
        self._clear_layout(gpu)
        gpu.slices, gpu.mask, gpu.media = slices, mask, media
        for start, s in slices.items():
            self._free[(gpu.gpu_type, s.profile)][(gpu.gpu_id, start)] = None

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
        held = gpu.held_key()
        if start not in shape.starts or start + shape.size > MEMORY_SLOTS or bits & held:
            raise PlacementConflict(f"{shape.name} does not fit at slot {start} on {gpu.label()}")
        kept = [s for at, s in gpu.slices.items() if s.held or not range_mask(at, s.size) & bits]
        if shape.media and any(s.media for s in kept):
            raise PlacementConflict(f"{gpu.label()} already has a media-extension slice")
        if sum(s.profile == shape.name for s in kept) >= shape.max_count:
            raise PlacementConflict(f"{gpu.label()} already has {shape.max_count} {shape.name}")

    def _refresh_node(self, node: str) -> None:
        for gpu in self._node_gpus[node]:
            self._refresh(gpu)

    def _refresh(self, gpu: _Gpu) -> None:
        """Re-file `gpu` in the cut buckets and the whole-GPU free sets after a change."""
        key = None
        may_cut = gpu.policy == "per_gpu" or (gpu.policy == "idle_node" and not self._held_on_node[gpu.node])
        may_cut = may_cut and gpu.mig and not gpu.reconfiguring and not gpu.whole_held
        if may_cut and not gpu.layouts:
            key = gpu.held_key()
        repartitionable = may_cut and gpu.layouts and not gpu.held
        if repartitionable != gpu.repartitionable:
            if repartitionable:
                self._repartition[gpu.gpu_type][gpu.gpu_id] = None
            else:
                self._repartition[gpu.gpu_type].pop(gpu.gpu_id, None)
            gpu.repartitionable = repartitionable
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
        if gpu.reconfiguring or gpu.whole_held or gpu.held:
            group.free_plain.pop(gpu.gpu_id, None)
            group.free_mig.pop(gpu.gpu_id, None)
        elif gpu.mig:
            group.free_mig[gpu.gpu_id] = None
        else:
            group.free_plain[gpu.gpu_id] = None


def _usefulness(layout, demand: Mapping[str, float]) -> float:
    """How much of what is wanted a layout offers: each slice counts its profile's demand,
    relative to the most wanted profile's."""
    top = max(demand.values(), default=0.0)
    if top <= 0:
        return 0.0
    return sum(demand.get(profile, 0.0) / top for profile, _ in layout)


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


_INDEXES: dict[tuple[int, tuple[int, ...], bool, tuple[int, ...]], dict[int, tuple[int, Choice]]] = {}


def _choice_index(
    shape: ProfileShape, weights: tuple[int, ...] = COMPUTE_WEIGHTS
) -> dict[int, tuple[int, Choice]]:
    """State key -> (preference order, choice) for a shape, built once per shape and weights."""
    key = (*shape_key(shape), weights)
    index = _INDEXES.get(key)
    if index is None:
        index = _INDEXES[key] = {c.key: (order, c) for order, c in enumerate(choices(*key))}
    return index


def _needs_count_check(shape: ProfileShape) -> bool:
    """Whether the per-profile cap is tighter than the slots (and the one-+me rule) already make it."""
    if shape.media:
        return shape.max_count < 1
    return shape.max_count < len(shape.starts)
