"""An independent checker of placement decisions, written from the geometry table alone.

It keeps its own record of who holds which GPU and memory slot, shares no code with the engine,
and raises InvalidPlacement on any decision that breaks the geometry or double-books a GPU. In
"layouts" mode a GPU changes only by a whole new layout, while it holds nothing; a slice is
otherwise one of its free slices, and goes back to them on release.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from portal.fleet.geometry import MEMORY_SLOTS, gpu_model
from portal.fleet.placement import Placement, Request, WholeRequest


class InvalidPlacement(AssertionError):
    """The engine made a decision the geometry or the holdings forbid."""


@dataclass
class _CheckedGpu:
    node: str
    index: int
    gpu_type: str
    mig: bool
    layouts: bool = False
    whole_owner: str | None = None
    slot_owner: list[str | None] = field(default_factory=lambda: [None] * MEMORY_SLOTS)
    slices: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # owner -> (profile, start, size)
    free: dict[int, tuple[str, int]] = field(default_factory=dict)  # start -> (profile, size), cut, unheld


class Checker:
    """Ground truth for the benchmark: validates each decision, then records it.

    `gpus` are (gpu_id, node, index, gpu_type, mig) with optionally the MIG mode ("dynamic" or
    "layouts") and the free slices the GPU starts with as (profile, start) pairs.
    """

    def __init__(self, gpus: list[tuple]) -> None:
        self.gpus: dict[int, _CheckedGpu] = {}
        for gpu_id, node, index, gpu_type, mig, *rest in gpus:
            gpu = self.gpus[gpu_id] = _CheckedGpu(
                node, index, gpu_type, mig, bool(rest) and rest[0] == "layouts"
            )
            if len(rest) > 1 and rest[1]:
                gpu.free = self._legal_layout(gpu, list(rest[1]), f"GPU {gpu_id}'s starting layout")
        self.holds: dict[str, Placement] = {}
        self.busy = 0  # GPUs holding anything, kept current for cheap sampling

    def place(self, owner: str, request: Request, placement: Placement, *, whole_on_empty_mig: bool) -> None:
        if owner in self.holds:
            raise InvalidPlacement(f"{owner} placed twice")
        if isinstance(request, WholeRequest):
            self._check_whole(request, placement, whole_on_empty_mig)
            for gpu_id in placement.gpu_ids:
                self.gpus[gpu_id].whole_owner = owner
                self.gpus[gpu_id].free = {}  # a MIG GPU's free slices go with it
            self.busy += len(placement.gpu_ids)
        else:
            profile, start, size = self._check_slice(request.gpu_type, request.profile.name, placement)
            gpu = self.gpus[placement.gpu_ids[0]]
            self.busy += not gpu.slices
            gpu.free.pop(start, None)
            for slot in range(start, start + size):
                gpu.slot_owner[slot] = owner
            gpu.slices[owner] = (profile, start, size)
        self.holds[owner] = placement

    def release(self, owner: str) -> None:
        placement = self.holds.pop(owner)
        for gpu_id in placement.gpu_ids:
            gpu = self.gpus[gpu_id]
            if placement.profile is None:
                gpu.whole_owner = None
                self.busy -= 1
            else:
                profile, start, size = gpu.slices.pop(owner)
                for slot in range(start, start + size):
                    gpu.slot_owner[slot] = None
                if gpu.layouts:  # released slices stay cut
                    gpu.free[start] = (profile, size)
                self.busy -= not gpu.slices

    def _check_whole(self, request: WholeRequest, placement: Placement, whole_on_empty_mig: bool) -> None:
        ids = placement.gpu_ids
        if placement.profile is not None or len(ids) != request.count or len(set(ids)) != len(ids):
            raise InvalidPlacement(f"whole request for {request.count} got {placement}")
        for gpu_id in ids:
            gpu = self.gpus.get(gpu_id)
            if gpu is None or gpu.gpu_type != request.gpu_type or gpu.node != placement.node:
                raise InvalidPlacement(f"GPU {gpu_id} is not a {request.gpu_type} on {placement.node}")
            if gpu.whole_owner is not None or gpu.slices:
                raise InvalidPlacement(f"GPU {gpu_id} is already in use")
            if gpu.mig and not whole_on_empty_mig:
                raise InvalidPlacement(f"MIG GPU {gpu_id} handed out whole")

    def _check_slice(self, gpu_type: str, profile: str, placement: Placement) -> tuple[str, int, int]:
        model = gpu_model(gpu_type)
        shape = model.profile(profile) if model else None
        if shape is None or placement.profile != profile or len(placement.gpu_ids) != 1:
            raise InvalidPlacement(f"slice request {profile} got {placement}")
        gpu = self.gpus.get(placement.gpu_ids[0])
        start = placement.start
        if gpu is None or gpu.gpu_type != gpu_type or gpu.node != placement.node or not gpu.mig:
            raise InvalidPlacement(f"{placement} is not on a MIG {gpu_type}")
        if gpu.whole_owner is not None:
            raise InvalidPlacement(f"slice on GPU {placement.gpu_ids[0]}, which is held whole")
        if start is None or start not in shape.starts or start + shape.size > MEMORY_SLOTS:
            raise InvalidPlacement(f"{profile} may not start at slot {start}")
        if placement.layout is not None:
            if not gpu.layouts:
                raise InvalidPlacement(f"{placement} re-partitions a GPU that is cut slice by slice")
            if gpu.slices:
                raise InvalidPlacement(f"{placement} re-partitions a GPU that holds slices")
            if (profile, start) not in placement.layout:
                raise InvalidPlacement(f"{placement} takes a slice outside its new layout")
            gpu.free = self._legal_layout(gpu, list(placement.layout), f"{placement}")
            return profile, start, shape.size
        if gpu.free.get(start, (None,))[0] == profile:
            return profile, start, shape.size  # an existing free slice
        if gpu.layouts:
            raise InvalidPlacement(f"{placement} cuts a slice on a GPU that changes only by its whole layout")
        if any(start < s + size and s < start + shape.size for _, s, size in gpu.slices.values()):
            raise InvalidPlacement(f"{profile} at {start} overlaps a held slice")
        # On a "dynamic" GPU free slices in the way of a new one are destroyed.
        gpu.free = {
            s: (p, size) for s, (p, size) in gpu.free.items() if s + size <= start or s >= start + shape.size
        }
        names = [p for p, _, _ in gpu.slices.values()] + [p for p, _ in gpu.free.values()]
        if names.count(profile) >= shape.max_count:
            raise InvalidPlacement(f"more than {shape.max_count} {profile} on one GPU")
        if shape.media and any(p.endswith("+me") for p in names):
            raise InvalidPlacement("a second +me slice on one GPU")
        return profile, start, shape.size

    @staticmethod
    def _legal_layout(
        gpu: _CheckedGpu, layout: list[tuple[str, int]], where: str
    ) -> dict[int, tuple[str, int]]:
        """A whole layout, checked against the geometry: start -> (profile, size)."""
        model = gpu_model(gpu.gpu_type)
        taken: set[int] = set()
        result: dict[int, tuple[str, int]] = {}
        names: list[str] = []
        for profile, start in layout:
            shape = model.profile(profile) if model else None
            if shape is None or start not in shape.starts or start + shape.size > MEMORY_SLOTS:
                raise InvalidPlacement(f"{where}: {profile} may not start at slot {start}")
            slots = set(range(start, start + shape.size))
            if slots & taken:
                raise InvalidPlacement(f"{where}: {profile} at {start} overlaps")
            taken |= slots
            names.append(profile)
            if names.count(profile) > shape.max_count:
                raise InvalidPlacement(f"{where}: more than {shape.max_count} {profile}")
            if shape.media and sum(p.endswith("+me") for p in names) > 1:
                raise InvalidPlacement(f"{where}: a second +me slice")
            result[start] = (profile, shape.size)
        return result
