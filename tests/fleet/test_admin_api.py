"""What the Fleet page lets platform admins do, over the API: nodes and taking over their MIG
layouts, node discovery now, orphans to remove or keep. Nobody else gets in."""

from __future__ import annotations

import pytest

from portal.fleet.models import ClusterOrphan, Node
from portal.fleet.orphans import OrphanSeen, orphans_observed
from tests.factories import ClusterFactory
from tests.fleet.test_discovery import MIG_H100, SINGLE_A100, WHOLE_H100, sync

pytestmark = pytest.mark.django_db
cluster = pytest.fixture(lambda: ClusterFactory(name="kube-a", driver="kubernetes"))


def test_an_admin_lists_the_nodes_and_takes_over_one_with_a_layout_of_its_own(admin, cluster):
    sync(cluster, WHOLE_H100, MIG_H100, SINGLE_A100)
    nodes = {node["name"]: node for node in admin.get("/api/v1/fleet/nodes").json()["results"]}
    assert set(nodes) == {"gpu-h100-a", "gpu-h100-b", "gpu-a100-a"}
    assert nodes["gpu-h100-b"]["mig_managed"] is False and nodes["gpu-h100-b"]["cluster"] == "kube-a"

    taken = admin.post(f"/api/v1/fleet/nodes/{nodes['gpu-h100-b']['id']}/take-over")
    assert taken.status_code == 200 and taken.json()["mig_managed"] is True
    assert Node.objects.get(name="gpu-h100-b").mig_managed
    again = admin.post(f"/api/v1/fleet/nodes/{nodes['gpu-h100-b']['id']}/take-over")
    assert again.status_code == 409
    single = admin.post(f"/api/v1/fleet/nodes/{nodes['gpu-a100-a']['id']}/take-over")
    assert single.status_code == 409 and "single MIG strategy" in single.json()["error"]["message"]
    assert admin.post("/api/v1/fleet/nodes/99999/take-over").status_code == 404


def test_discovery_starts_on_every_kubernetes_cluster(admin, cluster, run_jobs):
    started = run_jobs(lambda: admin.post("/api/v1/fleet/discover"))
    assert started.status_code == 202 and started.json() == {"clusters": ["kube-a"]}


def test_an_admin_confirms_an_orphans_removal_and_takes_it_back(admin, admin_user, cluster):
    seen = OrphanSeen(
        kind=ClusterOrphan.Kind.NAMESPACE, name="sbx-x-1", reason="names sandbox 1", workload_id=1
    )
    home = OrphanSeen(kind=ClusterOrphan.Kind.HOME_VOLUME, name="pv-home-bob", reason="no home uses it")
    orphans_observed(cluster_id=cluster.pk, seen=[seen, home])
    listed = {o["name"]: o for o in admin.get("/api/v1/fleet/orphans").json()["results"]}
    assert listed["sbx-x-1"]["removal_at"] is None and listed["sbx-x-1"]["reason"] == "names sandbox 1"

    confirmed = admin.post(f"/api/v1/fleet/orphans/{listed['sbx-x-1']['id']}/remove").json()
    assert confirmed["confirmed_by"] == admin_user.username and confirmed["removal_at"] is not None
    refused = admin.post(f"/api/v1/fleet/orphans/{listed['pv-home-bob']['id']}/remove")
    assert refused.status_code == 409 and "home volume" in refused.json()["error"]["message"]
    kept = admin.post(f"/api/v1/fleet/orphans/{listed['sbx-x-1']['id']}/keep").json()
    assert kept["confirmed_at"] is None and kept["removal_at"] is None


@pytest.mark.parametrize(
    ("method", "path", "answer"),
    [
        ("get", "/api/v1/fleet/nodes", 403),
        ("post", "/api/v1/fleet/discover", 403),
        ("get", "/api/v1/fleet/orphans", 403),
        # one object: as if it did not exist, as everywhere in the API
        ("post", "/api/v1/fleet/nodes/1/take-over", 404),
        ("post", "/api/v1/fleet/orphans/1/remove", 404),
        ("post", "/api/v1/fleet/orphans/1/keep", 404),
    ],
)
def test_nobody_but_platform_admins_gets_in(bob, alice, method, path, answer):
    for client in (alice, bob):
        assert getattr(client, method)(path).status_code == answer


def test_an_admins_fleet_writes_need_a_token_of_the_admin_scope(admin_user, cluster):
    from rest_framework.test import APIClient

    from portal.accounts.services import token_create

    _, raw = token_create(user=admin_user, name="ops", scope="workloads")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get("/api/v1/fleet/nodes").status_code == 200  # reads: any scope
    refused = client.post("/api/v1/fleet/discover")
    assert refused.status_code == 403 and "admin scope" in refused.json()["error"]["message"]
