"""Writes over the fleet: turning placement decisions into allocations, and ending them."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import transaction

from portal.fleet.geometry import COMPUTE_SLICES, MEMORY_SLOTS, ProfileShape
from portal.fleet.models import Allocation, Cluster, Gpu, GpuType, MigSlice
from portal.fleet.placement import NoFit, Placement, SliceRequest, WholeRequest, place
from portal.fleet.selectors import gpu_snapshot, price_per_hour


def slice_share(shape: ProfileShape) -> tuple[int, int]:
    """A MIG slice's share of a GPU, as (numerator, denominator), by the configured rule."""
    if settings.PORTAL_MIG_SHARE_RULE == "memory":
        return shape.size, MEMORY_SLOTS
    return shape.compute_slices, COMPUTE_SLICES


def placement_request(*, gpu_type: GpuType, count: int, mig_profile: str) -> WholeRequest | SliceRequest:
    if mig_profile:
        shape = gpu_type.model.profile(mig_profile) if gpu_type.model else None
        if shape is None:
            raise ValueError(f"{gpu_type.slug} offers no {mig_profile}")
        return SliceRequest(gpu_type.slug, shape)
    return WholeRequest(gpu_type.slug, count)


@transaction.atomic
def allocation_place(*, holder, now: datetime) -> Placement | NoFit:
    """Place `holder` (a sandbox) on the fleet and record its allocations.

    The GPU type row is locked so two placements of the same type never choose the same GPU.
    """
    gpu_type = GpuType.objects.select_for_update().get(pk=holder.gpu_type_id)
    request = placement_request(gpu_type=gpu_type, count=holder.gpu_count, mig_profile=holder.mig_profile)
    decision = place(gpu_snapshot(gpu_type=gpu_type, now=now), request)
    if isinstance(decision, NoFit):
        return decision
    price = price_per_hour(gpu_type=gpu_type, at=now)
    gpus = {g.pk: g for g in Gpu.objects.select_related("node__cluster").filter(pk__in=decision.gpu_ids)}
    common = {
        "sandbox": holder,
        "team_id": holder.team_id,
        "user_id": holder.owner_id,
        "gpu_type": gpu_type,
        "price_per_hour": price,
        "started_at": now,
    }
    if isinstance(request, SliceRequest):
        gpu = gpus[decision.gpu_ids[0]]
        if decision.slice_id is None:
            mig_slice = MigSlice.objects.create(
                gpu=gpu,
                profile=request.profile.name,
                start=decision.start,
                size=request.profile.size,
                compute_slices=request.profile.compute_slices,
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
    return decision


def allocations_end(*, holder, at: datetime) -> int:
    """Stop billing the holder's allocations at `at` (those still billing)."""
    return Allocation.objects.filter(sandbox=holder, ended_at__isnull=True).update(ended_at=at)


def allocations_release(*, holder, at: datetime) -> int:
    """Free the holder's GPUs and slices for others; also stops billing if it had not stopped."""
    allocations_end(holder=holder, at=at)
    return Allocation.objects.filter(sandbox=holder, released_at__isnull=True).update(released_at=at)


def default_cluster() -> Cluster:
    cluster = Cluster.objects.order_by("pk").first()
    if cluster is None:
        cluster = Cluster.objects.create(name="default", driver=settings.PORTAL_CLUSTER_DRIVER)
    return cluster
