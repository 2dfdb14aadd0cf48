"""API pieces every kind of workload shares (the list view, one workload with its queue place), and
/me."""

from __future__ import annotations

from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from portal.workloads.filters import WorkloadFilter
from portal.workloads.models import Workload
from portal.workloads.selectors import (
    queue_positions,
    user_standing,
)
from portal.workloads.serializers import MeSerializer, WorkloadSerializer


def workload_response(
    request: Request,
    workload: Workload,
    serializer_class: type[WorkloadSerializer],
    *,
    status_code: int = status.HTTP_200_OK,
) -> Response:
    """One sandbox or deployment as the API shows it, with its place in the queue."""
    context = {"request": request, "queue_positions": queue_positions([workload])}
    return Response(serializer_class(workload, context=context).data, status=status_code)


class WorkloadListView(generics.ListAPIView):
    """A filtered page of sandboxes or deployments; their queue places cost one query per page.
    A subclass names its `serializer_class` and `get_queryset`."""

    queryset = Workload.objects.none()
    filter_backends = [DjangoFilterBackend]
    filterset_class = WorkloadFilter

    def list(self, request: Request, *args: object, **kwargs: object) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        context = {"request": request, "queue_positions": queue_positions(page)}
        serializer = self.get_serializer_class()(page, many=True, context=context)
        return self.get_paginated_response(serializer.data)


class MeView(generics.GenericAPIView):
    """The signed-in user, their teams with the role in each, quota and budget left."""

    serializer_class = MeSerializer

    def get(self, request: Request) -> Response:
        context = {"standings": user_standing(request.user)}
        return Response(MeSerializer(request.user, context=context).data)
