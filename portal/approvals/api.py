"""Approvals API views: the inbox and the two decisions."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from portal.approvals.filters import ApprovalFilter
from portal.approvals.selectors import approval_get_for, approval_rows, approvals_visible_to
from portal.approvals.serializers import ApprovalSerializer, ApproveSerializer, RejectSerializer
from portal.approvals.services import approval_decide
from portal.workloads.models import Approval


def _approval(request: Request, approval_id: int) -> Response:
    """The approval as the caller may see it now (fresh after a decision)."""
    approval = approval_get_for(user=request.user, approval_id=approval_id)
    return Response(ApprovalSerializer(approval, context={"request": request}).data)


class ApprovalListView(generics.ListAPIView):
    """The approval inbox: leads see their teams', admins all, requesters their own. Newest first."""

    queryset = Approval.objects.none()
    serializer_class = ApprovalSerializer
    filterset_class = ApprovalFilter

    def get_queryset(self) -> QuerySet[Approval]:
        return approvals_visible_to(self.request.user)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        rows = {row.approval.pk: row for row in approval_rows(page, user=request.user)}
        serializer = self.get_serializer(page, many=True, context={"request": request, "rows": rows})
        return self.get_paginated_response(serializer.data)


class ApprovalDetailView(generics.GenericAPIView):
    """One approval (404 when it is not one you may see)."""

    serializer_class = ApprovalSerializer

    def get(self, request: Request, pk: int) -> Response:
        return _approval(request, pk)


class _DecisionView(generics.GenericAPIView):
    """Decide a request: the body's comment (or reason) reaches the requester."""

    serializer_class = ApprovalSerializer
    approve: bool
    body_class: type[serializers.Serializer]
    comment_field: str

    def post(self, request: Request, pk: int) -> Response:
        body = self.body_class(data=request.data)
        body.is_valid(raise_exception=True)
        comment = body.validated_data[self.comment_field]
        approval_decide(user=request.user, approval_id=pk, approve=self.approve, comment=comment)
        return _approval(request, pk)


@extend_schema_view(post=extend_schema(request=ApproveSerializer, responses={200: ApprovalSerializer}))
class ApprovalApproveView(_DecisionView):
    """Approve a request (a lead of the team who did not make it, or an admin)."""

    approve, body_class, comment_field = True, ApproveSerializer, "comment"


@extend_schema_view(post=extend_schema(request=RejectSerializer, responses={200: ApprovalSerializer}))
class ApprovalRejectView(_DecisionView):
    """Reject a request; `reason` is required and reaches the requester."""

    approve, body_class, comment_field = False, RejectSerializer, "reason"
