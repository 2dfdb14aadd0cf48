"""Node discovery over HTTP: the Kubernetes driver reads the fake's GFD labels, the fleet follows."""

from __future__ import annotations

import pytest
from django.test import override_settings

from portal.audit.models import AuditEvent
from portal.fleet.models import Cluster, Gpu, Node
from tests.factories import ClusterFactory
from tests.fakekube.nodes import gpu_node
from workers.celery import _schedule
from workers.reconcile.discovery import discover_cluster
from workers.tasks.fleet import discover_all

pytestmark = pytest.mark.django_db


def gpus_of(node: str) -> list[tuple[int, str, bool]]:
    return list(
        Gpu.objects.filter(node__name=node)
        .order_by("index")
        .values_list("index", "gpu_type__slug", "mig_enabled")
    )


def test_labelled_gpu_nodes_become_nodes_and_gpus_and_cpu_nodes_are_skipped(kube_cluster):
    nodes = {node.name: node for node in Node.objects.filter(cluster=kube_cluster)}
    assert set(nodes) == {"gpu-h100-a", "gpu-h100-b", "gpu-a100-a"}
    assert gpus_of("gpu-h100-a") == [(index, "h100-80gb", False) for index in range(8)]
    assert gpus_of("gpu-h100-b") == [(index, "h100-80gb", True) for index in range(8)]
    assert gpus_of("gpu-a100-a") == [(index, "a100-40gb", True) for index in range(4)]
    assert nodes["gpu-a100-a"].product == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    assert nodes["gpu-h100-b"].labels["nvidia.com/mig.config"] == "all-balanced"
    assert nodes["gpu-h100-b"].mig_config_state == "success"
    assert kube_cluster.last_discovery_at is not None and kube_cluster.last_discovery_error == ""


def test_an_unknown_product_is_flagged_not_dropped(fake_kube, kube_cluster):
    fake_kube.add_node(gpu_node("gpu-b200-a", product="NVIDIA-B200", gpu_count=8, gpu_memory_mb=183359))
    result = discover_cluster(kube_cluster.pk)
    node = Node.objects.get(name="gpu-b200-a")
    assert node.unknown_product and node.gpu_type is None and not node.schedulable
    assert not node.gpus.exists()
    assert result.unknown == {"gpu-b200-a": "NVIDIA-B200"}


def test_a_node_gone_from_the_cluster_becomes_unschedulable(fake_kube, kube_cluster):
    with fake_kube.store.lock:
        fake_kube.store.delete(("nodes", "", "gpu-h100-a"))
    result = discover_cluster(kube_cluster.pk)
    assert result.nodes_gone == ["gpu-h100-a"]
    node = Node.objects.get(name="gpu-h100-a")
    assert not node.schedulable and node.gpus.count() == 8


def test_discovering_twice_changes_nothing_the_second_time(kube_cluster):
    events = AuditEvent.objects.filter(action="cluster.discovered").count()
    result = discover_cluster(kube_cluster.pk)
    assert result is not None and not result.changed
    assert AuditEvent.objects.filter(action="cluster.discovered").count() == events == 1


def test_an_api_error_is_recorded_on_the_cluster_and_cleared_by_the_next_run(fake_kube, kube_cluster):
    fake_kube.fail_next(500, path_contains="/api/v1/nodes")
    assert discover_cluster(kube_cluster.pk) is None
    kube_cluster.refresh_from_db()
    assert kube_cluster.last_discovery_error.startswith("the Kubernetes API failed to list nodes (500)")
    assert Node.objects.filter(cluster=kube_cluster, schedulable=True).count() == 3  # nothing taken out

    assert discover_cluster(kube_cluster.pk) is not None
    kube_cluster.refresh_from_db()
    assert kube_cluster.last_discovery_error == ""


def test_a_forbidden_node_list_says_which_permission_is_missing(fake_kube, kube_cluster):
    fake_kube.fail_next(403, path_contains="/api/v1/nodes")
    discover_cluster(kube_cluster.pk)
    kube_cluster.refresh_from_db()
    assert kube_cluster.last_discovery_error.startswith("the portal's service account may not list nodes")


def test_simulated_clusters_keep_their_seeded_fleet(fleet):
    cluster = fleet["whole"].cluster
    before = (
        list(Node.objects.values_list("name", "schedulable")),
        list(Gpu.objects.values_list("pk", "mig_enabled")),
    )
    assert discover_cluster(cluster.pk) is None
    after = (
        list(Node.objects.values_list("name", "schedulable")),
        list(Gpu.objects.values_list("pk", "mig_enabled")),
    )
    assert after == before
    assert Cluster.objects.get(pk=cluster.pk).last_discovery_at is None


def test_the_periodic_task_discovers_every_kubernetes_cluster_and_no_simulated_one(fake_kube, fleet):
    kube = ClusterFactory(name="gpu", driver="kubernetes", api_url=fake_kube.url)
    discover_all.delay()
    assert Node.objects.filter(cluster=kube).count() == 3
    assert Cluster.objects.get(pk=kube.pk).last_discovery_at is not None
    assert Cluster.objects.get(name="test").last_discovery_at is None


def test_beat_runs_discovery_and_drift_repair_on_their_intervals():
    schedule = _schedule()
    assert schedule["discover-gpu-nodes"] == {"task": "fleet.discover_all", "schedule": 300.0}
    assert schedule["repair-drift"] == {"task": "fleet.repair_drift_all", "schedule": 120.0}
    with override_settings(PORTAL_DISCOVERY_SECONDS=60.0, PORTAL_DRIFT_SECONDS=30.0):
        schedule = _schedule()
    assert schedule["discover-gpu-nodes"]["schedule"] == 60.0
    assert schedule["repair-drift"]["schedule"] == 30.0
