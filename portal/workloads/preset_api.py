"""Preset API views: list, save and delete saved request forms."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from portal.core.errors import ValidationFailed
from portal.core.serializers import PAGING, refuse_other_parameters, validated
from portal.workloads.models import Preset, WorkloadKind
from portal.workloads.presets import preset_delete, preset_save, presets_visible_to
from portal.workloads.serializers import PresetCreateSerializer, PresetSerializer


class PresetListView(generics.GenericAPIView):
    """Your presets and your teams' (a team's are saved by its leads). POST saves one: its `body`
    is checked as a request of its `kind` (without the name); the same name replaces it."""

    serializer_class = PresetSerializer
    queryset = Preset.objects.none()  # for the schema; get() reads what the user may see

    @extend_schema(
        parameters=[
            OpenApiParameter("kind", str, enum=WorkloadKind.values, description="Only presets of this kind.")
        ],
        responses={200: PresetSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        refuse_other_parameters(request.query_params, ("kind", *PAGING))
        kind = request.query_params.get("kind")
        if kind is not None and kind not in WorkloadKind.values:
            message = f"One of {', '.join(WorkloadKind.values)}, or leave it out."
            raise ValidationFailed(f"kind: {message}", fields={"kind": [message]})
        presets = presets_visible_to(request.user)
        if kind:
            presets = presets.filter(kind=kind)
        page = self.paginate_queryset(presets)  # pages, as every list of the API
        return self.get_paginated_response(PresetSerializer(page, many=True).data)

    @extend_schema(request=PresetCreateSerializer, responses={201: PresetSerializer})
    def post(self, request: Request) -> Response:
        data = validated(PresetCreateSerializer(data=request.data))
        preset = preset_save(
            user=request.user,
            kind=data["kind"],
            name=data["name"],
            team=data.get("team") or None,
            body=data["body"],
        )
        return Response(PresetSerializer(preset).data, status=status.HTTP_201_CREATED)


class PresetDetailView(generics.GenericAPIView):
    """Delete a preset: yours, or your team's if you lead it (404 for one you may not see)."""

    serializer_class = PresetSerializer

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        preset_delete(user=request.user, preset_id=pk)
        return Response(status=status.HTTP_204_NO_CONTENT)
