from django.urls import path
from django.views.generic import RedirectView

from portal.sandboxes import views
from portal.workloads.urls import action_urls

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    # The list of sandboxes is the dashboard; an address typed by analogy with /deployments/ lands there.
    path("sandboxes/", RedirectView.as_view(pattern_name="dashboard", query_string=True)),
    path("sandboxes/new/", views.sandbox_new, name="sandbox-new"),
    path("sandboxes/estimate/", views.sandbox_estimate_panel, name="sandbox-estimate"),
    path("sandboxes/mig-profiles/", views.sandbox_mig_profiles, name="sandbox-mig-profiles"),
    path("sandboxes/<int:number>/", views.sandbox_detail, name="sandbox-detail"),
    path("sandboxes/<int:number>/share/", views.sandbox_share_posted, name="sandbox-share"),
    path("sandboxes/<int:number>/restart/", views.sandbox_restart_posted, name="sandbox-restart"),
    path("sandboxes/<int:number>/keep/", views.sandbox_keep_posted, name="sandbox-keep"),
    path("sandboxes/<int:number>/insight/", views.sandbox_insight_panel, name="sandbox-insight"),
    path("sandboxes/<int:number>/kubectl/", views.sandbox_kubectl_panel, name="sandbox-kubectl"),
    path("sandboxes/<int:number>/kubeconfig/", views.sandbox_kubeconfig_download, name="sandbox-kubeconfig"),
    path("home/", views.home_page, name="home"),
    path("home/resize/", views.home_resize_posted, name="home-resize"),
    path("home/delete/", views.home_delete_posted, name="home-delete"),
    path("auth/sandbox/check", views.sandbox_gate_check, name="sandbox-gate-check"),
    path("auth/sandbox/gateway/", views.sandbox_gate_external, name="sandbox-gate-external"),
    path("auth/sandbox/gateway/<path:path>", views.sandbox_gate_external),
    path("auth/sandbox/signin/", views.sandbox_gate_signin, name="sandbox-gate-signin"),
    path("simulated/<str:host>/", views.sandbox_simulated, name="sandbox-simulated"),
    path("simulated/<str:host>/<path:path>", views.sandbox_simulated),
    *action_urls("sandbox", "sandboxes"),
]
