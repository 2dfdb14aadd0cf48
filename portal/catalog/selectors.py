"""Reads over the catalog: entries, their sizing against the fleet, and what fits free capacity now."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Count, QuerySet

from portal.catalog.models import CatalogModel
from portal.catalog.runtimes import UnsupportedChoice, container_command
from portal.catalog.sizing import GpuOffer, MigOffer, Sizing, size_model
from portal.core.errors import NotFound, ValidationFailed
from portal.core.selectors import every_word_in
from portal.fleet.models import Gpu, GpuType
from portal.fleet.selectors import TypeCapacity, capacity_by_type, current_prices, slice_share

DEFAULT_CONTEXT = 8192
DEFAULT_CONCURRENCY = 8
MAX_CONCURRENCY = 1024


@dataclass(frozen=True)
class SizingRequest:
    """A sizing question, with the entry's defaults filled in."""

    precision: str
    context: int
    concurrency: int


def catalog_entries() -> QuerySet[CatalogModel]:
    """Enabled catalog entries with their runtime, by name."""
    return CatalogModel.objects.filter(enabled=True).select_related("runtime").order_by("name")


def catalog_search(entries: QuerySet[CatalogModel], text: str) -> QuerySet[CatalogModel]:
    """Entries whose slug, name, source, description or tags hold each word of `text` (any case)."""
    return entries.filter(every_word_in(text, ("slug", "name", "source", "description", "tags")))


def catalog_entry(*, slug: str) -> CatalogModel:
    entry = catalog_entries().filter(slug=slug).first()
    if entry is None:
        raise NotFound(f"No catalog model {slug!r}.")
    return entry


def default_request(entry: CatalogModel) -> SizingRequest:
    """What the model page opens with: its default dtype, 8192 tokens (or its maximum), 8 sequences."""
    context = min(DEFAULT_CONTEXT, entry.max_context) if entry.max_context else DEFAULT_CONTEXT
    return SizingRequest(precision=entry.default_dtype, context=context, concurrency=DEFAULT_CONCURRENCY)


def sizing_request(
    entry: CatalogModel,
    *,
    dtype: str | None = None,
    context: int | None = None,
    concurrency: int | None = None,
) -> SizingRequest:
    """Fill in the entry's defaults and check the rest; every bad field is named at once."""
    defaults = default_request(entry)
    request = SizingRequest(
        precision=dtype or defaults.precision,
        context=defaults.context if context is None else context,
        concurrency=defaults.concurrency if concurrency is None else concurrency,
    )
    fields: dict[str, list[str]] = {}
    if request.precision not in entry.precisions:
        fields["dtype"] = [f"{entry.name} comes in {', '.join(entry.precisions)}, not {request.precision!r}."]
    if request.context < 1:
        fields["context"] = ["At least 1 token."]
    elif entry.max_context and request.context > entry.max_context:
        fields["context"] = [f"At most {entry.max_context:,} tokens for {entry.name}."]
    if not 1 <= request.concurrency <= MAX_CONCURRENCY:
        fields["concurrency"] = [f"From 1 to {MAX_CONCURRENCY} concurrent sequences."]
    if fields:
        first = next(iter(fields.values()))[0]
        raise ValidationFailed(f"Cannot size {entry.name}: {first}", fields=fields)
    return request


def fleet_offers() -> list[GpuOffer]:
    """Every GPU type present in the fleet, priced, with its whole-GPU limit per node and, where
    some of its GPUs are in MIG mode, its MIG profiles (media-extension twins left out).

    Four queries whatever the fleet's size: the whole-GPU limit is `max_gpus_per_node`'s rule (the
    most non-MIG GPUs of the type on one node), read for every type at once.
    """
    prices = current_prices()
    whole_per_node: dict[int, int] = defaultdict(int)
    mig_type_ids: set[int] = set()
    counts = Gpu.objects.order_by().values("gpu_type_id", "node_id", "mig_enabled").annotate(gpus=Count("pk"))
    for row in counts:
        if row["mig_enabled"]:
            mig_type_ids.add(row["gpu_type_id"])
        else:
            whole_per_node[row["gpu_type_id"]] = max(whole_per_node[row["gpu_type_id"]], row["gpus"])
    present = set(whole_per_node) | mig_type_ids
    offers = []
    for gpu_type in GpuType.objects.filter(pk__in=present).order_by("slug"):
        profiles: tuple[MigOffer, ...] = ()
        model = gpu_type.model
        if gpu_type.pk in mig_type_ids and gpu_type.mig_capable and model is not None:
            profiles = tuple(
                MigOffer(name=shape.name, memory_gb=shape.memory_gb, share=slice_share(shape))
                for shape in model.profiles
                if not shape.media
            )
        offers.append(
            GpuOffer(
                gpu_type=gpu_type.slug,
                memory_gb=gpu_type.memory_gb,
                price_per_hour=prices.get(gpu_type.pk, Decimal(0)),
                max_gpus_per_node=whole_per_node.get(gpu_type.pk, 0),
                mig_profiles=profiles,
            )
        )
    return offers


def entry_sizing(entry: CatalogModel, request: SizingRequest, offers: list[GpuOffer]) -> Sizing:
    """Size a checked request against fleet offers already read (no queries)."""
    return size_model(
        entry.shape(),
        precision=request.precision,
        context=request.context,
        concurrency=request.concurrency,
        offers=offers,
    )


def model_sizing(
    *, slug: str, dtype: str | None = None, context: int | None = None, concurrency: int | None = None
) -> Sizing:
    """Memory a catalog model needs for `concurrency` sequences of `context` tokens at `dtype`, and
    every GPU or MIG slice of the fleet that holds it, cheapest first."""
    entry = catalog_entry(slug=slug)
    request = sizing_request(entry, dtype=dtype, context=context, concurrency=concurrency)
    return entry_sizing(entry, request, fleet_offers())


def serve_command(entry: CatalogModel, request: SizingRequest, sizing: Sizing) -> str:
    """The runtime's command line for the cheapest fit, for people to read; "" when nothing fits."""
    if not sizing.fits:
        return ""
    choice = entry.serving_choice(
        precision=request.precision, tensor_parallel=sizing.fits[0].gpus, context=request.context
    )
    try:
        return " ".join(container_command(entry.runtime.spec(), choice))
    except UnsupportedChoice:
        return ""


def default_sizings(entries: Iterable[CatalogModel], offers: list[GpuOffer]) -> dict[int, Sizing]:
    """Each entry sized at its defaults, keyed by id (pure once the offers are read)."""
    return {entry.pk: entry_sizing(entry, default_request(entry), offers) for entry in entries}


def fits_free_capacity(sizing: Sizing, capacity: dict[str, TypeCapacity]) -> bool:
    """Whether one of the fits could be placed now: enough free whole GPUs of its type, or a GPU
    that could take one more slice of its profile. (Whole GPUs are counted over the type, not per
    node, as `capacity_by_type` reports them.)"""
    for fit in sizing.fits:
        free = capacity.get(fit.gpu_type)
        if free is None:
            continue
        if fit.mig_profile is None and free.free_gpus >= fit.gpus:
            return True
        if fit.mig_profile is not None and free.free_slices.get(fit.mig_profile, 0) > 0:
            return True
    return False


def capacity_by_slug() -> dict[str, TypeCapacity]:
    slugs = dict(GpuType.objects.values_list("pk", "slug"))
    return {slugs[pk]: capacity for pk, capacity in capacity_by_type().items() if pk in slugs}


def entries_fitting_free_capacity(
    entries: QuerySet[CatalogModel], *, offers: list[GpuOffer] | None = None
) -> QuerySet[CatalogModel]:
    """The entries that, at their default sizing, could be served on the fleet's free capacity now."""
    entries = entries.select_related("runtime")
    offers = fleet_offers() if offers is None else offers
    capacity = capacity_by_slug()
    fitting = [
        pk for pk, sizing in default_sizings(entries, offers).items() if fits_free_capacity(sizing, capacity)
    ]
    return entries.filter(pk__in=fitting)
