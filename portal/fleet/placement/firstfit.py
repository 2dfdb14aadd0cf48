"""Plain first-fit placement: the baseline the benchmark measures the best-fit engine against.

Same rules as the engine (geometry, one +me per GPU, reuse of free slices, MIG change policies,
reconfiguring GPUs skipped), but every choice is the first that works in (node, index, start)
order: the first node with enough free GPUs, the first GPU and lowest start where a slice fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from portal.fleet.geometry import fits
from portal.fleet.placement.types import GpuView, NoFit, Placement, Request, SliceRequest, WholeRequest


def first_fit(
    gpus: Sequence[GpuView], request: Request, *, whole_on_empty_mig: bool = False
) -> Placement | NoFit:
    """The first placement that works for `request`, scanning GPUs in (node, index) order."""
    ordered = sorted(gpus, key=attrgetter("node", "index"))
    if isinstance(request, WholeRequest):
        return _whole(ordered, request, whole_on_empty_mig)
    return _slice(ordered, request)


def _whole(gpus: list[GpuView], request: WholeRequest, whole_on_empty_mig: bool) -> Placement | NoFit:
    if request.count >= 1:
        node, free = "", []
        for gpu in gpus:  # in node order, so each node's GPUs come together
            if gpu.node != node:
                node, free = gpu.node, []
            if gpu.gpu_type != request.gpu_type or gpu.whole_held or gpu.reconfiguring or gpu.slices:
                continue
            if gpu.mig_enabled and not whole_on_empty_mig:
                continue
            free.append(gpu.gpu_id)
            if len(free) == request.count:
                return Placement(
                    node=node,
                    gpu_ids=tuple(free),
                    reason=f"first node with {request.count} free {request.gpu_type}",
                )
    return NoFit(f"no {request.gpu_type} node with {request.count} free GPUs")


def _slice(gpus: list[GpuView], request: SliceRequest) -> Placement | NoFit:
    shape = request.profile
    candidates = [g for g in gpus if g.gpu_type == request.gpu_type and g.mig_enabled and not g.reconfiguring]
    for gpu in candidates:
        for existing in gpu.slices:
            if existing.profile == shape.name and not existing.held:
                return Placement(
                    node=gpu.node,
                    gpu_ids=(gpu.gpu_id,),
                    profile=shape.name,
                    start=existing.start,
                    slice_id=existing.slice_id,
                    reason=f"first free {shape.name} slice, on {gpu.node}/{gpu.index}",
                )
    busy_nodes: set[str] | None = None
    for gpu in candidates:
        if gpu.whole_held or gpu.mig_change_policy == "never":
            continue
        if gpu.mig_change_policy == "idle_node":
            if busy_nodes is None:
                busy_nodes = {g.node for g in gpus if any(s.held for s in g.slices)}
            if gpu.node in busy_nodes:
                continue
        if sum(1 for s in gpu.slices if s.profile == shape.name) >= shape.max_count:
            continue
        if shape.media and any(s.media for s in gpu.slices):
            continue
        ranges = [(s.start, s.size) for s in gpu.slices]
        for start in shape.starts:
            if fits(ranges, shape, start):
                return Placement(
                    node=gpu.node,
                    gpu_ids=(gpu.gpu_id,),
                    profile=shape.name,
                    start=start,
                    reason=f"first fit: {shape.name} at slot {start} on {gpu.node}/{gpu.index}",
                )
    return NoFit(f"no {request.gpu_type} with a free {shape.name} position")
