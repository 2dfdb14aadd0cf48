"""The catalog's FilterSet, shared by the catalog page and `GET /api/v1/catalog/models`."""

from __future__ import annotations

from functools import cached_property

import django_filters
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from portal.catalog.models import CatalogModel, Runtime
from portal.catalog.selectors import catalog_search, entries_fitting_free_capacity, fleet_offers
from portal.catalog.sizing import GpuOffer


class CatalogFilter(django_filters.FilterSet):
    runtime = django_filters.ChoiceFilter(field_name="runtime__slug", choices=Runtime.Slug.choices)
    task = django_filters.ChoiceFilter(choices=CatalogModel.Task.choices)
    q = django_filters.CharFilter(method="filter_q", label="Search")
    fits = django_filters.BooleanFilter(
        method="filter_fits", label="Fits free capacity now (at the model's default sizing)"
    )

    class Meta:
        model = CatalogModel
        fields = ["runtime", "task", "q", "fits"]

    @cached_property
    def offers(self) -> list[GpuOffer]:
        """The fleet as sizing sees it, read once: the list's views size their page with it too."""
        return fleet_offers()

    def filter_q(self, queryset: QuerySet[CatalogModel], name: str, value: str) -> QuerySet[CatalogModel]:
        return catalog_search(queryset, value)

    @extend_schema_field(OpenApiTypes.BOOL)
    def filter_fits(
        self, queryset: QuerySet[CatalogModel], name: str, value: bool | None
    ) -> QuerySet[CatalogModel]:
        if not value:
            return queryset
        return entries_fitting_free_capacity(queryset, offers=self.offers)
