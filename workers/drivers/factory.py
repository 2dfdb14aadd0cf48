"""Picks the driver a cluster is configured for; one instance per cluster per process."""

from __future__ import annotations

from functools import lru_cache

from workers.drivers.base import ClusterConfig, ClusterDriver


@lru_cache(maxsize=32)
def get_driver(config: ClusterConfig) -> ClusterDriver:
    if config.driver == "kubernetes":
        from workers.drivers.kubernetes import KubernetesDriver

        return KubernetesDriver(config)
    from django.conf import settings

    from workers.drivers.simulated import SimulatedDriver
    from workers.simstore import DatabaseObjectStore

    return SimulatedDriver(
        store=DatabaseObjectStore(config.name),
        pod_start_seconds=settings.PORTAL_SIM_POD_START_SECONDS,
        mig_reconfig_seconds=settings.PORTAL_SIM_MIG_RECONFIG_SECONDS,
    )
