from django.urls import path

from portal.deployments import api

urlpatterns = [
    path("deployments", api.DeploymentListView.as_view(), name="api-deployments"),
    path("deployments/<int:pk>", api.DeploymentDetailView.as_view(), name="api-deployment"),
    path(
        "deployments/<int:pk>/request-body",
        api.DeploymentRequestBodyView.as_view(),
        name="api-deployment-request-body",
    ),
    path("deployments/<int:pk>/cost", api.DeploymentCostView.as_view(), name="api-deployment-cost"),
    path("deployments/<int:pk>/history", api.DeploymentHistoryView.as_view(), name="api-deployment-history"),
    path(
        "deployments/<int:pk>/utilization",
        api.DeploymentUtilizationView.as_view(),
        name="api-deployment-utilization",
    ),
    path(
        "deployments/<int:pk>/serving",
        api.DeploymentServingView.as_view(),
        name="api-deployment-serving",
    ),
    path("deployments/<int:pk>/scale", api.DeploymentScaleView.as_view(), name="api-deployment-scale"),
    path(
        "deployments/<int:pk>/scale/withdraw",
        api.DeploymentScaleWithdrawView.as_view(),
        name="api-deployment-scale-withdraw",
    ),
    path("deployments/<int:pk>/keep", api.DeploymentKeepView.as_view(), name="api-deployment-keep"),
    path(
        "deployments/<int:pk>/scale-back",
        api.DeploymentScaleBackView.as_view(),
        name="api-deployment-scale-back",
    ),
    path("deployments/<int:pk>/extend", api.DeploymentExtendView.as_view(), name="api-deployment-extend"),
    path(
        "deployments/<int:pk>/withdraw", api.DeploymentWithdrawView.as_view(), name="api-deployment-withdraw"
    ),
    path(
        "deployments/<int:pk>/extension/withdraw",
        api.DeploymentExtensionWithdrawView.as_view(),
        name="api-deployment-extension-withdraw",
    ),
    path(
        "deployments/<int:pk>/terminate",
        api.DeploymentTerminateView.as_view(),
        name="api-deployment-terminate",
    ),
]
