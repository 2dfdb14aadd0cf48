from django.urls import path

from portal.sandboxes import api

urlpatterns = [
    path("sandboxes", api.SandboxListView.as_view(), name="api-sandboxes"),
    path("home", api.HomeView.as_view(), name="api-home"),
    path("sandboxes/estimate", api.SandboxEstimateView.as_view(), name="api-sandbox-estimate"),
    path("sandboxes/shared", api.SharedSandboxListView.as_view(), name="api-sandboxes-shared"),
    path("sandboxes/<int:pk>", api.SandboxDetailView.as_view(), name="api-sandbox"),
    path(
        "sandboxes/<int:pk>/request-body",
        api.SandboxRequestBodyView.as_view(),
        name="api-sandbox-request-body",
    ),
    path("sandboxes/<int:pk>/extend", api.SandboxExtendView.as_view(), name="api-sandbox-extend"),
    path("sandboxes/<int:pk>/withdraw", api.SandboxWithdrawView.as_view(), name="api-sandbox-withdraw"),
    path(
        "sandboxes/<int:pk>/extension/withdraw",
        api.SandboxExtensionWithdrawView.as_view(),
        name="api-sandbox-extension-withdraw",
    ),
    path("sandboxes/<int:pk>/terminate", api.SandboxTerminateView.as_view(), name="api-sandbox-terminate"),
    path("sandboxes/<int:pk>/sharing", api.SandboxSharingView.as_view(), name="api-sandbox-sharing"),
    path("sandboxes/<int:pk>/keep", api.SandboxKeepView.as_view(), name="api-sandbox-keep"),
    path("sandboxes/<int:pk>/restart", api.SandboxRestartView.as_view(), name="api-sandbox-restart"),
    path("sandboxes/<int:pk>/insight", api.SandboxInsightView.as_view(), name="api-sandbox-insight"),
    path(
        "sandboxes/<int:pk>/utilization", api.SandboxUtilizationView.as_view(), name="api-sandbox-utilization"
    ),
    path("sandboxes/<int:pk>/cost", api.SandboxCostView.as_view(), name="api-sandbox-cost"),
    path("sandboxes/<int:pk>/history", api.SandboxHistoryView.as_view(), name="api-sandbox-history"),
    path("sandboxes/<int:pk>/kubeconfig", api.SandboxKubeconfigView.as_view(), name="api-sandbox-kubeconfig"),
]
