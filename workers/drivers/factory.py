"""Picks the driver a cluster is configured for; one instance per cluster per process."""

from __future__ import annotations

from functools import lru_cache

from django.conf import settings

from portal.fleet.geometry import GPU_MODELS
from workers.drivers.base import ClusterConfig, ClusterDriver
from workers.drivers.kubernetes import KubernetesDriver, KubernetesOptions
from workers.drivers.kubernetes_nodes import product_slug_table
from workers.drivers.simulated import SimulatedDriver
from workers.manifests.options import AccessPath, ManifestOptions, ModelVolume, SandboxEgress, SandboxRoute
from workers.simstore import DatabaseObjectStore


@lru_cache(maxsize=32)
def get_driver(config: ClusterConfig) -> ClusterDriver:
    manifests = ManifestOptions(
        access_path=AccessPath(namespace=settings.PORTAL_ACCESS_NAMESPACE),
        egress=SandboxEgress(allow=settings.PORTAL_SANDBOX_EGRESS_CIDRS),
        storage_class=settings.PORTAL_STORAGE_CLASS,
        pod_security_level=settings.PORTAL_POD_SECURITY_LEVEL,
        route=SandboxRoute(
            kind=config.sandbox_route,
            ingress_class=config.ingress_class,
            gateway=config.gateway,
            tls_secret=config.sandbox_tls_secret,
            auth_url=settings.PORTAL_GATE_AUTH_URL,
            signin_url=f"{settings.PORTAL_BASE_URL}/auth/sandbox/signin/",
        ),
        nfs_csi_driver=settings.PORTAL_DATASET_NFS_CSI_DRIVER,
        model_volume=ModelVolume(
            source=settings.PORTAL_MODEL_VOLUME, mount_path=settings.PORTAL_MODEL_VOLUME_PATH
        ),
    )
    if config.driver == "kubernetes":
        return KubernetesDriver(
            config,
            KubernetesOptions(
                manifests=manifests,
                mig_config_map=settings.PORTAL_MIG_CONFIG_MAP,
                mig_config_namespace=settings.PORTAL_MIG_CONFIG_NAMESPACE,
                mig_config_settle_seconds=settings.PORTAL_MIG_CONFIG_SETTLE_SECONDS,
                reapply_seconds=settings.PORTAL_DRIFT_SECONDS,
                product_slugs=product_slug_table(GPU_MODELS.values()),
                dataset_namespace=settings.PORTAL_DATASET_NAMESPACE,
                prometheus_url=settings.PORTAL_PROMETHEUS_URL,
            ),
        )
    return SimulatedDriver(
        store=DatabaseObjectStore(config.name),
        pod_start_seconds=settings.PORTAL_SIM_POD_START_SECONDS,
        mig_reconfig_seconds=settings.PORTAL_SIM_MIG_RECONFIG_SECONDS,
        manifest_options=manifests,
    )
