"""MIG-aware best-fit placement over a fleet snapshot: whole GPUs on one node, or one MIG slice.

The rules, in the order they apply:

- A slice reuses an existing free slice of the exact profile first (no reconfiguration), on a GPU
  already in use before one that holds nothing; a free slice on an idle "dynamic" GPU only where
  no GPU in use can take the slice by a cut (taking it would start one more GPU).
- Otherwise, on a "dynamic" GPU, a new slice is cut where it costs the least future room: every
  (GPU, start) that the geometry allows is scored by how many more instances of each profile
  the GPU could still take (weighted by the recent demand for each, or by compute slices where
  demand is unknown), and a partly-cut GPU always goes before an empty one. Free slices in the
  way of the new one are destroyed.
- On a "layouts" GPU nothing is cut alone: a GPU that holds nothing is re-partitioned into a
  whole layout shaped by demand (the requested slice, then the profiles whose demand the free
  slices cover least; per memory slot for a request that starts at once, whose demand is a
  forecast), the GPU with the least-wanted free slices first. A GPU holding anything
  keeps its layout; released slices stay cut.
- Whole GPUs go to the node where they break the fewest free blocks of 4 and of 8 GPUs (room
  for the large requests), then leave the fewest free GPUs (best fit), then plain GPUs before
  empty MIG ones. Empty MIG GPUs, where they may go whole, count like plain ones unless slices
  hold more of the type's MIG GPUs than whole requests do; then they are kept for slices and
  used only where no node fits on plain GPUs.
- A GPU holding slices is never handed out whole; a GPU held whole takes no slices; nothing new
  goes on a reconfiguring GPU; the cluster's MIG change policy ("per_gpu", "idle_node",
  "never") decides whether a new slice may be cut at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from portal.fleet.placement.state import FleetState
from portal.fleet.placement.types import GpuView, NoFit, Placement, Request


def place(
    gpus: Sequence[GpuView],
    request: Request,
    *,
    whole_on_empty_mig: bool = False,
    demand: Mapping[str, float] | None = None,
) -> Placement | NoFit:
    """Where `request` goes on the fleet snapshot `gpus`, or why it cannot go anywhere now.

    `whole_on_empty_mig` lets a MIG-enabled GPU that holds nothing be handed out whole; the
    portal leaves it off and keeps MIG GPUs for slices. `demand` (profile -> weight, for the
    request's GPU type) shapes new layouts and where slices are cut (see FleetState.place).
    """
    # Other types' GPUs only matter where they share a node (the idle_node policy looks node-wide).
    nodes = {gpu.node for gpu in gpus if gpu.gpu_type == request.gpu_type}
    relevant = [gpu for gpu in gpus if gpu.node in nodes]
    return FleetState(relevant).place(request, whole_on_empty_mig=whole_on_empty_mig, demand=demand)
