"""Catalog API views: parse, call one selector, return."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, permissions, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from portal.catalog.filters import CatalogFilter
from portal.catalog.models import CatalogModel
from portal.catalog.selectors import (
    catalog_entries,
    catalog_entry,
    default_sizings,
    entry_sizing,
    fleet_offers,
    serve_command,
    sizing_request,
)
from portal.catalog.serializers import CatalogModelSerializer, SizingQuerySerializer, SizingSerializer
from portal.core.api import StrictFilterBackend


class CatalogModelListView(generics.ListAPIView):
    """Serveable models with their runtime and their sizing at the defaults, by name.
    `fits=true` keeps those that could be served on the fleet's free capacity now."""

    queryset = CatalogModel.objects.none()
    permission_classes = [permissions.AllowAny]  # api.md: anyone
    serializer_class = CatalogModelSerializer
    filter_backends = [StrictFilterBackend]
    filterset_class = CatalogFilter

    def get_queryset(self) -> QuerySet[CatalogModel]:
        return catalog_entries()

    def list(self, request: Request, *args: object, **kwargs: object) -> Response:
        # The FilterSet by hand (as DjangoFilterBackend would) so its fleet read sizes the page too.
        catalog_filter = StrictFilterBackend().get_filterset(request, self.get_queryset(), self)
        if not catalog_filter.is_valid():
            raise serializers.ValidationError(catalog_filter.errors)
        page = self.paginate_queryset(catalog_filter.qs)
        context = {"request": request, "sizings": default_sizings(page, catalog_filter.offers)}
        return self.get_paginated_response(CatalogModelSerializer(page, many=True, context=context).data)


class CatalogModelDetailView(generics.GenericAPIView):
    """One catalog model (404 when there is none by that slug)."""

    queryset = CatalogModel.objects.none()
    permission_classes = [permissions.AllowAny]  # api.md: anyone
    serializer_class = CatalogModelSerializer
    lookup_field = "slug"

    def get(self, request: Request, slug: str) -> Response:
        entry = catalog_entry(slug=slug)
        context = {"request": request, "sizings": default_sizings([entry], fleet_offers())}
        return Response(CatalogModelSerializer(entry, context=context).data)


class CatalogModelSizingView(generics.GenericAPIView):
    """GPU memory the model needs at a dtype, context and concurrency, and every GPU type or MIG
    slice of the fleet that holds it, cheapest first, with the price per hour."""

    queryset = CatalogModel.objects.none()
    permission_classes = [permissions.AllowAny]  # api.md: anyone
    serializer_class = SizingSerializer
    lookup_field = "slug"

    @extend_schema(
        parameters=[SizingQuerySerializer],
        responses={
            200: SizingSerializer,
            400: OpenApiResponse(
                description="A dtype the model lacks, or a context or concurrency out of range."
            ),
            404: OpenApiResponse(description="No catalog model by that slug."),
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        query = SizingQuerySerializer(data=request.query_params)
        if not query.is_valid():
            raise serializers.ValidationError(query.errors)
        entry = catalog_entry(slug=slug)
        asked = sizing_request(entry, **query.validated_data)
        sizing = entry_sizing(entry, asked, fleet_offers())
        command = serve_command(entry, asked, sizing)
        return Response(SizingSerializer(sizing, context={"serve_command": command}).data)
