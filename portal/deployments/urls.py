from django.urls import path

from portal.deployments import views
from portal.workloads.urls import action_urls

urlpatterns = [
    path("deployments/", views.deployments, name="deployments"),
    path("deployments/new/", views.deployment_new, name="deployment-new"),
    path("deployments/new/fits/", views.deployment_fits, name="deployment-fits"),
    path("deployments/new/estimate/", views.deployment_estimate_panel, name="deployment-estimate"),
    path("deployments/<int:number>/", views.deployment_detail, name="deployment-detail"),
    path("deployments/<int:number>/scale/", views.deployment_scale_view, name="deployment-scale"),
    path(
        "deployments/<int:number>/scale/withdraw/",
        views.deployment_scale_withdraw_posted,
        name="deployment-scale-withdraw",
    ),
    path("deployments/<int:number>/keep/", views.deployment_keep_posted, name="deployment-keep"),
    path(
        "deployments/<int:number>/scale-back/",
        views.deployment_scale_back_posted,
        name="deployment-scale-back",
    ),
    *action_urls("deployment", "deployments"),
    path("auth/endpoint/check", views.endpoint_gate_check, name="endpoint-gate-check"),
    path("auth/endpoint/gateway/", views.endpoint_gate_external, name="endpoint-gate-external"),
    path("auth/endpoint/gateway/<path:path>", views.endpoint_gate_external),
    path("simulated-endpoint/<str:host>/", views.endpoint_simulated, name="endpoint-simulated"),
    path("simulated-endpoint/<str:host>/<path:path>", views.endpoint_simulated),
]
