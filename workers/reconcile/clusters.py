"""The driver for a cluster row: its connection settings as the drivers take them."""

from __future__ import annotations

from django.conf import settings

from portal.fleet.models import Cluster
from workers.drivers.base import ClusterConfig, ClusterDriver
from workers.drivers.factory import get_driver


def cluster_config(cluster: Cluster) -> ClusterConfig:
    """The cluster's connection settings; its driver, else the portal's default."""
    return ClusterConfig(
        name=cluster.name,
        driver=cluster.driver or settings.PORTAL_CLUSTER_DRIVER,  # type: ignore[arg-type]
        kubeconfig=cluster.kubeconfig,
        context=cluster.context,
        in_cluster=cluster.in_cluster,
        api_url=cluster.api_url,
        mig_mode=cluster.effective_mig_mode,  # type: ignore[arg-type]
        sandbox_route=cluster.sandbox_route,  # type: ignore[arg-type]
        ingress_class=cluster.ingress_class,
        gateway=cluster.gateway,
        sandbox_tls_secret=cluster.sandbox_tls_secret,
        user_api_url=cluster.user_api_url,
        user_ca_data=cluster.user_ca_data,
    )


def driver_for(cluster: Cluster) -> ClusterDriver:
    """One driver instance per cluster per process (the factory caches it)."""
    return get_driver(cluster_config(cluster))
