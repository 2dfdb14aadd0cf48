from django.urls import path

from portal.approvals import links, views

urlpatterns = [
    path("approvals/", views.inbox, name="approvals"),
    path("live/badges/", views.nav_badges, name="nav-badges"),
    path("approvals/<int:pk>/decide/", views.approval_decide_view, name="approval-decide"),
    path("approvals/<int:pk>/act/<str:token>/", links.approval_act, name="approval-act"),
]
