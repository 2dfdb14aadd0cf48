"""The fleet page: admins only; every GPU as eight memory slots with who holds what; admins start
node discovery there and see unrecognised GPU nodes flagged."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.audit.models import AuditEvent
from portal.fleet.models import Gpu, MigSlice, Node
from portal.sandboxes.services import sandbox_request
from tests.conftest import signed_in
from tests.factories import ClusterFactory, make_node
from tests.rows import HTMX, make_sandbox


def test_researchers_and_leads_get_a_403_page(researcher_client, lead_client, fleet):
    for client in (researcher_client, lead_client):
        response = client.get("/fleet/")
        assert response.status_code == 403
        assert "The fleet page is for platform admins." in response.content.decode()


def test_admins_see_slices_at_their_start_with_profile_and_holder(
    admin_client, researcher, fleet, slice_request, run_jobs, whole_gpus, team
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    start = sandbox.allocations.get().mig_slice.start
    make_sandbox(owner=researcher, team=team, name="whole-box", gpu=whole_gpus[2])

    page = admin_client.get("/fleet/").content.decode()

    slice_html = page.split(f'at-{start + 1} span-1"')[1].split("</span>\n")[0]
    assert "<b>1g.10gb</b>" in slice_html
    assert f'href="/sandboxes/{sandbox.number}/">mig-small</a>' in slice_html
    assert "alice" in slice_html
    assert 'class="slice held at-' in page
    assert 'class="slice whole held at-1 span-8"' in page and "whole-box" in page
    assert page.count('class="slice whole free-whole at-1 span-8"') == 7  # the other whole H100s
    assert "MIG · 1 held · 6 free" in page and "MIG · not cut" in page
    assert "MIG mode: layouts" in page
    assert "1g.10gb: 8" in page  # every MIG GPU can still take a 1g.10gb


def test_a_gpu_out_of_placement_for_its_health_is_not_shown_free(admin_client, fleet, whole_gpus):
    Gpu.objects.filter(pk=whole_gpus[1].pk).update(health="xid", health_detail="XID 79")
    page = admin_client.get("/fleet/").content.decode()
    assert page.count('class="slice whole free-whole at-1 span-8"><small>free</small>') == 7
    assert "<small>not offered: " in page


def test_the_board_refreshes_itself_as_a_fragment(admin_client, fleet):
    page = admin_client.get("/fleet/", **HTMX).content.decode()

    assert page.lstrip().startswith('<section id="fleet-board" hx-get="/fleet/" hx-trigger="every 5s"')
    assert "<html" not in page


def test_the_fleet_page_queries_stay_bounded(admin_client, fleet, researcher, team, h100, whole_gpus):
    make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0])
    with CaptureQueriesContext(connection) as small:
        admin_client.get("/fleet/")
    for index in range(4):
        make_node(name=f"gpu-extra-{index}", gpu_type=h100, gpus=8, mig=False, cluster=fleet["whole"].cluster)
    for gpu in whole_gpus[1:]:
        make_sandbox(owner=researcher, team=team, gpu=gpu)

    with CaptureQueriesContext(connection) as large:
        response = admin_client.get("/fleet/")

    assert response.content.decode().count('class="gpu-bar"') == 48
    assert len(large) == len(small) <= 20


# Node discovery


def test_admin_starts_discovery_on_kubernetes_clusters(monkeypatch, admin_user, fleet):
    cluster = ClusterFactory(name="prod", driver="kubernetes", api_url="http://127.0.0.1:1")
    sent = []
    monkeypatch.setattr("portal.core.jobs.transaction.on_commit", lambda send: sent.append(send))
    response = signed_in(admin_user).post("/fleet/discover/", follow=True)
    assert response.status_code == 200
    assert "Node discovery started on prod" in response.content.decode()
    assert len(sent) == 1
    assert AuditEvent.objects.filter(action="cluster.discovery_requested", object_id=str(cluster.pk)).exists()


def test_researchers_cannot_start_discovery(researcher, fleet):
    response = signed_in(researcher).post("/fleet/discover/", follow=True)
    assert "Only platform admins may start node discovery." in response.content.decode()
    assert not AuditEvent.objects.filter(action="cluster.discovery_requested").exists()


def test_fleet_page_flags_nodes_with_unknown_products(admin_user, fleet):
    cluster = ClusterFactory(name="prod", driver="kubernetes")
    Node.objects.create(cluster=cluster, name="gpu-b200-a", product="NVIDIA-B200", unknown_product=True)
    page = signed_in(admin_user).get("/fleet/").content.decode()
    assert "gpu-b200-a: NVIDIA-B200" in page
    assert "Discover GPU nodes now" in page


def test_a_node_with_a_layout_set_outside_the_portal_is_flagged_and_an_admin_takes_it_over(
    admin_user, researcher, fleet, h100
):
    node = make_node(name="gpu-h100-c", gpu_type=h100, gpus=2, mig=True)
    Node.objects.filter(pk=node.pk).update(
        mig_managed=False, labels={"nvidia.com/mig.config": "all-balanced"}
    )
    admin = signed_in(admin_user)

    page = admin.get("/fleet/").content.decode()
    assert "MIG layout not managed by the portal: all-balanced" in page
    assert "MIG · slices not taken in" in page  # not drawn as free slots the portal could use
    assert f'action="/fleet/nodes/{node.pk}/take-over/"' in page

    refused = signed_in(researcher).post(f"/fleet/nodes/{node.pk}/take-over/")
    assert refused.status_code == 403 and "Only platform admins manage nodes." in refused.content.decode()
    assert not Node.objects.get(pk=node.pk).mig_managed

    page = admin.post(f"/fleet/nodes/{node.pk}/take-over/", follow=True).content.decode()
    assert "The portal now manages the MIG layout of gpu-h100-c" in page
    assert "MIG layout not managed by the portal" not in page
    assert Node.objects.get(pk=node.pk).mig_managed


def test_a_single_strategy_node_shows_why_it_cannot_be_taken_over(admin_user, fleet, h100):
    node = make_node(name="gpu-h100-s", gpu_type=h100, gpus=1, mig=True)
    Node.objects.filter(pk=node.pk).update(mig_managed=False, labels={"nvidia.com/mig.strategy": "single"})

    page = signed_in(admin_user).get("/fleet/").content.decode()

    assert "Single MIG strategy: the portal cuts slices per request and needs the mixed strategy." in page
    assert f"/fleet/nodes/{node.pk}/take-over/" not in page


def test_a_node_being_re_partitioned_says_so_and_for_how_long(admin_client, fleet):
    gpu = Gpu.objects.get(node=fleet["mig"], index=3)
    MigSlice.objects.create(gpu=gpu, profile="7g.80gb", start=0, size=8, compute_slices=7, state="creating")
    Node.objects.filter(pk=fleet["mig"].pk).update(
        mig_layout_last_error="the MIG manager has not finished after 150 checks"
    )

    page = admin_client.get("/fleet/").content.decode()

    assert "re-partitioning, 0\xa0minutes so far" in page
    assert "MIG · 0 held · 1 free · re-partitioning" in page
    assert "the MIG manager has not finished after 150 checks" in page


def test_a_node_whose_gpus_carry_different_layouts_cannot_be_taken_over(admin_user, fleet, h100):
    node = make_node(name="gpu-h100-m", gpu_type=h100, gpus=2, mig=True)
    Node.objects.filter(pk=node.pk).update(mig_managed=False, labels={"nvidia.com/mig.config": "custom"})
    first, second = Gpu.objects.filter(node=node).order_by("index")
    MigSlice.objects.create(gpu=first, profile="7g.80gb", start=0, size=8, compute_slices=7)
    MigSlice.objects.create(gpu=second, profile="3g.40gb", start=0, size=4, compute_slices=3)

    page = signed_in(admin_user).post(f"/fleet/nodes/{node.pk}/take-over/", follow=True).content.decode()

    assert "carry different layouts, and the cluster reports slices per node" in page
    assert not Node.objects.get(pk=node.pk).mig_managed


def test_gpu_memory_readings_read_with_thousands_separators(admin_client, fleet):
    from datetime import timedelta

    from django.utils import timezone

    from portal.fleet.models import Gpu, GpuMinute

    gpu = Gpu.objects.filter(node=fleet["whole"]).order_by("index").first()
    minute = (timezone.now() - timedelta(minutes=1)).replace(second=0, microsecond=0)
    GpuMinute.objects.create(
        gpu=gpu, device=gpu.uuid, minute=minute, samples=1, utilization_sum=50, utilization_samples=1,
        memory_used_mb_max=57344, memory_total_mb=81920,
    )  # fmt: skip
    page = admin_client.get("/fleet/").content.decode()
    assert "57,344/81,920 MB" in page


def test_the_clusters_mig_layout_state_reads_in_words(admin_client, fleet):
    from portal.fleet.models import Node

    Node.objects.filter(pk=fleet["mig"].pk).update(mig_config_state="success")
    Node.objects.filter(pk=fleet["whole"].pk).update(mig_config_state="failed")
    page = admin_client.get("/fleet/").content.decode()
    assert ">MIG layout applied</span>" in page and ">MIG success<" not in page
    assert 'class="tag warn" title="nvidia.com/mig.config.state: failed">MIG layout failed<' in page
