"""Plain first-fit placement: the baseline the benchmark measures the best-fit engine against.

Same rules as the engine (geometry, one +me per GPU, reuse of free slices, MIG change policies,
reconfiguring GPUs skipped, MIG modes), but every choice is the first that works in (node, index,
start) order: the first node with enough free GPUs, the first GPU and lowest start where a slice
fits. On a "layouts" GPU, which is re-partitioned whole and only while it holds nothing, a slice
with no free one to take cuts the first such GPU into as many slices of the requested profile as
fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from portal.fleet.geometry import ProfileShape, fits
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
            held = any(s.held for s in gpu.slices)
            if gpu.gpu_type != request.gpu_type or gpu.whole_held or gpu.reconfiguring or held:
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
    candidates = [g for g in gpus if g.gpu_type == request.gpu_type and g.mig_enabled]
    for gpu in candidates:
        if gpu.reconfiguring and gpu.mig_mode != "layouts":
            continue
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
        if gpu.whole_held or gpu.reconfiguring or gpu.mig_change_policy == "never":
            continue
        if gpu.mig_change_policy == "idle_node":
            if busy_nodes is None:
                busy_nodes = {g.node for g in gpus if any(s.held for s in g.slices)}
            if gpu.node in busy_nodes:
                continue
        if gpu.mig_mode == "layouts":
            if any(s.held for s in gpu.slices):
                continue
            layout = _homogeneous(shape)
            return Placement(
                node=gpu.node,
                gpu_ids=(gpu.gpu_id,),
                profile=shape.name,
                start=layout[0][1],
                layout=layout,
                reason=f"first fit: cuts {gpu.node}/{gpu.index} into {len(layout)} x {shape.name}",
            )
        # A "dynamic" GPU's free slices give way to a new cut: only held ones are in the way.
        held = [s for s in gpu.slices if s.held]
        if sum(1 for s in held if s.profile == shape.name) >= shape.max_count:
            continue
        if shape.media and any(s.media for s in held):
            continue
        ranges = [(s.start, s.size) for s in held]
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


def _homogeneous(shape: ProfileShape) -> tuple[tuple[str, int], ...]:
    """As many slices of `shape` as fit on an empty GPU, lowest starts first."""
    layout: list[tuple[str, int]] = []
    for start in shape.starts:
        if len(layout) < (1 if shape.media else shape.max_count) and fits(
            [(at, shape.size) for _, at in layout], shape, start
        ):
            layout.append((shape.name, start))
    return tuple(layout)
