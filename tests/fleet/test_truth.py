"""The records follow what the node agents read: MIG slices as the GPUs have them, holders on the
devices their pods really got; what cannot be corrected is shown and admins are told."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone
from rest_framework.test import APIClient

from portal.accounts.models import Notification
from portal.accounts.services import token_create
from portal.audit.models import AuditEvent
from portal.fleet.models import Allocation, Gpu, MigSlice, Node
from portal.fleet.telemetry import telemetry_record
from tests.factories import UserFactory
from tests.rows import make_hold, make_sandbox

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent_token_client(db) -> APIClient:
    agent = UserFactory(username="node-agent")
    agent.user_permissions.add(Permission.objects.get(codename="report_telemetry"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=agent, name='node')[1]}")
    return client


def mig(start: int, profile: str, size: int, *pods: str) -> dict:
    return {"uuid": f"MIG-{profile}-{start}-{size}", "profile": profile, "start": start, "size": size,
            "pods": [{"namespace": ns, "pod": "p", "container": "c", "resource": "r"} for ns in pods]}  # fmt: skip


def gpu(index: int, node: str = "gpu-h100-b", migs: list[dict] | None = None, pods=None) -> dict:
    item = {"index": index, "uuid": f"GPU-{node}-{index}", "mig_enabled": migs is not None}
    if migs is not None:
        item["mig_devices"] = migs
    else:
        item["pods"] = None if pods is None else [{"namespace": ns, "pod": "p"} for ns in pods]
    return item


def post(node: str, gpus: list[dict], *, taken_at: float | None = None) -> None:
    telemetry_record(readings=[{"node": node, "taken_at": taken_at or time.time(), "gpus": gpus}])


def cut(index: int, *slices: tuple[str, int, int]) -> list[MigSlice]:
    target = Gpu.objects.get(node__name="gpu-h100-b", index=index)
    return [
        MigSlice.objects.create(gpu=target, profile=p, start=s, size=z, compute_slices=1)
        for p, s, z in slices
    ]


def layout(index: int) -> list[tuple[str, int]]:
    return list(
        MigSlice.objects.filter(gpu__node__name="gpu-h100-b", gpu__index=index).values_list(
            "profile", "start"
        )
    )


def hold_slice(record: MigSlice, owner, team, namespace: str):
    sandbox = make_sandbox(owner=owner, team=team, gpu_type=record.gpu.gpu_type, mig_profile=record.profile,
                           namespace=namespace)  # fmt: skip
    allocation = make_hold(gpu=record.gpu, user=owner, team=team, workload=sandbox, mig_profile=record.profile,
                           started_at=timezone.now() - timedelta(hours=1), ended_at=None, share=(1, 7))  # fmt: skip
    allocation.mig_slice = record
    allocation.save()
    return sandbox, allocation


def test_a_guessed_layout_becomes_the_one_the_gpu_has(fleet, admin_user):
    cut(0, ("1g.10gb", 0, 1), ("1g.10gb", 1, 1), ("3g.40gb", 4, 4))  # what discovery guessed from counts
    post("gpu-h100-b", [gpu(0, migs=[mig(0, "3g.40gb", 4), mig(4, "1g.10gb", 1), mig(5, "1g.10gb", 1)])])
    assert sorted(layout(0)) == [("1g.10gb", 4), ("1g.10gb", 5), ("3g.40gb", 0)]
    target = Gpu.objects.get(node__name="gpu-h100-b", index=0)
    assert target.mismatch == "" and target.corrected_at is not None
    assert "dropped 1g.10gb@0" in target.correction and "recorded 3g.40gb@0" in target.correction
    assert AuditEvent.objects.filter(action="fleet.corrected", object_id=str(target.pk)).count() == 1
    node = Node.objects.get(name="gpu-h100-b")
    assert node.mig_layout_wanted == node.mig_layout_applied + 1  # the node's config follows the GPUs
    assert not Notification.objects.filter(user=admin_user).exists()  # corrected: nothing to do


def test_an_agreeing_reading_changes_nothing(fleet, django_assert_max_num_queries):
    cut(0, ("3g.40gb", 0, 4))
    with django_assert_max_num_queries(20):
        post("gpu-h100-b", [gpu(0, migs=[mig(0, "3g.40gb", 4)])] + [gpu(i, migs=[]) for i in range(1, 8)])
    assert layout(0) == [("3g.40gb", 0)] and not AuditEvent.objects.filter(action="fleet.corrected").exists()
    assert Node.objects.get(name="gpu-h100-b").mig_layout_wanted == 0


def test_a_holder_moves_to_the_slice_its_pod_really_got(fleet, researcher, team):
    (recorded,) = cut(0, ("1g.10gb", 6, 1))
    (real,) = cut(1, ("1g.10gb", 3, 1))
    _sandbox, allocation = hold_slice(recorded, researcher, team, "gp-alice-1")
    post(
        "gpu-h100-b", [gpu(0, migs=[mig(6, "1g.10gb", 1)]), gpu(1, migs=[mig(3, "1g.10gb", 1, "gp-alice-1")])]
    )
    allocation.refresh_from_db()
    assert (allocation.gpu.index, allocation.mig_slice_id, allocation.released_at) == (1, real.pk, None)
    assert layout(0) == [("1g.10gb", 6)]  # the slice it left is there, and free
    assert "holds 1g.10gb@3 here" in Gpu.objects.get(node__name="gpu-h100-b", index=1).correction


def test_two_holders_swap_whole_gpus_without_breaking_one_hold_per_gpu(fleet, researcher, team):
    first, second = (Gpu.objects.get(node__name="gpu-h100-a", index=i) for i in (0, 1))
    a = make_sandbox(owner=researcher, team=team, gpu=first, namespace="gp-a")
    b = make_sandbox(owner=researcher, team=team, gpu=second, namespace="gp-b")
    post("gpu-h100-a", [gpu(0, "gpu-h100-a", pods=["gp-b"]), gpu(1, "gpu-h100-a", pods=["gp-a"])])
    held = dict(Allocation.objects.filter(released_at__isnull=True).values_list("workload_id", "gpu__index"))
    assert held == {a.pk: 1, b.pk: 0}


def test_what_cannot_be_corrected_is_shown_and_admins_are_told_once(
    fleet, researcher, team, admin_user, client
):
    (recorded,) = cut(2, ("3g.40gb", 4, 4))
    hold_slice(recorded, researcher, team, "gp-alice-2")
    reading = [
        gpu(2, migs=[mig(0, "7g.80gb", 8)]),
        gpu(3, "gpu-h100-b", migs=[mig(0, "1g.10gb", 1, "someone-else")]),
    ]
    post("gpu-h100-b", reading)
    post("gpu-h100-b", reading)
    lacking, foreign = (Gpu.objects.get(node__name="gpu-h100-b", index=i) for i in (2, 3))
    assert "records hold 3g.40gb@4, which the GPU does not have" in lacking.mismatch
    assert "7g.80gb@0 where the records hold another" in lacking.mismatch
    assert layout(2) == [("3g.40gb", 4)]  # a held record is never dropped on a reading
    assert "in use by someone-else/p, not placed by the portal" in foreign.mismatch
    assert Notification.objects.filter(user=admin_user).count() == 2  # one per GPU, not per reading
    client.force_login(admin_user)
    page = client.get("/fleet/").content.decode()
    assert "records hold 3g.40gb@4" in page and "not placed by the portal" in page
    # the GPU comes to agree (once the node's config has followed it): the mismatch clears
    node = Node.objects.get(name="gpu-h100-b")
    Node.objects.filter(pk=node.pk).update(mig_layout_applied=node.mig_layout_wanted)
    post("gpu-h100-b", [gpu(2, migs=[mig(4, "3g.40gb", 4, "gp-alice-2")]), gpu(3, migs=[])])
    lacking.refresh_from_db()
    assert lacking.mismatch == ""


def test_without_the_kubelets_word_no_holder_moves(fleet, researcher, team):
    (recorded,) = cut(0, ("1g.10gb", 6, 1))
    cut(1, ("1g.10gb", 3, 1))
    _, allocation = hold_slice(recorded, researcher, team, "gp-alice-1")
    unknown = mig(3, "1g.10gb", 1)
    unknown["pods"] = None
    mine = mig(6, "1g.10gb", 1)
    mine["pods"] = None
    post("gpu-h100-b", [gpu(0, migs=[mine]), gpu(1, migs=[unknown])])
    allocation.refresh_from_db()
    assert allocation.gpu.index == 0 and allocation.mig_slice_id == recorded.pk


def test_a_layout_change_in_flight_or_an_old_reading_corrects_nothing(fleet):
    cut(0, ("1g.10gb", 0, 1))
    post("gpu-h100-b", [gpu(0, migs=[])], taken_at=time.time() - 600)  # an agent's backlog
    assert layout(0) == [("1g.10gb", 0)]
    Node.objects.filter(name="gpu-h100-b").update(mig_layout_wanted=3, mig_layout_applied=2)
    post("gpu-h100-b", [gpu(0, migs=[])])
    assert layout(0) == [("1g.10gb", 0)]
    assert Gpu.objects.get(node__name="gpu-h100-b", index=0).mismatch == ""


def test_a_mig_mode_the_records_do_not_know_is_a_mismatch(fleet):
    post("gpu-h100-a", [gpu(0, "gpu-h100-a", migs=[])])
    assert "MIG mode is on" in Gpu.objects.get(node__name="gpu-h100-a", index=0).mismatch


def test_a_malformed_device_corrects_nothing_on_a_guess(fleet):
    cut(0, ("1g.10gb", 0, 1))
    post("gpu-h100-b", [gpu(0, migs=[{"uuid": "MIG-x", "profile": "3g.40gb", "start": "zero", "size": 4}])])
    assert layout(0) == [("1g.10gb", 0)]


def test_on_a_dra_cluster_slices_follow_claims_and_a_reading_only_notes(fleet):
    Node.objects.get(name="gpu-h100-b").cluster.__class__.objects.update(mig_mode="dynamic")
    cut(0, ("1g.10gb", 0, 1))
    post("gpu-h100-b", [gpu(0, migs=[mig(2, "2g.20gb", 2)])])
    assert layout(0) == [("1g.10gb", 0)]


def test_the_simulated_cluster_reads_as_its_records_say(fleet, researcher, team):
    from workers.reconcile.telemetry_sim import simulate_telemetry

    _free, held = cut(0, ("3g.40gb", 0, 4), ("3g.40gb", 4, 4))
    hold_slice(held, researcher, team, "gp-alice-9")
    make_sandbox(
        owner=researcher, team=team, gpu=Gpu.objects.get(node__name="gpu-h100-a", index=5), namespace="gp-w"
    )
    simulate_telemetry()
    assert layout(0) == [("3g.40gb", 0), ("3g.40gb", 4)]
    assert not Gpu.objects.exclude(mismatch="").exists()
    assert not AuditEvent.objects.filter(action="fleet.corrected").exists()


def test_a_reading_without_a_time_is_refused_and_odd_figures_are_skipped(fleet, agent_token_client):
    answer = agent_token_client.post(
        "/api/v1/telemetry/readings", {"readings": [{"node": "gpu-h100-a", "taken_at": "soon", "gpus": []}]},
        format="json",
    )  # fmt: skip
    assert answer.status_code == 400 and "taken_at" in answer.json()["error"]["message"]
    odd = {"node": "gpu-h100-a", "taken_at": time.time(), "gpus": [
        {"index": "zero", "uuid": "GPU-gpu-h100-a-0", "utilization_percent": "high", "memory_used_mb": [1]},
        {"uuid": "GPU-gpu-h100-b-0", "mig_enabled": True, "mig_devices": [{"uuid": "M", "start": "x"}, 7]},
    ]}  # fmt: skip
    assert (
        agent_token_client.post("/api/v1/telemetry/readings", {"readings": [odd]}, format="json").status_code
        == 202
    )


def test_a_reading_that_cannot_be_trusted_corrects_nothing_and_never_fails(
    fleet, researcher, team, agent_token_client
):
    (recorded,) = cut(0, ("1g.10gb", 6, 1))
    cut(1, ("1g.10gb", 0, 1), ("3g.40gb", 4, 4))
    _, allocation = hold_slice(recorded, researcher, team, "gp-alice-1")
    half_bad = [
        mig(3, "1g.10gb", 1, "gp-alice-1"),
        {"uuid": "MIG-x", "profile": "1g.10gb", "start": -1, "size": 1},
    ]
    unknown_mode = {"index": 2, "uuid": "GPU-gpu-h100-b-2", "mig_enabled": None}
    readings = [
        [gpu(0, migs=[mig(6, "1g.10gb", 1)]), gpu(1, migs=half_bad)],  # a good device, then a bad one
        [gpu(1, migs=[mig(9, "1g.10gb", 1)]), gpu(1, migs=[mig(6, "3g.40gb", 4)])],  # no GPU has these
        [unknown_mode],  # NVML could not tell the MIG mode: not "whole"
        [{"uuid": "GPU-gpu-h100-b-1", "mig_enabled": True, "mig_devices": 3, "xid_events": ["x"]}],
    ]
    for gpus in readings:
        answer = agent_token_client.post(
            "/api/v1/telemetry/readings",
            {"readings": [{"node": "gpu-h100-b", "taken_at": time.time(), "gpus": gpus}]},
            format="json",
        )
        assert answer.status_code == 202, gpus
    assert agent_token_client.post("/api/v1/telemetry/readings", {"readings": [{"node": "gpu-h100-b",
        "taken_at": time.time(), "gpus": 5}]}, format="json").status_code == 202  # fmt: skip
    allocation.refresh_from_db()
    assert (allocation.gpu.index, allocation.mig_slice_id) == (0, recorded.pk)  # not moved onto GPU 1
    assert sorted(layout(1)) == [("1g.10gb", 0), ("3g.40gb", 4)]
    assert not AuditEvent.objects.filter(action="fleet.corrected").exists()


def test_a_reading_from_the_future_is_not_trusted_either(fleet):
    cut(0, ("1g.10gb", 0, 1))
    post("gpu-h100-b", [gpu(0, migs=[])], taken_at=time.time() + 600)
    assert layout(0) == [("1g.10gb", 0)]
