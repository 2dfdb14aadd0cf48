from django.urls import path

from portal.sandboxes import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("sandboxes/new/", views.sandbox_new, name="sandbox-new"),
    path("sandboxes/estimate/", views.sandbox_estimate_panel, name="sandbox-estimate"),
    path("sandboxes/mig-profiles/", views.sandbox_mig_profiles, name="sandbox-mig-profiles"),
    path("sandboxes/<int:pk>/", views.sandbox_detail, name="sandbox-detail"),
    path("sandboxes/<int:pk>/extend/", views.sandbox_extend_view, name="sandbox-extend"),
    path("sandboxes/<int:pk>/terminate/", views.sandbox_terminate_view, name="sandbox-terminate"),
]
