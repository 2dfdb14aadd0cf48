from django.urls import path

from portal.approvals import views

urlpatterns = [
    path("approvals/", views.inbox, name="approvals"),
    path("approvals/<int:pk>/decide/", views.approval_decide_view, name="approval-decide"),
]
