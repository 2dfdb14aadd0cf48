"""Writes over the fleet: turning placement decisions into allocations, and ending them."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import F

from portal.accounts.models import Team, User
from portal.audit.services import audit_record
from portal.core.errors import Conflict, NotAllowed, NotFound
from portal.core.jobs import enqueue
from portal.fleet.models import Allocation, Cluster, Gpu, GpuType, MigSlice, Node, StorageHold, dynamic_mig_q
from portal.fleet.placement import NoFit, Placement, SliceRequest, WholeRequest, place
from portal.fleet.placement.queue import QueuedRequest, drain
from portal.fleet.selectors import (
    gpu_snapshot,
    price_per_hour,
    recent_slice_demand,
    slice_share,
    storage_price,
)

if TYPE_CHECKING:  # portal.workloads sits above the fleet: named in annotations only
    from portal.workloads.models import Workload

MIG_LAYOUT_TASK = "fleet.apply_mig_layout"


def placement_request(*, gpu_type: GpuType, count: int, mig_profile: str) -> WholeRequest | SliceRequest:
    if mig_profile:
        shape = gpu_type.model.profile(mig_profile) if gpu_type.model else None
        if shape is None:
            raise ValueError(f"{gpu_type.slug} offers no {mig_profile}")
        return SliceRequest(gpu_type.slug, shape)
    return WholeRequest(gpu_type.slug, count)


class _NoRoom(Exception):
    def __init__(self, decision: NoFit):
        self.decision = decision


@transaction.atomic
def allocation_place(*, holder: Workload, now: datetime) -> Placement | NoFit:
    """Place every replica of `holder` (a sandbox or deployment) and record its allocations, or
    none of them. Returns the first replica's placement.

    The GPU type row is locked so two placements of the same type never choose the same GPU.
    """
    gpu_type = GpuType.objects.select_for_update().get(pk=holder.gpu_type_id)
    request = placement_request(gpu_type=gpu_type, count=holder.gpu_count, mig_profile=holder.mig_profile)
    demand = _demand_with(recent_slice_demand().get(gpu_type.slug, {}), request)
    decisions: list[Placement] = []
    try:
        with transaction.atomic():
            for replica in range(holder.replicas):
                decision = place(gpu_snapshot(gpu_type=gpu_type, now=now), request, demand=demand)
                if isinstance(decision, NoFit):
                    raise _NoRoom(decision)
                allocation_record(
                    holder=holder,
                    gpu_type=gpu_type,
                    request=request,
                    decision=decision,
                    now=now,
                    replica=replica,
                )
                decisions.append(decision)
    except _NoRoom as no_room:
        if holder.replicas > 1:
            return NoFit(f"{no_room.decision.reason} (for all {holder.replicas} replicas)")
        return no_room.decision
    return decisions[0]


@transaction.atomic
def allocations_place_queued(
    *, holders: list[Workload], now: datetime, starvation_seconds: float
) -> dict[int, Placement]:
    """Place what fits of a queue (priority, arrival, no starvation; see placement.queue.drain).

    Every GPU type involved is locked first, in id order, so concurrent drains and requests
    never pick the same GPU.
    """
    holders = [h for h in holders if h.replicas == 1]  # several replicas: allocation_place, all or none
    type_ids = sorted({h.gpu_type_id for h in holders})
    gpu_types = {t.pk: t for t in GpuType.objects.select_for_update().filter(pk__in=type_ids).order_by("pk")}
    snapshot = gpu_snapshot(now=now)
    requests = {}
    queue = []
    for holder in holders:
        gpu_type = gpu_types[holder.gpu_type_id]
        try:
            request = placement_request(
                gpu_type=gpu_type, count=holder.gpu_count, mig_profile=holder.mig_profile
            )
        except ValueError:
            continue
        requests[holder.pk] = request
        queued_at = (holder.queued_at or now).timestamp()
        queue.append(QueuedRequest(holder.pk, holder.priority, queued_at, request))
    decisions = dict(
        drain(
            queue,
            snapshot,
            now=now.timestamp(),
            starvation_seconds=starvation_seconds,
            demand=recent_slice_demand(),
        )
    )
    by_id = {h.pk: h for h in holders}
    for holder_id, decision in decisions.items():
        holder = by_id[holder_id]
        allocation_record(
            holder=holder,
            gpu_type=gpu_types[holder.gpu_type_id],
            request=requests[holder_id],
            decision=decision,
            now=now,
        )
    return decisions


def _demand_with(recent: dict[str, float], request: WholeRequest | SliceRequest) -> dict[str, float]:
    """Recent demand for the type's profiles, with the request itself counted."""
    if not isinstance(request, SliceRequest):
        return recent
    name = request.profile.name
    return {**recent, name: recent.get(name, 0.0) + 1.0}


def allocation_record(
    *,
    holder: Workload,
    gpu_type: GpuType,
    request: WholeRequest | SliceRequest,
    decision: Placement,
    now: datetime,
    replica: int = 0,
) -> None:
    """Write a placement decision as allocations (and the new MIG slice it cuts, if any)."""
    price = price_per_hour(gpu_type=gpu_type, at=now)
    gpus = {g.pk: g for g in Gpu.objects.select_related("node__cluster").filter(pk__in=decision.gpu_ids)}
    common = {
        "workload": holder,
        "team_id": holder.team_id,
        "user_id": holder.owner_id,
        "gpu_type": gpu_type,
        "price_per_hour": price,
        "started_at": now,
        "replica": replica,
    }
    if isinstance(request, SliceRequest):
        gpu = gpus[decision.gpu_ids[0]]
        if decision.layout is not None:
            mig_slice = _mig_repartition(gpu=gpu, layout=decision.layout, start=decision.start)
        elif decision.slice_id is None and (free := _free_slice_at(gpu, request, decision.start)):
            mig_slice = free  # a free slice of a layout cut earlier in the same pass (no id yet)
        elif decision.slice_id is None:
            # A new GPU instance: it exists in the cluster only once the node's MIG layout is
            # applied, so it starts as "creating" and nothing else is cut on its GPU meanwhile.
            # Free slices in its way go (the engine cuts beside held slices only).
            mig_layout_changed(node_ids=[gpu.node_id])
            _free_slices_in_the_way(gpu=gpu, start=decision.start, size=request.profile.size).delete()
            mig_slice = MigSlice.objects.create(
                gpu=gpu,
                profile=request.profile.name,
                start=decision.start,
                size=request.profile.size,
                compute_slices=request.profile.compute_slices,
                state=MigSlice.State.CREATING,
            )
        else:
            mig_slice = MigSlice.objects.get(pk=decision.slice_id)
        numerator, denominator = slice_share(request.profile)
        Allocation.objects.create(
            gpu=gpu,
            mig_slice=mig_slice,
            mig_profile=request.profile.name,
            share_numerator=numerator,
            share_denominator=denominator,
            **common,
        )
    else:
        for gpu_id in decision.gpu_ids:
            Allocation.objects.create(gpu=gpus[gpu_id], **common)
    first = gpus[decision.gpu_ids[0]]
    holder.cluster = first.node.cluster
    holder.node_name = first.node.name
    holder.placement_reason = decision.reason[:300]


def _unheld_slices(gpu_id: int):
    """The slices of a GPU that no live hold names."""
    held = Allocation.objects.filter(released_at__isnull=True, mig_slice__isnull=False).values("mig_slice_id")
    return MigSlice.objects.filter(gpu_id=gpu_id).exclude(pk__in=held)


def _overlapping(slices, start: int, size: int) -> list[MigSlice]:
    return [s for s in slices if s.start < start + size and start < s.start + s.size]


def _free_slice_at(gpu: Gpu, request: SliceRequest, start: int | None) -> MigSlice | None:
    """The unheld slice of the requested profile at `start` on `gpu`, if the records have one."""
    return _unheld_slices(gpu.pk).filter(start=start, profile=request.profile.name).first()


def _free_slices_in_the_way(*, gpu: Gpu, start: int, size: int):
    """The slices of `gpu` that nobody holds and that overlap slots [start, start + size)."""
    return MigSlice.objects.filter(pk__in=[s.pk for s in _overlapping(_unheld_slices(gpu.pk), start, size)])


def _mig_repartition(*, gpu: Gpu, layout: tuple[tuple[str, int], ...], start: int | None) -> MigSlice:
    """Give a GPU that holds nothing a whole new layout (every slice "creating" until the node's
    layout is applied); returns the slice at `start`, for the request that asked for it."""
    if Allocation.objects.filter(gpu=gpu, released_at__isnull=True).exists():
        raise ValueError(f"{gpu} holds a slice: its layout cannot change")  # the engine never asks this
    mig_layout_changed(node_ids=[gpu.node_id])
    MigSlice.objects.filter(gpu=gpu).delete()
    model = gpu.gpu_type.model
    created = {}
    for profile, at in layout:
        shape = model.profile(profile) if model else None
        if shape is None:
            raise ValueError(f"{gpu.gpu_type.slug} offers no {profile}")
        created[at] = MigSlice.objects.create(
            gpu=gpu,
            profile=profile,
            start=at,
            size=shape.size,
            compute_slices=shape.compute_slices,
            state=MigSlice.State.CREATING,
        )
    return created[start]


def allocations_end(*, holder: Workload, at: datetime) -> int:
    """Stop billing the holder's allocations at `at` (those still billing)."""
    return Allocation.objects.filter(workload=holder, ended_at__isnull=True).update(ended_at=at)


def allocations_release(*, holder: Workload, at: datetime) -> list[int]:
    """Free the holder's GPUs and slices for others (billing stops too, if it had not).

    A MIG GPU left with no slice in use gets its layout freed: its free slices are deleted and
    the change is handed to the MIG job (see mig_layout_changed); returns those nodes' ids. The
    GPU type is locked as placement locks it, so a slice being freed is never one a concurrent
    placement has just taken.
    """
    GpuType.objects.select_for_update().filter(pk=holder.gpu_type_id).first()
    allocations_end(holder=holder, at=at)
    live = Allocation.objects.filter(workload=holder, released_at__isnull=True)
    released = list(live.values_list("gpu_id", flat=True))
    live.update(released_at=at)
    return mig_layouts_free(gpu_ids=released)


def mig_layouts_free(*, gpu_ids: list[int]) -> list[int]:
    """Delete the slices of "dynamic" MIG GPUs that no longer hold any; returns the nodes that
    changed. A "layouts" GPU keeps its layout: its released slices stay cut, free for the next
    request of their profile, until the GPU is re-partitioned. Callers hold the GPU type lock."""
    in_use = set(
        Allocation.objects.filter(gpu_id__in=gpu_ids, released_at__isnull=True).values_list(
            "gpu_id", flat=True
        )
    )
    empty = [gpu_id for gpu_id in set(gpu_ids) if gpu_id not in in_use]
    doomed = list(
        MigSlice.objects.filter(
            dynamic_mig_q("gpu__node__cluster"), gpu_id__in=empty, gpu__mig_enabled=True
        ).values_list("pk", "gpu__node_id")
    )
    changed = mig_layout_changed(node_ids=[node_id for _, node_id in doomed])
    MigSlice.objects.filter(pk__in=[pk for pk, _ in doomed]).delete()
    return changed


def mig_slices_abandon(*, node_id: int) -> list[int]:
    """After a failed layout change: drop the slices still being cut that nobody holds any more,
    so their GPUs stop counting as reconfiguring. On a "layouts" cluster a GPU that still holds
    one of its new slices keeps its whole new layout (it may not change while held); the last
    holder's requeue drops it. Returns the node when its layout changed."""
    creating = MigSlice.objects.filter(gpu__node_id=node_id, state=MigSlice.State.CREATING)
    live = Allocation.objects.filter(gpu__node_id=node_id, released_at__isnull=True)
    held = set(live.exclude(mig_slice=None).values_list("mig_slice_id", flat=True))
    layouts = not Node.objects.filter(dynamic_mig_q("cluster"), pk=node_id).exists()
    busy_gpus = set(live.values_list("gpu_id", flat=True)) if layouts else set()
    doomed = [
        pk
        for pk, gpu_id in creating.values_list("pk", "gpu_id")
        if pk not in held and gpu_id not in busy_gpus
    ]
    if not doomed:
        return []
    mig_layout_changed(node_ids=[node_id])
    MigSlice.objects.filter(pk__in=doomed).delete()
    return [node_id]


def mig_layout_changed(*, node_ids: list[int]) -> list[int]:
    """Record that these nodes' intended MIG layout changed, and ask a worker to apply it.

    The portal's one write to a node's MIG job: `mig_layout_wanted` moves past
    `mig_layout_applied`, which makes the node due for the periodic re-drive, so a lost message
    only delays the change. Called before the slices change, so the node row is always locked
    before its slices (the order the MIG reconciler takes them in too). Returns the sorted ids.
    """
    changed = sorted(set(node_ids))
    # Writers of one GPU type's nodes are kept apart by that type's row lock, which placements,
    # releases and discovery all take first; within one call the nodes go in id order.
    for node_id in changed:
        Node.objects.filter(pk=node_id).update(mig_layout_wanted=F("mig_layout_wanted") + 1)
        enqueue(MIG_LAYOUT_TASK, node_id)
    return changed


@transaction.atomic
def mig_layout_settled(*, node_id: int, version: int) -> bool:
    """The cluster reports layout `version` of the node applied: its slices being cut are ready.

    False, changing nothing, when the wanted layout has moved on since that version was read:
    the slices cut since are not in the cluster yet, and the next pass settles them.
    """
    node = Node.objects.select_for_update().filter(pk=node_id, mig_layout_wanted=version).first()
    if node is None:
        return False
    MigSlice.objects.filter(gpu__node_id=node_id, state=MigSlice.State.CREATING).update(
        state=MigSlice.State.READY
    )
    return True


@transaction.atomic
def mig_slices_observed(*, holder: Workload, starts: dict[int, int]) -> list[int]:
    """Where the cluster put the holder's slices (replica -> start slot), where it chooses the
    place itself (NVIDIA's DRA driver picks the placement on the pinned GPU): the records follow
    the cluster, so later placements see the GPU as it is. Free slices of the portal's records in
    the way are dropped. Returns the ids of the slices moved. Locks the GPU type as placement does.
    """
    if not starts:
        return []
    GpuType.objects.select_for_update().filter(pk=holder.gpu_type_id).first()
    moved = []
    held = Allocation.objects.filter(workload=holder, released_at__isnull=True, mig_slice__isnull=False)
    for allocation in held.select_related("mig_slice"):
        start = starts.get(allocation.replica)
        mig_slice = allocation.mig_slice
        if start is None or mig_slice is None or mig_slice.start == start:
            continue
        others = MigSlice.objects.filter(gpu_id=mig_slice.gpu_id).exclude(pk=mig_slice.pk)
        in_the_way = _overlapping(others, start, mig_slice.size)
        free = {s.pk for s in _unheld_slices(mig_slice.gpu_id)}
        if any(s.pk not in free for s in in_the_way):
            continue  # the records hold another slice there: leave them for the node agent to settle
        MigSlice.objects.filter(pk__in=[s.pk for s in in_the_way]).delete()
        MigSlice.objects.filter(pk=mig_slice.pk).update(start=start)
        moved.append(mig_slice.pk)
    return moved


def mig_layout_of(*, node_id: int) -> dict[int, list[tuple[str, int]]]:
    """The MIG layout the database intends for a node: GPU index -> [(profile, start)]."""
    layout: dict[int, list[tuple[str, int]]] = {
        index: []
        for index in Gpu.objects.filter(node_id=node_id, mig_enabled=True).values_list("index", flat=True)
    }
    for index, profile, start in MigSlice.objects.filter(gpu__node_id=node_id).values_list(
        "gpu__index", "profile", "start"
    ):
        layout.setdefault(index, []).append((profile, start))
    return {index: sorted(slices, key=lambda s: s[1]) for index, slices in layout.items()}


DISCOVER_TASK = "fleet.discover"


def fleet_discovery_request(*, user: User) -> list[Cluster]:
    """Ask the workers to discover the GPU nodes of every Kubernetes cluster now (admins)."""

    if not user.is_platform_admin:
        raise NotAllowed("Only platform admins may start node discovery.")
    clusters = list(Cluster.objects.filter(driver="kubernetes").order_by("name"))
    for cluster in clusters:
        enqueue(DISCOVER_TASK, cluster.pk)
        audit_record(actor=user, action="cluster.discovery_requested", obj=cluster)
    return clusters


# The device plugin's single strategy wants one profile on every MIG GPU of a node; the portal cuts
# slices per request, so it manages MIG only on nodes of the mixed strategy.
SINGLE_STRATEGY_REFUSAL = (
    "{node} runs the single MIG strategy, where every MIG device of the node must be one profile; "
    "the portal cuts slices per request and needs the mixed strategy. Switch the node to mixed first."
)


# The device plugin advertises MIG devices per node: where the node's GPUs carry different
# layouts, the portal cannot tell which GPU holds what, and a layout it writes for all GPUs could
# rewrite one in use.
MIXED_LAYOUT_REFUSAL = (
    "The MIG GPUs of {node} carry different layouts, and the cluster reports slices per node, not per "
    "GPU: the portal cannot tell which GPU holds what. Give the node one layout for all its GPUs (an "
    "all-* config of the MIG manager) and run discovery again, or leave it unmanaged."
)


@transaction.atomic
def fleet_node_take_over(*, user: User, node_id: int) -> Node:
    """Let the portal write the MIG layout of a node discovery found with a layout of its own.

    From then on the portal re-partitions the node's idle MIG GPUs as requests need, and every
    layout it writes lists all the node's GPUs: the ones it does not change keep the layout taken
    in at discovery. That is only safe where the records know each GPU's layout, so a node whose
    GPUs carry different layouts (the device plugin reports counts per node, not per GPU) is
    refused. Admins only; audited.
    """
    if not user.is_platform_admin:
        raise NotAllowed("Only platform admins may take over a node's MIG layout.")
    node = Node.objects.select_for_update().filter(pk=node_id).first()
    if node is None:
        raise NotFound(f"No node {node_id}.")
    if node.mig_managed:
        raise Conflict(f"The portal already manages the MIG layout of {node.name}.")
    if (node.labels or {}).get("nvidia.com/mig.strategy") == "single":
        raise Conflict(SINGLE_STRATEGY_REFUSAL.format(node=node.name))
    layouts: dict[int, list[str]] = {
        gpu_id: [] for gpu_id in Gpu.objects.filter(node=node, mig_enabled=True).values_list("pk", flat=True)
    }
    for gpu_id, profile in MigSlice.objects.filter(gpu__node=node).values_list("gpu_id", "profile"):
        layouts.setdefault(gpu_id, []).append(profile)
    if len({tuple(sorted(profiles)) for profiles in layouts.values()}) > 1:
        raise Conflict(MIXED_LAYOUT_REFUSAL.format(node=node.name))
    Node.objects.filter(pk=node.pk).update(mig_managed=True)
    node.mig_managed = True
    found = (node.labels or {}).get("nvidia.com/mig.config", "") or "unnamed"
    audit_record(
        actor=user,
        action="node.mig_taken_over",
        obj=node,
        detail=f"layout {found} set outside the portal; the portal may now re-partition its idle GPUs",
    )
    return node


def storage_hold_start(
    *, user: User, team: Team, key: str, what: str, size_gb: int, at: datetime
) -> StorageHold:
    """Start billing `size_gb` of persistent storage (`key` names it) to the user and team, at
    today's price."""
    return StorageHold.objects.create(
        user=user,
        team=team,
        key=key,
        what=what,
        size_gb=size_gb,
        price_per_gb_month=storage_price(at),
        started_at=at,
    )


def storage_hold_end(*, key: str, at: datetime) -> int:
    """Stop billing the open hold on `key` (a resize starts the next one)."""
    return StorageHold.objects.filter(key=key, ended_at__isnull=True).update(ended_at=at)
