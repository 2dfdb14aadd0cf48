"""What the Fleet page lets platform admins do, over the API: the nodes and their MIG management,
node discovery now, and the objects found in the clusters that the portal does not know
(orphans), to remove after the grace period or keep."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema_field
from rest_framework import generics, permissions, serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.lists import PagedListView
from portal.core.serializers import refuse_other_parameters
from portal.fleet.api import IsPlatformAdmin
from portal.fleet.models import ClusterOrphan, Node
from portal.fleet.orphans import orphan_confirm, orphan_keep, orphan_removal_at, orphans_open
from portal.fleet.services import fleet_discovery_request, fleet_node_take_over

ADMINS = [permissions.IsAuthenticated, IsPlatformAdmin]


class AdminsOrNotFound(permissions.BasePermission):
    """On one node or orphan: to anyone but a platform admin it does not exist, as any object
    outside a caller's reach answers."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not IsPlatformAdmin().has_permission(request, view):
            raise NotFound("No such object.")
        return True


ADMIN_OBJECTS = [permissions.IsAuthenticated, AdminsOrNotFound]


class NodeSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")
    gpu_type = serializers.CharField(source="gpu_type.slug", allow_null=True, default=None)

    class Meta:
        model = Node
        fields = [
            "id",
            "cluster",
            "name",
            "gpu_type",
            "product",
            "schedulable",
            "mig_managed",
            "mig_config_state",
            "mig_layout_last_error",
        ]
        read_only_fields = fields


class OrphanSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")
    confirmed_by = serializers.CharField(source="confirmed_by.username", allow_null=True, default=None)
    removal_at = serializers.SerializerMethodField()

    class Meta:
        model = ClusterOrphan
        fields = [
            "id",
            "cluster",
            "kind",
            "name",
            "namespace",
            "reason",
            "first_seen",
            "last_seen",
            "confirmed_by",
            "confirmed_at",
            "removal_at",
            "last_error",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_removal_at(self, orphan: ClusterOrphan) -> str | None:
        """Once confirmed: when it is removed at the earliest (never for a home volume: data)."""
        return serializers.DateTimeField().to_representation(orphan_removal_at(orphan))


class DiscoveryStartedSerializer(serializers.Serializer):
    clusters = serializers.ListField(child=serializers.CharField(), help_text="Kubernetes clusters asked.")


class FleetNodeListView(PagedListView):
    """Every GPU node, with whether the portal manages its MIG layout (platform admins)."""

    queryset = Node.objects.none()
    serializer_class = NodeSerializer
    permission_classes = ADMINS

    def get_queryset(self) -> QuerySet[Node]:
        return Node.objects.select_related("cluster", "gpu_type").order_by("cluster__name", "name")


class FleetNodeTakeOverView(generics.GenericAPIView):
    """Let the portal manage the MIG layout of a node found with a layout of its own (a node whose
    GPUs carry different layouts, or MIG's single strategy, is refused with the reason)."""

    queryset = Node.objects.none()
    serializer_class = NodeSerializer
    permission_classes = ADMIN_OBJECTS

    def post(self, request: Request, pk: int) -> Response:
        node = fleet_node_take_over(user=request.user, node_id=pk)
        return Response(
            NodeSerializer(Node.objects.select_related("cluster", "gpu_type").get(pk=node.pk)).data
        )


class FleetDiscoverView(generics.GenericAPIView):
    """Start GPU node discovery on every Kubernetes cluster now, not at the next period."""

    serializer_class = DiscoveryStartedSerializer
    permission_classes = ADMINS

    def post(self, request: Request) -> Response:
        refuse_other_parameters(request.query_params, ())
        clusters = fleet_discovery_request(user=request.user)
        body = DiscoveryStartedSerializer({"clusters": [cluster.name for cluster in clusters]}).data
        return Response(body, status=status.HTTP_202_ACCEPTED)


class FleetOrphanListView(PagedListView):
    """Objects in the clusters the portal does not know, still there, oldest first."""

    queryset = ClusterOrphan.objects.none()
    serializer_class = OrphanSerializer
    permission_classes = ADMINS

    def get_queryset(self) -> QuerySet[ClusterOrphan]:
        return orphans_open()


class _OrphanDecisionView(generics.GenericAPIView):
    queryset = ClusterOrphan.objects.none()
    serializer_class = OrphanSerializer
    permission_classes = ADMIN_OBJECTS
    decide: Any

    def post(self, request: Request, pk: int) -> Response:
        orphan = self.decide(user=request.user, orphan_id=pk)
        return Response(OrphanSerializer(orphan).data)


class FleetOrphanRemoveView(_OrphanDecisionView):
    """Confirm that an orphan may go: the workers remove it after the grace period, if it is still
    unknown then (home volumes are refused: they hold a user's files)."""

    decide = staticmethod(orphan_confirm)


class FleetOrphanKeepView(_OrphanDecisionView):
    """Withdraw a removal confirmed by mistake: the object stays, still reported."""

    decide = staticmethod(orphan_keep)
