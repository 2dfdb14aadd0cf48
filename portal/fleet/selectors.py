"""Reads over the fleet: prices, snapshots for placement, and who holds what."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import Prefetch, QuerySet
from django.utils import timezone

from portal.fleet.models import Allocation, Gpu, GpuType, MigSlice, PriceBookEntry
from portal.fleet.placement import GpuView, NoFit, SliceRequest, SliceView, WholeRequest, place


def price_per_hour(*, gpu_type: GpuType, at: datetime | None = None) -> Decimal:
    """Price of one whole GPU-hour of this type at `at` (the newest effective price-book entry)."""
    at = at or timezone.now()
    entry = (
        PriceBookEntry.objects.filter(gpu_type=gpu_type, effective_from__lte=at)
        .order_by("-effective_from")
        .first()
    )
    if entry is not None:
        return entry.price_per_hour
    model = gpu_type.model
    return model.list_price_per_hour if model else Decimal("0")


def current_prices(at: datetime | None = None) -> dict[int, Decimal]:
    """Price per GPU-hour of every GPU type, keyed by type id, in one query."""
    at = at or timezone.now()
    prices: dict[int, Decimal] = {}
    for entry in PriceBookEntry.objects.filter(effective_from__lte=at).order_by(
        "gpu_type_id", "-effective_from"
    ):
        prices.setdefault(entry.gpu_type_id, entry.price_per_hour)
    for gpu_type in GpuType.objects.exclude(pk__in=prices.keys()):
        model = gpu_type.model
        prices[gpu_type.pk] = model.list_price_per_hour if model else Decimal("0")
    return prices


def live_allocations() -> QuerySet[Allocation]:
    return Allocation.objects.filter(released_at__isnull=True)


def gpu_snapshot(*, gpu_type: GpuType | None = None, now: datetime | None = None) -> list[GpuView]:
    """The GPUs (of one type, or all) as the placement engine sees them: three queries."""
    now = now or timezone.now()
    gpus = Gpu.objects.select_related("node__cluster", "gpu_type").filter(node__schedulable=True)
    if gpu_type is not None:
        gpus = gpus.filter(gpu_type=gpu_type)
    gpus = list(gpus)
    ids = [g.pk for g in gpus]
    holds = live_allocations().filter(gpu_id__in=ids).values_list("gpu_id", "mig_slice_id", "mig_profile")
    whole_held: set[int] = set()
    held_slices: set[int] = set()
    for gpu_id, slice_id, profile in holds:
        if profile:
            if slice_id:
                held_slices.add(slice_id)
        else:
            whole_held.add(gpu_id)
    slices: dict[int, list[SliceView]] = defaultdict(list)
    changing: set[int] = set()
    for mig_slice in MigSlice.objects.filter(gpu_id__in=ids):
        if mig_slice.state == MigSlice.State.CREATING:
            changing.add(mig_slice.gpu_id)
        slices[mig_slice.gpu_id].append(
            SliceView(
                slice_id=mig_slice.pk,
                profile=mig_slice.profile,
                start=mig_slice.start,
                size=mig_slice.size,
                held=mig_slice.pk in held_slices,
                media=mig_slice.profile.endswith("+me"),
            )
        )
    views = []
    for gpu in gpus:
        node = gpu.node
        reconfiguring = gpu.pk in changing  # a slice is being cut: its layout is changing
        views.append(
            GpuView(
                gpu_id=gpu.pk,
                node=node.name,
                index=gpu.index,
                gpu_type=gpu.gpu_type.slug,
                mig_enabled=gpu.mig_enabled,
                whole_held=gpu.pk in whole_held,
                slices=slices.get(gpu.pk, []),
                reconfiguring=reconfiguring,
                mig_change_policy=node.cluster.mig_change_policy,
            )
        )
    return views


@dataclass(frozen=True)
class TypeCapacity:
    gpus: int
    free_gpus: int
    mig_gpus: int
    # profile name -> how many GPUs could take one more slice of it right now
    free_slices: dict[str, int]


def capacity_by_type() -> dict[int, TypeCapacity]:
    """Free capacity now per GPU type, from one fleet snapshot."""
    snapshot = gpu_snapshot()
    types = {t.slug: t for t in GpuType.objects.all()}
    by_type: dict[str, list[GpuView]] = defaultdict(list)
    for view in snapshot:
        by_type[view.gpu_type].append(view)
    result: dict[int, TypeCapacity] = {}
    for slug, gpu_type in types.items():
        views = by_type.get(slug, [])
        free_slices: dict[str, int] = {}
        model = gpu_type.model
        mig_views = [v for v in views if v.mig_enabled]
        if model is not None:
            for shape in model.profiles:
                count = 0
                for view in mig_views:
                    if not isinstance(place([view], SliceRequest(slug, shape)), NoFit):
                        count += 1
                free_slices[shape.name] = count
        result[gpu_type.pk] = TypeCapacity(
            gpus=len(views),
            free_gpus=sum(1 for v in views if not v.mig_enabled and not v.whole_held),
            mig_gpus=len(mig_views),
            free_slices=free_slices,
        )
    return result


def capacity_free_now(*, gpu_type: GpuType, count: int, mig_profile: str) -> bool:
    """Whether a request of this shape would be placed immediately."""
    snapshot = gpu_snapshot(gpu_type=gpu_type)
    if mig_profile:
        shape = gpu_type.model.profile(mig_profile) if gpu_type.model else None
        if shape is None:
            return False
        request = SliceRequest(gpu_type.slug, shape)
    else:
        request = WholeRequest(gpu_type.slug, count)
    return not isinstance(place(snapshot, request), NoFit)


def max_gpus_per_node(*, gpu_type: GpuType) -> int:
    """The most whole (non-MIG) GPUs of this type one node holds: the cap on one request."""
    counts: dict[int, int] = defaultdict(int)
    for node_id in Gpu.objects.filter(gpu_type=gpu_type, mig_enabled=False).values_list("node_id", flat=True):
        counts[node_id] += 1
    return max(counts.values(), default=0)


def fleet_gpus() -> QuerySet[Gpu]:
    """Every GPU with its node, slices and live holds prefetched (fleet page and API)."""
    live = live_allocations().select_related("workload__owner")
    return (
        Gpu.objects.select_related("node__cluster", "node__gpu_type", "gpu_type")
        .prefetch_related(
            Prefetch(
                "mig_slices",
                queryset=MigSlice.objects.prefetch_related(
                    Prefetch("allocations", queryset=live, to_attr="live_holds")
                ),
            ),
            Prefetch("allocations", queryset=live, to_attr="live_holds"),
        )
        .order_by("node__cluster__name", "node__name", "index")
    )
