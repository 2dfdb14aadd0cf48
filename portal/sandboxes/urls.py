from django.urls import path

from portal.sandboxes import views
from portal.workloads.urls import action_urls

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("sandboxes/new/", views.sandbox_new, name="sandbox-new"),
    path("sandboxes/estimate/", views.sandbox_estimate_panel, name="sandbox-estimate"),
    path("sandboxes/mig-profiles/", views.sandbox_mig_profiles, name="sandbox-mig-profiles"),
    path("sandboxes/<int:pk>/", views.sandbox_detail, name="sandbox-detail"),
    *action_urls("sandbox", "sandboxes"),
]
