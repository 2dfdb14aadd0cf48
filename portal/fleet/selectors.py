"""Reads over the fleet: prices, snapshots for placement, the slice share rule, who holds what,
the fleet page's boards and the GPU type catalogue."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Prefetch, QuerySet
from django.utils import timezone

from portal.fleet.geometry import COMPUTE_SLICES, MEMORY_SLOTS, ProfileShape
from portal.fleet.models import (
    Allocation,
    Cluster,
    Gpu,
    GpuMinute,
    GpuType,
    MigSlice,
    Node,
    PriceBookEntry,
    StoragePrice,
)
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


# Persistent storage without a price in the book: a typical cloud block-storage list price.
DEFAULT_STORAGE_PRICE = Decimal("0.10")


def storage_price(at: datetime | None = None) -> Decimal:
    """Price of persistent storage per GB-month at `at`: the newest effective entry."""
    at = at or timezone.now()
    entry = StoragePrice.objects.filter(effective_from__lte=at).order_by("-effective_from").first()
    return entry.price_per_gb_month if entry else DEFAULT_STORAGE_PRICE


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
    """The GPUs (of one type, or all) as the placement engine sees them: three queries. A GPU the
    node agent reports lost or with critical XID errors is not offered until an admin clears it."""
    now = now or timezone.now()
    gpus = (
        Gpu.objects.select_related("node__cluster", "gpu_type")
        .filter(node__schedulable=True)
        .filter(health="ok")
    )
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
                # A node whose layout was set outside the portal lends its free slices, but its
                # layout is not the portal's to change until an admin takes it over.
                mig_change_policy=node.cluster.mig_change_policy if node.mig_managed else "never",
                mig_mode=node.cluster.effective_mig_mode,
            )
        )
    return views


RECENT_SLICE_HOLDS = 500


def recent_slice_demand() -> dict[str, dict[str, float]]:
    """The recent mix of MIG profiles per GPU type (slug -> profile -> count), from the last
    RECENT_SLICE_HOLDS slice holds: what a "layouts" GPU is re-partitioned for. One query."""
    demand: dict[str, dict[str, float]] = defaultdict(dict)
    recent = (
        Allocation.objects.exclude(mig_profile="")
        .order_by("-started_at")
        .values_list("gpu_type__slug", "mig_profile")[:RECENT_SLICE_HOLDS]
    )
    for slug, profile in recent:
        demand[slug][profile] = demand[slug].get(profile, 0.0) + 1.0
    return dict(demand)


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


@dataclass(frozen=True)
class ProfileOffer:
    shape: ProfileShape
    gpu_equivalents: Decimal
    price_per_hour: Decimal


@dataclass(frozen=True)
class GpuTypeOffer:
    gpu_type: GpuType
    price_per_hour: Decimal
    profiles: list[ProfileOffer]
    capacity: TypeCapacity


def gpu_type_catalog() -> list[GpuTypeOffer]:
    """Every GPU type with its price per GPU-hour, its MIG profiles and what is free now."""
    prices = current_prices()
    capacity = capacity_by_type()
    offers = []
    for gpu_type in GpuType.objects.order_by("slug"):
        price = prices.get(gpu_type.pk, Decimal(0))
        model = gpu_type.model
        profiles = []
        if model is not None and gpu_type.mig_capable:
            for shape in model.profiles:
                numerator, denominator = slice_share(shape)
                share = Decimal(numerator) / Decimal(denominator)
                profiles.append(
                    ProfileOffer(shape=shape, gpu_equivalents=share, price_per_hour=price * share)
                )
        offers.append(
            GpuTypeOffer(
                gpu_type=gpu_type,
                price_per_hour=price,
                profiles=profiles,
                capacity=capacity.get(gpu_type.pk, TypeCapacity(0, 0, 0, {})),
            )
        )
    return offers


@dataclass(frozen=True)
class Holder:
    """Who holds a GPU or slice: a sandbox and its owner; `ending` once billing stopped."""

    workload_id: int | None
    sandbox_name: str
    owner: str
    ending: bool
    url: str = ""  # the sandbox's or deployment's page


@dataclass(frozen=True)
class SliceCell:
    profile: str
    start: int
    size: int
    state: str
    holder: Holder | None
    created_at: datetime | None = None

    @property
    def column(self) -> int:
        return self.start + 1


@dataclass
class GpuBar:
    gpu: Gpu
    whole_holder: Holder | None = None
    slices: list[SliceCell] = field(default_factory=list)
    # The node agent's last complete minute of the whole GPU: utilization (None: no figure) and memory
    utilization: float | None = None
    memory_used_mb: int | None = None
    memory_total_mb: int | None = None
    recently_corrected: bool = False  # the records followed the node agent within the last day

    @property
    def slots(self) -> range:
        return range(1, MEMORY_SLOTS + 1)

    @property
    def free_slots(self) -> int:
        if not self.gpu.mig_enabled:
            return 0 if self.whole_holder else MEMORY_SLOTS
        return MEMORY_SLOTS - sum(cell.size for cell in self.slices)

    @property
    def layout_summary(self) -> str:
        """A MIG GPU's layout in words: slices held and free, and whether it is being changed."""
        if not self.slices:
            return "not cut"
        held = sum(1 for cell in self.slices if cell.holder)
        parts = [f"{held} held", f"{len(self.slices) - held} free"]
        if any(cell.state == MigSlice.State.CREATING for cell in self.slices):
            parts.append("re-partitioning")
        return " · ".join(parts)


@dataclass
class NodeBoard:
    node: Node
    gpus: list[GpuBar] = field(default_factory=list)

    @property
    def single_strategy(self) -> bool:
        """The device plugin runs the node on the single MIG strategy (the portal cannot take it)."""
        return (self.node.labels or {}).get("nvidia.com/mig.strategy") == "single"

    @property
    def mig_config(self) -> str:
        """The node's `nvidia.com/mig.config` label as discovery last read it."""
        return (self.node.labels or {}).get("nvidia.com/mig.config", "")

    @property
    def repartitioning_since(self) -> datetime | None:
        """When the oldest layout change still being applied on the node was asked for."""
        being_cut = [
            cell.created_at
            for bar in self.gpus
            for cell in bar.slices
            if cell.state == MigSlice.State.CREATING and cell.created_at
        ]
        return min(being_cut, default=None)

    @property
    def gpu_type_name(self) -> str:
        """From the node's GPUs, which come with their type (the node's own type is not fetched)."""
        return self.gpus[0].gpu.gpu_type.name if self.gpus else "no GPUs"


def _holder(allocation: Allocation) -> Holder:
    sandbox = allocation.workload
    return Holder(
        workload_id=sandbox.pk if sandbox else None,
        sandbox_name=sandbox.name if sandbox else "",
        owner=sandbox.owner.username if sandbox else "",
        ending=allocation.ended_at is not None,
        url=sandbox.get_absolute_url() if sandbox else "",
    )


def _last_minutes(now: datetime) -> dict[int, GpuMinute]:
    """Each whole GPU's last complete minute as the node agents read it (one query)."""
    minute = (now - timedelta(minutes=1)).replace(second=0, microsecond=0)
    return {row.gpu_id: row for row in GpuMinute.objects.filter(minute=minute, mig_start__isnull=True)}


def fleet_board(*, now: datetime | None = None) -> list[NodeBoard]:
    """Nodes in order, each GPU with its whole holder or its slices and its last minute of
    utilization: a fixed number of queries."""
    now = now or timezone.now()
    gpus = list(fleet_gpus())
    last = _last_minutes(now)
    boards: dict[int, NodeBoard] = {}
    for gpu in gpus:
        board = boards.setdefault(gpu.node_id, NodeBoard(node=gpu.node))
        bar = GpuBar(
            gpu=gpu, recently_corrected=bool(gpu.corrected_at and now - gpu.corrected_at < timedelta(days=1))
        )
        reading = last.get(gpu.pk)
        if reading is not None:
            bar.utilization = reading.utilization
            bar.memory_used_mb, bar.memory_total_mb = reading.memory_used_mb_max, reading.memory_total_mb
        whole = next((a for a in gpu.live_holds if not a.mig_profile), None)
        if whole is not None:
            bar.whole_holder = _holder(whole)
        for mig_slice in gpu.mig_slices.all():
            hold = mig_slice.live_holds[0] if mig_slice.live_holds else None
            bar.slices.append(
                SliceCell(
                    profile=mig_slice.profile,
                    start=mig_slice.start,
                    size=mig_slice.size,
                    state=mig_slice.state,
                    holder=_holder(hold) if hold else None,
                    created_at=mig_slice.created_at,
                )
            )
        board.gpus.append(bar)
    return list(boards.values())


@dataclass(frozen=True)
class TypeSummary:
    gpu_type: GpuType
    price_per_hour: Decimal
    gpus: int
    free_gpus: int
    mig_gpus: int
    free_slices: dict[str, int]


def fleet_capacity() -> list[TypeSummary]:
    """Per GPU type: how many GPUs, how many free whole, and how many GPUs could take each profile."""
    capacity = capacity_by_type()
    prices = current_prices()
    summaries = []
    for gpu_type in GpuType.objects.order_by("name"):
        cap = capacity.get(gpu_type.pk)
        if cap is None or cap.gpus == 0:
            continue
        summaries.append(
            TypeSummary(
                gpu_type=gpu_type,
                price_per_hour=prices.get(gpu_type.pk, Decimal(0)),
                gpus=cap.gpus,
                free_gpus=cap.free_gpus,
                mig_gpus=cap.mig_gpus,
                free_slices={name: n for name, n in cap.free_slices.items() if cap.mig_gpus},
            )
        )
    return summaries


@dataclass(frozen=True)
class ClusterRow:
    cluster: Cluster
    nodes: int
    unknown_nodes: list[Node]


def fleet_clusters() -> list[ClusterRow]:
    """Registered clusters with their node counts, last discovery, and GPU nodes whose product
    the portal does not know (flagged, never placed on): two queries."""
    unknown: dict[int, list[Node]] = {}
    counts: dict[int, int] = {}
    for node in Node.objects.order_by("name"):
        counts[node.cluster_id] = counts.get(node.cluster_id, 0) + 1
        if node.unknown_product:
            unknown.setdefault(node.cluster_id, []).append(node)
    return [
        ClusterRow(
            cluster=cluster, nodes=counts.get(cluster.pk, 0), unknown_nodes=unknown.get(cluster.pk, [])
        )
        for cluster in Cluster.objects.order_by("name")
    ]


def slice_share(shape: ProfileShape) -> tuple[int, int]:
    """A MIG slice's share of a GPU, as (numerator, denominator), by the configured rule."""
    if settings.PORTAL_MIG_SHARE_RULE == "memory":
        return shape.size, MEMORY_SLOTS
    return shape.compute_slices, COMPUTE_SLICES


def share_rule_text(shape: ProfileShape | None = None, *, per_replica: bool = False) -> str:
    """The configured slice share rule in words, as the request form states it; its example is
    the slice `shape` when one is chosen, else a 1g.10gb (`per_replica`: a deployment's)."""
    name, compute, slots = (shape.name, shape.compute_slices, shape.size) if shape else ("1g.10gb", 1, 1)
    if settings.PORTAL_MIG_SHARE_RULE == "memory":
        rule, example = f"its memory slots / {MEMORY_SLOTS}", f"a {name} is {slots}/{MEMORY_SLOTS}"
    else:
        rule, example = f"its compute slices / {COMPUTE_SLICES}", f"a {name} is {compute}/{COMPUTE_SLICES}"
    each = ", for every replica" if per_replica else ""
    return f"Quota is counted in GPU equivalents: a whole GPU is 1, a MIG slice {rule} ({example}){each}."


def gpu_type_slugs() -> QuerySet:
    """Every GPU type's slug, by slug, read when iterated (a list filter's choices)."""
    return GpuType.objects.order_by("slug").values_list("slug", flat=True)
