"""GPU node discovery as a service: discovered nodes in, Node and Gpu rows out (no cluster)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db.models import F

from portal.audit.models import AuditEvent
from portal.core.errors import Conflict, NotAllowed
from portal.fleet import discovery
from portal.fleet.discovery import (
    DISCOVERY_HOLD_KEY,
    DiscoveredNode,
    fleet_discovery_failed,
    fleet_sync_nodes,
    gpu_uuid,
)
from portal.fleet.models import Allocation, Cluster, Gpu, GpuType, MigSlice, Node
from portal.fleet.placement import NoFit, Placement, place
from portal.fleet.selectors import gpu_snapshot, price_per_hour
from portal.fleet.services import fleet_node_take_over, placement_request
from tests.factories import ClusterFactory

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

WHOLE_H100 = DiscoveredNode(
    name="gpu-h100-a",
    product="NVIDIA-H100-80GB-HBM3",
    gpu_count=8,
    gpu_memory_mb=81559,
    mig_capable=True,
    mig_strategy="mixed",
    mig_config="all-disabled",
    mig_config_state="success",
    allocatable={"nvidia.com/gpu": 8},
    gpu_type="h100-80gb",
)
MIG_H100 = dataclasses.replace(
    WHOLE_H100,
    name="gpu-h100-b",
    mig_config="all-balanced",
    allocatable={"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-3g.40gb": 8},
)
SINGLE_A100 = DiscoveredNode(
    name="gpu-a100-a",
    product="NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
    gpu_count=4,
    gpu_memory_mb=40960,
    mig_capable=True,
    mig_strategy="single",
    mig_config="all-1g.5gb",
    mig_config_state="success",
    allocatable={"nvidia.com/gpu": 28},
    gpu_type="a100-40gb",
)
UNKNOWN = dataclasses.replace(WHOLE_H100, name="gpu-b200-a", product="NVIDIA-B200", gpu_type=None)


@pytest.fixture
def cluster() -> Cluster:
    return ClusterFactory(name="gpu", driver="kubernetes")


def sync(cluster: Cluster, *nodes: DiscoveredNode, now: datetime = NOW):
    return fleet_sync_nodes(cluster=cluster, discovered=list(nodes), now=now)


def fleet_state() -> list[tuple]:
    nodes = Node.objects.order_by("name").values_list(
        "name", "gpu_type__slug", "product", "unknown_product", "schedulable", "mig_config_state", "labels"
    )
    gpus = Gpu.objects.order_by("node__name", "index").values_list(
        "node__name", "index", "uuid", "gpu_type__slug", "mig_enabled"
    )
    return [*nodes, *gpus, *GpuType.objects.values_list("slug", flat=True)]


def test_discovered_nodes_become_nodes_with_one_gpu_row_per_gpu(cluster):
    result = sync(cluster, WHOLE_H100)
    node = Node.objects.get(cluster=cluster, name="gpu-h100-a")
    assert node.gpu_type.slug == "h100-80gb" and node.product == "NVIDIA-H100-80GB-HBM3"
    assert node.schedulable and not node.unknown_product
    assert node.labels["nvidia.com/mig.strategy"] == "mixed"
    gpus = list(node.gpus.order_by("index"))
    assert [gpu.index for gpu in gpus] == list(range(8))
    assert {gpu.gpu_type.slug for gpu in gpus} == {"h100-80gb"}
    assert not any(gpu.mig_enabled for gpu in gpus)
    assert gpus[3].uuid == gpu_uuid(cluster="gpu", node="gpu-h100-a", index=3)
    assert result.nodes_added == ["gpu-h100-a"] and len(result.gpus_added) == 8


def test_a_known_model_without_a_row_gets_a_gpu_type_priced_at_its_list_price(cluster):
    result = sync(cluster, SINGLE_A100)
    gpu_type = GpuType.objects.get(slug="a100-40gb")
    assert result.gpu_types_added == ["a100-40gb"]
    assert gpu_type.name == "NVIDIA A100 40GB" and gpu_type.memory_gb == 40
    assert price_per_hour(gpu_type=gpu_type, at=NOW) == Decimal("3.43")


def test_an_existing_gpu_type_and_its_prices_are_left_as_they_are(cluster, h100):
    result = sync(cluster, WHOLE_H100)
    assert result.gpu_types_added == []
    assert Node.objects.get(name="gpu-h100-a").gpu_type == h100
    assert h100.prices.count() == 1


def test_mig_resources_of_the_mixed_strategy_put_the_gpus_in_mig_mode(cluster):
    sync(cluster, WHOLE_H100, MIG_H100)
    assert set(Gpu.objects.filter(node__name="gpu-h100-b").values_list("mig_enabled", flat=True)) == {True}
    assert set(Gpu.objects.filter(node__name="gpu-h100-a").values_list("mig_enabled", flat=True)) == {False}


def test_a_mig_product_of_the_single_strategy_puts_the_gpus_in_mig_mode(cluster):
    sync(cluster, SINGLE_A100)
    assert (
        list(Gpu.objects.filter(node__name="gpu-a100-a").values_list("mig_enabled", flat=True)) == [True] * 4
    )


def test_a_node_turned_to_mig_flips_its_free_gpus_and_never_a_held_one(cluster, researcher, team):
    sync(cluster, WHOLE_H100)
    held = Gpu.objects.get(node__name="gpu-h100-a", index=7)
    Allocation.objects.create(
        gpu=held,
        team=team,
        user=researcher,
        gpu_type=held.gpu_type,
        price_per_hour=Decimal("6.88"),
        started_at=NOW,
    )
    result = sync(cluster, dataclasses.replace(MIG_H100, name="gpu-h100-a"))
    modes = dict(Gpu.objects.filter(node__name="gpu-h100-a").values_list("index", "mig_enabled"))
    assert modes == {**dict.fromkeys(range(7), True), 7: False}
    assert len(result.mig_changed) == 7


def test_mig_modes_are_left_alone_while_a_layout_change_is_under_way(cluster):
    sync(cluster, WHOLE_H100)
    changing = dataclasses.replace(MIG_H100, name="gpu-h100-a", mig_config_state="pending")
    sync(cluster, changing)
    assert not Gpu.objects.filter(mig_enabled=True).exists()
    assert Node.objects.get(name="gpu-h100-a").mig_config_state == "pending"


def test_turning_mig_off_drops_the_free_slices_of_the_gpu(cluster):
    sync(cluster, MIG_H100)
    gpu = Gpu.objects.get(node__name="gpu-h100-b", index=0)
    assert MigSlice.objects.filter(gpu=gpu).exists()  # the layout it arrived with, taken in
    sync(cluster, dataclasses.replace(WHOLE_H100, name="gpu-h100-b"))
    gpu.refresh_from_db()
    assert not gpu.mig_enabled
    assert not MigSlice.objects.exists()


def test_an_unknown_product_is_kept_flagged_and_never_offered_for_placement(cluster):
    result = sync(cluster, WHOLE_H100, UNKNOWN)
    node = Node.objects.get(name="gpu-b200-a")
    assert node.unknown_product and node.gpu_type is None and node.product == "NVIDIA-B200"
    assert not node.schedulable
    assert node.labels[DISCOVERY_HOLD_KEY] == "unknown GPU product NVIDIA-B200"
    assert not node.gpus.exists()
    assert result.unknown == {"gpu-b200-a": "NVIDIA-B200"}
    assert {view.node for view in gpu_snapshot(now=NOW)} == {"gpu-h100-a"}


def test_a_node_whose_product_becomes_known_joins_placement(cluster):
    sync(cluster, UNKNOWN)
    sync(cluster, dataclasses.replace(UNKNOWN, gpu_type="h100-80gb"))
    node = Node.objects.get(name="gpu-b200-a")
    assert node.schedulable and not node.unknown_product and DISCOVERY_HOLD_KEY not in node.labels
    assert node.gpus.count() == 8


def test_a_vanished_node_leaves_placement_but_keeps_its_rows(cluster, researcher, team):
    sync(cluster, WHOLE_H100, MIG_H100)
    gpu = Gpu.objects.get(node__name="gpu-h100-a", index=0)
    Allocation.objects.create(
        gpu=gpu,
        team=team,
        user=researcher,
        gpu_type=gpu.gpu_type,
        price_per_hour=Decimal("6.88"),
        started_at=NOW,
    )
    Node.objects.filter(name="gpu-h100-b").update(mig_managed=True)  # an admin took its layout over
    result = sync(cluster, MIG_H100, now=NOW + timedelta(minutes=5))
    node = Node.objects.get(name="gpu-h100-a")
    assert result.nodes_gone == ["gpu-h100-a"]
    assert not node.schedulable
    assert node.labels[DISCOVERY_HOLD_KEY] == "not in the cluster since 2026-03-02 09:05 UTC"
    assert node.gpus.count() == 8 and Allocation.objects.filter(gpu=gpu).exists()
    assert {view.node for view in gpu_snapshot(now=NOW)} == {"gpu-h100-b"}


def test_a_node_that_returns_is_placed_on_again_but_an_admins_cordon_stays(cluster):
    sync(cluster, WHOLE_H100, MIG_H100)
    Node.objects.filter(name="gpu-h100-b").update(schedulable=False)  # an admin took it out
    sync(cluster)
    sync(cluster, WHOLE_H100, MIG_H100)
    assert Node.objects.get(name="gpu-h100-a").schedulable
    assert not Node.objects.get(name="gpu-h100-b").schedulable


def test_fewer_gpus_drop_unused_rows_and_keep_those_with_history(cluster, researcher, team):
    sync(cluster, WHOLE_H100)
    billed = Gpu.objects.get(node__name="gpu-h100-a", index=7)
    Allocation.objects.create(
        gpu=billed,
        team=team,
        user=researcher,
        gpu_type=billed.gpu_type,
        price_per_hour=Decimal("6.88"),
        started_at=NOW,
        ended_at=NOW,
        released_at=NOW,
    )
    result = sync(cluster, dataclasses.replace(WHOLE_H100, gpu_count=6, allocatable={"nvidia.com/gpu": 6}))
    assert sorted(Gpu.objects.filter(node__name="gpu-h100-a").values_list("index", flat=True)) == [
        *range(6),
        7,
    ]
    assert result.gpus_removed == ["gpu-h100-a/6"] and result.stale_gpus == ["gpu-h100-a/7"]


def test_running_twice_changes_nothing_the_second_time(cluster):
    nodes = (WHOLE_H100, MIG_H100, SINGLE_A100, UNKNOWN)
    sync(cluster, *nodes)
    before, events = fleet_state(), AuditEvent.objects.count()
    again = sync(cluster, *nodes, now=NOW + timedelta(minutes=5))
    assert not again.changed
    assert fleet_state() == before
    assert AuditEvent.objects.count() == events
    assert again.unknown == {"gpu-b200-a": "NVIDIA-B200"}  # still reported, not a change


def test_a_sync_is_recorded_on_the_cluster_and_audited_with_what_changed(cluster):
    Cluster.objects.filter(pk=cluster.pk).update(last_discovery_error="connection refused")
    sync(cluster, WHOLE_H100, UNKNOWN)
    cluster.refresh_from_db()
    assert cluster.last_discovery_at == NOW and cluster.last_discovery_error == ""
    event = AuditEvent.objects.get(action="cluster.discovered")
    assert event.object_id == str(cluster.pk) and event.actor is None
    assert "nodes added: gpu-b200-a, gpu-h100-a" in event.detail
    assert "GPUs added: gpu-h100-a/0-7" in event.detail
    assert "unknown GPU products: gpu-b200-a (NVIDIA-B200)" in event.detail


def test_a_failure_is_recorded_on_the_cluster_and_audited_once(cluster):
    assert fleet_discovery_failed(cluster=cluster, error="the Kubernetes API failed to list nodes")
    assert not fleet_discovery_failed(cluster=cluster, error="the Kubernetes API failed to list nodes")
    cluster.refresh_from_db()
    assert cluster.last_discovery_error == "the Kubernetes API failed to list nodes"
    assert cluster.last_discovery_at is None
    assert AuditEvent.objects.filter(action="cluster.discovery_failed").count() == 1


def test_discovery_keeps_a_layout_change_made_while_it_ran(cluster, monkeypatch):
    fleet_sync_nodes(cluster=cluster, discovered=[WHOLE_H100], now=NOW)
    node = Node.objects.get(name="gpu-h100-a")
    real_sync_node = discovery._sync_node

    def placement_meanwhile(*args, **kwargs):
        # A placement cuts a slice on this node after discovery has read the node's row.
        Node.objects.filter(pk=node.pk).update(mig_layout_wanted=F("mig_layout_wanted") + 1)
        return real_sync_node(*args, **kwargs)

    monkeypatch.setattr(discovery, "_sync_node", placement_meanwhile)
    changed = dataclasses.replace(WHOLE_H100, mig_config_state="pending")
    result = fleet_sync_nodes(cluster=cluster, discovered=[changed], now=NOW + timedelta(minutes=5))

    node.refresh_from_db()
    assert result.nodes_updated == ["gpu-h100-a"]
    assert node.mig_config_state == "pending"
    assert node.mig_layout_wanted == 1


def test_a_node_that_arrives_with_its_own_mig_layout_lends_its_slices_but_is_never_re_cut(cluster):
    result = sync(cluster, WHOLE_H100, MIG_H100)

    mig_node = Node.objects.get(name="gpu-h100-b")
    assert not mig_node.mig_managed and Node.objects.get(name="gpu-h100-a").mig_managed
    assert result.unmanaged == ["gpu-h100-b"]
    assert "MIG layout was set outside the portal (left alone): gpu-h100-b" in result.summary()
    # 16 x 1g.10gb and 8 x 3g.40gb over 8 GPUs: each GPU 2 x 1g and a 3g, taken in as free slices
    assert result.imported == ["gpu-h100-b: 16 x 1g.10gb, 8 x 3g.40gb"]
    for gpu in Gpu.objects.filter(node=mig_node):
        assert sorted(gpu.mig_slices.values_list("profile", "start")) == [
            ("1g.10gb", 4), ("1g.10gb", 5), ("3g.40gb", 0)
        ]  # fmt: skip
    snapshot = gpu_snapshot(gpu_type=GpuType.objects.get(slug="h100-80gb"), now=NOW)
    lent = [gpu for gpu in snapshot if gpu.node == "gpu-h100-b"]
    assert len(lent) == 8 and {gpu.mig_change_policy for gpu in lent} == {"never"}
    h100 = GpuType.objects.get(slug="h100-80gb")
    small = place(snapshot, placement_request(gpu_type=h100, count=1, mig_profile="1g.10gb"))
    assert isinstance(small, Placement) and small.slice_id is not None and small.layout is None
    other = place(snapshot, placement_request(gpu_type=h100, count=1, mig_profile="2g.20gb"))
    assert isinstance(other, NoFit)  # no free 2g.20gb, and the node's layout is not the portal's
    assert sync(cluster, WHOLE_H100, MIG_H100).imported == []  # once


def test_a_node_on_the_portals_own_layout_is_managed(cluster):
    ours = dataclasses.replace(MIG_H100, mig_config="gpu-portal-gpu-h100-b-1")
    sync(cluster, ours)
    assert Node.objects.get(name="gpu-h100-b").mig_managed


def test_an_admin_takes_over_an_unmanaged_node_and_its_mig_gpus_take_slices(cluster, admin_user, researcher):
    sync(cluster, MIG_H100)
    node = Node.objects.get(name="gpu-h100-b")
    with pytest.raises(NotAllowed):
        fleet_node_take_over(user=researcher, node_id=node.pk)

    fleet_node_take_over(user=admin_user, node_id=node.pk)

    assert Node.objects.get(pk=node.pk).mig_managed
    event = AuditEvent.objects.get(action="node.mig_taken_over")
    assert event.actor == admin_user and "layout all-balanced set outside the portal" in event.detail
    snapshot = gpu_snapshot(gpu_type=GpuType.objects.get(slug="h100-80gb"), now=NOW)
    assert len(snapshot) == 8 and all(gpu.mig_enabled for gpu in snapshot)
    with pytest.raises(Conflict):
        fleet_node_take_over(user=admin_user, node_id=node.pk)


def test_a_single_strategy_node_stays_its_own_with_the_reason(cluster, admin_user):
    result = sync(cluster, SINGLE_A100)
    node = Node.objects.get(name="gpu-a100-a")
    assert result.unmanaged == ["gpu-a100-a"] and not node.mig_managed

    with pytest.raises(Conflict, match=r"runs the single MIG strategy.*needs the mixed strategy"):
        fleet_node_take_over(user=admin_user, node_id=node.pk)

    assert not Node.objects.get(pk=node.pk).mig_managed
    assert not AuditEvent.objects.filter(action="node.mig_taken_over").exists()
