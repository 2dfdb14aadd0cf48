"""The node agent reporting to the portal: its readings, posted with a node credential, become
per-minute rows and GPU health; a sandbox's utilization series comes back from the API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from portal.accounts.services import token_create
from portal.audit.models import AuditEvent
from portal.fleet.models import Gpu, GpuMinute
from tests.agent.fakenvml import FakeGpu, FakeMig, FakeNvml
from tests.factories import UserFactory
from tests.rows import make_sandbox
from workers.agent.__main__ import main
from workers.agent.reading import read_node
from workers.agent.report import ReadingBuffer, Reporter

pytestmark = pytest.mark.django_db
MINUTE = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture
def agent_token(db) -> str:
    agent = UserFactory(username="node-agent")
    agent.user_permissions.add(Permission.objects.get(codename="report_telemetry"))
    return token_create(user=agent, name="gpu-h100-a")[1]


def readings_of(nvml: FakeNvml, node: str, *moments: datetime) -> list[dict]:
    import dataclasses

    nvml.nvmlInit()
    out = []
    for moment in moments:
        reading = dataclasses.asdict(read_node(nvml, node, gpm_interval=0))
        reading["taken_at"] = moment.timestamp()
        out.append(reading)
    return out


def test_readings_become_minutes_and_only_an_agents_credential_may_post_them(fleet, agent_token, alice):
    nvml = FakeNvml([FakeGpu(uuid="GPU-gpu-h100-a-0", utilization=80, memory_used_mb=1000, power_mw=300_000)])
    batch = readings_of(nvml, "gpu-h100-a", MINUTE, MINUTE + timedelta(seconds=30))
    nvml.gpus[0].utilization = 20
    batch += readings_of(nvml, "gpu-h100-a", MINUTE + timedelta(seconds=45))
    assert alice.post("/api/v1/telemetry/readings", {"readings": batch}, format="json").status_code == 403
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_token}")
    answer = agent.post("/api/v1/telemetry/readings", {"readings": batch, "dropped": 3}, format="json")
    assert answer.status_code == 202 and answer.json() == {
        "readings": 3,
        "devices": 1,
        "unknown_nodes": [],
        "dropped": 3,
    }
    (row,) = GpuMinute.objects.all()
    assert (row.device, row.minute, row.samples, row.utilization) == ("GPU-gpu-h100-a-0", MINUTE, 3, 60.0)
    assert (row.memory_used_mb_max, row.power_watts_sum) == (1000, 900.0)
    assert agent.post("/api/v1/telemetry/readings", {"readings": "x"}, format="json").status_code == 400


def test_a_lost_gpu_and_xid_errors_are_recorded_once_and_admins_told(fleet, agent_token, admin_user):
    from portal.accounts.models import Notification
    from portal.fleet.telemetry import telemetry_record

    nvml = FakeNvml([FakeGpu(uuid="GPU-gpu-h100-a-0"), FakeGpu(uuid="GPU-gpu-h100-a-1", lost=True)])
    for _ in range(2):
        telemetry_record(readings=readings_of(nvml, "gpu-h100-a", MINUTE))
    lost = Gpu.objects.get(uuid="GPU-gpu-h100-a-1")
    assert lost.health == "lost" and lost.health_detail == "NVML: GPU is lost" and lost.seen_at == MINUTE
    assert AuditEvent.objects.filter(action="gpu.lost").count() == 1  # once, not per reading
    assert Notification.objects.filter(user=admin_user, message__contains="GPU is lost").count() == 1
    reading = readings_of(nvml, "gpu-h100-a", MINUTE)
    reading[0]["gpus"][0]["xid_events"] = [79]
    telemetry_record(readings=reading)
    assert Gpu.objects.get(uuid="GPU-gpu-h100-a-0").health_detail == "XID 79"
    assert telemetry_record(readings=[{"node": "nowhere", "taken_at": 0, "gpus": []}]).unknown_nodes == [
        "nowhere"
    ]


def test_a_sandboxs_utilization_series_from_its_slice(fleet, researcher, team, alice, agent_token):
    from portal.fleet.models import MigSlice
    from portal.fleet.telemetry import telemetry_record
    from tests.rows import make_hold

    gpu = Gpu.objects.get(uuid="GPU-gpu-h100-b-0")
    mig = MigSlice.objects.create(gpu=gpu, profile="1g.10gb", start=6, size=1, compute_slices=1)
    sandbox = make_sandbox(owner=researcher, team=team, gpu_type=gpu.gpu_type, mig_profile="1g.10gb")
    hold = make_hold(gpu=gpu, user=researcher, team=team, workload=sandbox, mig_profile="1g.10gb",
                     started_at=MINUTE - timedelta(hours=1), ended_at=None, share=(1, 7))  # fmt: skip
    hold.mig_slice = mig
    hold.save()
    nvml = FakeNvml([FakeGpu(uuid="GPU-gpu-h100-b-0", mig_enabled=True, migs=[
        FakeMig(gi_id=9, profile_index=0, start=6, size=1, uuid="MIG-x", memory_used_mb=5000, utilization=40.0),
        FakeMig(gi_id=2, profile_index=2, start=0, size=4, uuid="MIG-y", memory_used_mb=100, utilization=99.0),
    ])])  # fmt: skip
    telemetry_record(readings=readings_of(nvml, "gpu-h100-b", MINUTE, MINUTE + timedelta(minutes=1)))
    series = alice.get(
        f"/api/v1/sandboxes/{sandbox.number}/utilization",
        {
            "from": (MINUTE - timedelta(minutes=5)).isoformat(),
            "to": (MINUTE + timedelta(minutes=5)).isoformat(),
        },
    ).json()
    assert [(p["utilization"], p["memory_used_mb"]) for p in series] == [
        (40.0, 5000),
        (40.0, 5000),
    ]  # its slice only
    hourly = alice.get(f"/api/v1/sandboxes/{sandbox.number}/utilization",
                       {"from": (MINUTE - timedelta(hours=1)).isoformat(), "to": (MINUTE + timedelta(hours=1)).isoformat(), "step": 3600}).json()  # fmt: skip
    assert len(hourly) == 1 and hourly[0]["utilization"] == 40.0
    bad = alice.get(f"/api/v1/sandboxes/{sandbox.number}/utilization", {"step": "7"})
    assert bad.status_code == 400


def test_the_agent_reports_to_a_running_portal(
    live_server, transactional_db, fleet, agent_token, monkeypatch
):
    nvml = FakeNvml([FakeGpu(uuid="GPU-gpu-h100-a-0", utilization=55)])
    monkeypatch.setenv("GPU_PORTAL_AGENT_TOKEN", agent_token)
    code = main(
        ["--portal", live_server.url, "--node", "gpu-h100-a", "--iterations", "2", "--interval", "0"],
        nvml=nvml,
    )
    assert code == 0
    assert sum(row.samples for row in GpuMinute.objects.filter(device="GPU-gpu-h100-a-0")) == 2


def test_a_portal_that_is_down_keeps_the_readings_for_later():
    nvml = FakeNvml([FakeGpu(uuid="GPU-1")])
    nvml.nvmlInit()
    buffer = ReadingBuffer(capacity=10)
    buffer.add(read_node(nvml, "n", gpm_interval=0))
    assert Reporter("http://127.0.0.1:9", "t", timeout=0.5).flush(buffer) == 0  # nothing listens
    assert len(buffer.readings) == 1


def test_the_simulated_cluster_reports_like_agents_so_the_page_has_a_chart(
    fleet, researcher, team, researcher_client, alice
):
    from django.utils import timezone

    from workers.reconcile.telemetry_sim import simulate_telemetry

    gpu = Gpu.objects.get(uuid="GPU-gpu-h100-a-0")
    sandbox = make_sandbox(owner=researcher, team=team, gpu=gpu, hours_ago=0.5)
    now = timezone.now()
    for minutes in (3, 2, 1):
        assert (
            simulate_telemetry(now=(now - timedelta(minutes=minutes)).timestamp()) == 16
        )  # every simulated GPU
    series = alice.get(f"/api/v1/sandboxes/{sandbox.number}/utilization").json()
    assert len(series) == 3 and all(p["utilization"] is not None and p["memory_used_mb"] > 0 for p in series)
    idle = GpuMinute.objects.filter(device="GPU-gpu-h100-a-1").first()
    assert idle is not None and idle.utilization == 0.0 and idle.memory_used_mb_max == 0  # nothing holds it
    page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert f'data-series-url="/api/v1/sandboxes/{sandbox.number}/utilization?from=' in page
    assert "vendor/uplot.iife.min.js" in page
    import time_machine

    from tests.conftest import signed_in
    from tests.factories import UserFactory

    ops = signed_in(UserFactory(username="ops", is_staff=True, is_superuser=True))
    with time_machine.travel(now, tick=False):  # the board reads the minute before `now`
        board = ops.get("/fleet/").content.decode()
    assert board.count('<span class="reading" title="the node agent\'s last minute">') == 8  # the whole GPUs
    assert "0 % · 0/81,920 MB" in board  # an idle one, as read


def test_a_deployments_replicas_have_their_series_and_page_chart(
    fleet, researcher, team, alice, researcher_client
):
    from django.utils import timezone

    from portal.workloads.models import WorkloadKind
    from workers.reconcile.telemetry_sim import simulate_telemetry

    gpu = Gpu.objects.get(uuid="GPU-gpu-h100-a-2")
    deployment = make_sandbox(
        owner=researcher, team=team, gpu=gpu, hours_ago=0.5, kind=WorkloadKind.DEPLOYMENT
    )
    now = timezone.now()
    simulate_telemetry(now=(now - timedelta(minutes=2)).timestamp())
    series = alice.get(f"/api/v1/deployments/{deployment.number}/utilization").json()
    assert len(series) == 1 and series[0]["memory_used_mb"] > 0
    assert (
        alice.get(f"/api/v1/deployments/{deployment.number}/utilization", {"from": "yesterday"}).status_code
        == 400
    )


def test_readings_fold_into_hours_too_and_old_rows_are_pruned(fleet):
    from portal.fleet.models import GpuHour
    from portal.fleet.telemetry import telemetry_prune, telemetry_record

    nvml = FakeNvml([FakeGpu(uuid="GPU-gpu-h100-a-0", utilization=30)])
    telemetry_record(readings=readings_of(nvml, "gpu-h100-a", MINUTE, MINUTE + timedelta(minutes=20)))
    (hour,) = GpuHour.objects.all()
    assert (hour.hour, hour.samples, hour.utilization) == (MINUTE, 2, 30.0)
    assert GpuMinute.objects.count() == 2
    gone = telemetry_prune(now=MINUTE + timedelta(days=15), minute_days=14, hour_days=400)
    assert gone == (2, 0) and GpuHour.objects.count() == 1
    assert telemetry_prune(now=MINUTE + timedelta(days=401), minute_days=14, hour_days=400) == (0, 1)


def test_a_gpu_with_xid_errors_leaves_placement_until_an_admin_clears_it(fleet, admin_user, admin_client):
    from portal.fleet.selectors import gpu_snapshot

    gpu = Gpu.objects.get(uuid="GPU-gpu-h100-a-0")
    Gpu.objects.filter(pk=gpu.pk).update(health="xid", health_detail="XID 79")
    assert gpu.pk not in {view.gpu_id for view in gpu_snapshot()}
    answer = admin_client.post(
        "/admin/fleet/gpu/", {"action": "clear_health", "_selected_action": [gpu.pk]}, follow=True
    )
    assert "1 GPU(s) back in placement." in answer.content.decode()
    assert Gpu.objects.get(pk=gpu.pk).health == "ok"
    assert gpu.pk in {view.gpu_id for view in gpu_snapshot()}
    assert AuditEvent.objects.filter(action="gpu.cleared", detail__contains="XID 79").exists()
    # the node's page lists its GPUs' health read-only: only the audited action clears it
    node_page = admin_client.get(f"/admin/fleet/node/{gpu.node_id}/change/").content.decode()
    assert 'name="gpus-0-index"' in node_page and 'name="gpus-0-health"' not in node_page
