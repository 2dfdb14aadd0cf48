"""Discover a cluster's GPU nodes and sync them into the fleet.

The driver reads GPU Feature Discovery's labels; `portal.fleet.discovery` turns them into Node
and Gpu rows. Simulated clusters are skipped: their fleet is the one seeded in the database and
their driver reports no nodes, which would otherwise read as "every node is gone".
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.utils import timezone

from portal.fleet.discovery import DiscoveredNode, SyncResult, fleet_discovery_failed, fleet_sync_nodes
from portal.fleet.geometry import GPU_MODELS
from portal.fleet.models import Cluster
from workers.drivers.base import ClusterDriver, DiscoveredGpuNode, DriverError
from workers.drivers.kubernetes_nodes import gpu_type_slug, product_slug_table
from workers.reconcile.clusters import cluster_config, driver_for

log = logging.getLogger(__name__)


def discoverable(cluster: Cluster) -> bool:
    """Whether the cluster's nodes come from the cluster (not from the simulated seed)."""
    return cluster_config(cluster).driver == "kubernetes"


def clusters_to_discover() -> list[int]:
    return [cluster.pk for cluster in Cluster.objects.order_by("pk") if discoverable(cluster)]


def portal_node(driver: ClusterDriver, node: DiscoveredGpuNode) -> DiscoveredNode:
    """The driver's node as the portal's plain data, with the GPU type slug its product maps to."""
    mapping = getattr(driver, "gpu_type", None)
    if callable(mapping):
        slug = mapping(node)
    else:
        slug = gpu_type_slug(node.product, product_slug_table(GPU_MODELS.values()))
    return DiscoveredNode(
        name=node.name,
        product=node.product,
        gpu_count=node.gpu_count,
        gpu_memory_mb=node.gpu_memory_mb,
        mig_capable=node.mig_capable,
        mig_strategy=node.mig_strategy,
        mig_config=node.mig_config,
        mig_config_state=node.mig_config_state,
        allocatable=dict(node.allocatable),
        gpu_type=slug,
        gpu_uuids=dict(node.gpu_uuids),
        dra_mig_gpus=node.dra_mig_gpus,
    )


def discover_cluster(cluster_id: int, *, now: datetime | None = None) -> SyncResult | None:
    """Sync one cluster's GPU nodes; None when it was skipped or the cluster could not be asked
    (the error is then recorded on the cluster row, for the next periodic run to clear)."""
    now = now or timezone.now()
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None or not discoverable(cluster):
        return None
    try:
        driver = driver_for(cluster)
        nodes = [portal_node(driver, node) for node in driver.discover_gpu_nodes()]
    except DriverError as error:
        log.warning("discovery on cluster %s failed: %s", cluster.name, error.message)
        fleet_discovery_failed(cluster=cluster, error=error.message)
        return None
    result = fleet_sync_nodes(cluster=cluster, discovered=nodes, now=now)
    if result.changed:
        log.info("discovery on cluster %s: %s", cluster.name, result.summary())
    return result
