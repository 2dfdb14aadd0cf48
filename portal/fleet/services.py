"""Writes over the fleet: turning placement decisions into allocations, and ending them."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from portal.audit.services import audit_record
from portal.core.errors import NotAllowed
from portal.core.jobs import enqueue
from portal.fleet.models import Allocation, Cluster, Gpu, GpuType, MigSlice, Node
from portal.fleet.placement import NoFit, Placement, SliceRequest, WholeRequest, place
from portal.fleet.placement.queue import QueuedRequest, drain
from portal.fleet.selectors import gpu_snapshot, price_per_hour, slice_share


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
def allocation_place(*, holder, now: datetime) -> Placement | NoFit:
    """Place every replica of `holder` (a sandbox or deployment) and record its allocations, or
    none of them. Returns the first replica's placement.

    The GPU type row is locked so two placements of the same type never choose the same GPU.
    """
    gpu_type = GpuType.objects.select_for_update().get(pk=holder.gpu_type_id)
    request = placement_request(gpu_type=gpu_type, count=holder.gpu_count, mig_profile=holder.mig_profile)
    decisions: list[Placement] = []
    try:
        with transaction.atomic():
            for replica in range(holder.replicas):
                decision = place(gpu_snapshot(gpu_type=gpu_type, now=now), request)
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
    *, holders: list, now: datetime, starvation_seconds: float
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
    decisions = dict(drain(queue, snapshot, now=now.timestamp(), starvation_seconds=starvation_seconds))
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


def allocation_record(
    *,
    holder,
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
        if decision.slice_id is None:
            # A new GPU instance: it exists in the cluster only once the node's MIG layout is
            # applied, so it starts as "creating" and nothing else is cut on its GPU meanwhile.
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


def allocations_end(*, holder, at: datetime) -> int:
    """Stop billing the holder's allocations at `at` (those still billing)."""
    return Allocation.objects.filter(workload=holder, ended_at__isnull=True).update(ended_at=at)


def allocations_release(*, holder, at: datetime) -> list[int]:
    """Free the holder's GPUs and slices for others (billing stops too, if it had not).

    A MIG GPU left with no slice in use gets its layout freed: its free slices are deleted, and
    the ids of the nodes whose layout changed are returned so the caller can apply them. The
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
    """Delete the slices of MIG GPUs that no longer hold any; returns the nodes that changed.
    Callers hold the GPU type lock."""
    in_use = set(
        Allocation.objects.filter(gpu_id__in=gpu_ids, released_at__isnull=True).values_list(
            "gpu_id", flat=True
        )
    )
    empty = [gpu_id for gpu_id in set(gpu_ids) if gpu_id not in in_use]
    doomed = list(
        MigSlice.objects.filter(gpu_id__in=empty, gpu__mig_enabled=True).values_list("pk", "gpu__node_id")
    )
    MigSlice.objects.filter(pk__in=[pk for pk, _ in doomed]).delete()
    return sorted({node_id for _, node_id in doomed})


def mig_slices_abandon(*, node_id: int) -> list[int]:
    """After a failed layout change: drop the slices still being cut that nobody holds any more,
    so their GPUs stop counting as reconfiguring. Returns the node when its layout changed."""
    creating = MigSlice.objects.filter(gpu__node_id=node_id, state=MigSlice.State.CREATING)
    held = set(
        Allocation.objects.filter(mig_slice__in=creating, released_at__isnull=True).values_list(
            "mig_slice_id", flat=True
        )
    )
    doomed = [pk for pk in creating.values_list("pk", flat=True) if pk not in held]
    MigSlice.objects.filter(pk__in=doomed).delete()
    return [node_id] if doomed else []


def mig_layout_settled(*, node_id: int, succeeded: bool) -> int:
    """The node's MIG layout was applied (or failed): creating slices become ready, or go."""
    Node.objects.filter(pk=node_id).update(mig_config_state="success" if succeeded else "failed")
    creating = MigSlice.objects.filter(gpu__node_id=node_id, state=MigSlice.State.CREATING)
    if succeeded:
        return creating.update(state=MigSlice.State.READY)
    return 0


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


def fleet_discovery_request(*, user) -> list[Cluster]:
    """Ask the workers to discover the GPU nodes of every Kubernetes cluster now (admins)."""

    if not user.is_platform_admin:
        raise NotAllowed("Only platform admins may start node discovery.")
    clusters = list(Cluster.objects.filter(driver="kubernetes").order_by("name"))
    for cluster in clusters:
        enqueue(DISCOVER_TASK, cluster.pk)
        audit_record(actor=user, action="cluster.discovery_requested", obj=cluster)
    return clusters
