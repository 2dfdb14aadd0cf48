from django.urls import path

from portal.approvals import api

urlpatterns = [
    path("approvals", api.ApprovalListView.as_view(), name="api-approvals"),
    path("approvals/<int:pk>", api.ApprovalDetailView.as_view(), name="api-approval"),
    path("approvals/<int:pk>/approve", api.ApprovalApproveView.as_view(), name="api-approval-approve"),
    path("approvals/<int:pk>/reject", api.ApprovalRejectView.as_view(), name="api-approval-reject"),
]
