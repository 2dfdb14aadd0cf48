"""Catalog pages: the list with its filters, and a model's page with a live sizing table."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from portal.catalog.filters import CatalogFilter
from portal.catalog.forms import SizingForm
from portal.catalog.models import CatalogModel, Runtime
from portal.catalog.selectors import (
    SizingRequest,
    catalog_entries,
    catalog_entry,
    default_sizings,
    entry_sizing,
    fleet_offers,
    serve_command,
    sizing_request,
)
from portal.catalog.sizing import (
    GPU_MEMORY_UTILIZATION,
    OVERHEAD_FIXED_BYTES,
    OVERHEAD_WEIGHT_SHARE,
    Sizing,
    gigabytes,
)
from portal.core.errors import NotFound, ValidationFailed
from portal.core.views import login_required, page

PAGE_SIZE = 25


@dataclass(frozen=True)
class CatalogRow:
    entry: CatalogModel
    sizing: Sizing


@login_required
@require_GET
def catalog(request: HttpRequest) -> HttpResponse:
    """Every serveable model with its cheapest fit at the defaults; filters by runtime, task,
    text and "fits free capacity now"."""
    catalog_filter = CatalogFilter(request.GET, queryset=catalog_entries())
    page_obj = Paginator(catalog_filter.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    entries = list(page_obj.object_list)
    sizings = default_sizings(entries, catalog_filter.offers) if entries else {}
    context = {
        "filter": catalog_filter,
        "runtimes": Runtime.Slug.choices,
        "tasks": CatalogModel.Task.choices,
        "page_obj": page_obj,
        "rows": [CatalogRow(entry=entry, sizing=sizings[entry.pk]) for entry in entries],
    }
    return page(request, "catalog/catalog.html", context, fragment="catalog/partials/model_list.html")


@login_required
@require_GET
def catalog_model(request: HttpRequest, slug: str) -> HttpResponse:
    """A model's facts and its sizing; the sizing table alone answers htmx as the inputs change."""
    try:
        entry = catalog_entry(slug=slug)
    except NotFound as error:
        raise Http404(error.message) from error
    asked = any(name in request.GET for name in ("dtype", "context", "concurrency"))
    form = SizingForm(request.GET if asked else None, entry=entry)
    sizing_asked: SizingRequest | None = None
    if not asked:
        sizing_asked = sizing_request(entry)
    elif form.is_valid():
        try:
            sizing_asked = sizing_request(entry, **form.cleaned_data)
        except ValidationFailed as error:
            form.add_service_errors(error)
    sizing = entry_sizing(entry, sizing_asked, fleet_offers()) if sizing_asked else None
    context = {
        "entry": entry,
        "form": form,
        "asked": sizing_asked,
        "sizing": sizing,
        "fewest": sizing.fewest_gpus if sizing else None,
        "serve_command": serve_command(entry, sizing_asked, sizing) if sizing and sizing_asked else "",
        "utilization_percent": int(GPU_MEMORY_UTILIZATION * 100),
        "overhead_fixed_gb": gigabytes(OVERHEAD_FIXED_BYTES),
        "overhead_weight_percent": int(OVERHEAD_WEIGHT_SHARE * 100),
    }
    return page(request, "catalog/model.html", context, fragment="catalog/partials/sizing.html")
