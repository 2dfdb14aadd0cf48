"""Idle deployments: warned, kept on the owner's word, or scaled to zero after the grace period
(endpoint and expiry kept, nothing billed), and scaled back to the replicas they had."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from portal.accounts.models import Notification
from portal.audit.models import AuditEvent
from portal.core.errors import Conflict, QuotaExceeded
from portal.deployments.idle import deployment_scale_back, deployments_idle_sweep
from portal.deployments.models import Serving
from portal.deployments.services import deployment_request, deployment_scale
from portal.fleet.models import Allocation, GpuMinute, SimulatedObject
from portal.workloads.models import Workload, WorkloadState
from portal.workloads.services import workload_keep, workloads_idle_sweep
from workers.reconcile.workloads import SCALED_TO_ZERO, reconcile_workload

pytestmark = pytest.mark.django_db
S = WorkloadState


def idle_minutes(deployment, start, count, utilization=0.5):
    for hold in Allocation.objects.filter(workload=deployment, released_at__isnull=True).select_related(
        "mig_slice"
    ):
        for n in range(count):
            GpuMinute.objects.create(
                gpu=hold.gpu, device=f"dev-{hold.pk}", mig_start=hold.mig_slice.start if hold.mig_slice else None,
                minute=(start + timedelta(minutes=n)).replace(second=0, microsecond=0),
                samples=4, utilization_sum=utilization * 4, utilization_samples=4,
            )  # fmt: skip


@pytest.fixture
def serving(run_jobs, fleet, catalog, team, researcher):
    team.idle_reclaim_minutes, team.idle_grace_minutes, team.idle_threshold_percent = 30, 15, 5
    team.save()
    deployment = run_jobs(lambda: deployment_request(user=researcher, team="vision", name="llama",
                                                     model="llama-3.1-8b-instruct"))  # fmt: skip
    now = timezone.now()
    Workload.objects.filter(pk=deployment.pk).update(started_at=now - timedelta(hours=1))
    deployment.refresh_from_db()
    assert deployment.state == S.RUNNING and deployment.replicas == 1
    idle_minutes(deployment, now - timedelta(minutes=31), 31)
    return deployment, now


def test_an_idle_deployment_is_warned_then_scaled_to_zero_and_back(run_jobs, serving, researcher):
    deployment, now = serving
    assert workloads_idle_sweep(now=now).warned == []  # the sandboxes' sweep leaves deployments alone
    assert deployments_idle_sweep(now=now).warned == [deployment.pk]
    assert Notification.objects.filter(user=researcher, message__contains="it is scaled to zero at").exists()
    idle_minutes(deployment, now, 16, utilization=1.0)
    later = now + timedelta(minutes=16)
    result = run_jobs(lambda: deployments_idle_sweep(now=later))
    assert result.reclaimed == [deployment.pk]
    deployment.refresh_from_db()
    assert (deployment.state, deployment.replicas, deployment.idle_parked_replicas) == (S.RUNNING, 0, 1)
    assert deployment.message == SCALED_TO_ZERO and deployment.idle_warned_at is None
    assert deployment.access  # its endpoint stays
    held = Allocation.objects.get(workload=deployment)
    assert held.ended_at == later and held.released_at is not None  # billing stopped, GPU freed
    assert not SimulatedObject.objects.filter(namespace=deployment.namespace, kind="Deployment").exists()
    assert SimulatedObject.objects.filter(namespace=deployment.namespace, kind="Service").exists()
    assert Serving.objects.get(workload=deployment).ready_replicas == 0
    actions = list(AuditEvent.objects.filter(object_id=str(deployment.pk)).values_list("action", flat=True))
    assert "deployment.idle_warned" in actions and "deployment.reclaimed" in actions
    assert Notification.objects.filter(user=researcher, message__contains="Scale it back").exists()
    assert (
        not Notification.objects.filter(user=researcher, message__contains="is running")
        .exclude(created_at__lt=later)
        .exists()
    )  # scaled to zero is not news of a running deployment
    reconcile_workload(deployment.pk)  # watched while at zero: still fine, nothing asked of the cluster
    deployment.refresh_from_db()
    assert deployment.state == S.RUNNING and deployment.message == SCALED_TO_ZERO
    assert deployments_idle_sweep(now=later + timedelta(hours=1)).warned == []  # no GPUs: never idle

    run_jobs(lambda: deployment_scale_back(user=researcher, deployment_id=deployment.pk))
    deployment.refresh_from_db()
    assert (deployment.state, deployment.replicas, deployment.idle_parked_replicas) == (S.RUNNING, 1, None)
    assert Allocation.objects.filter(workload=deployment, released_at__isnull=True).count() == 1
    with pytest.raises(Conflict):
        deployment_scale_back(user=researcher, deployment_id=deployment.pk)


def test_keeping_an_idle_deployment_resets_its_clock(serving, researcher):
    deployment, now = serving
    deployments_idle_sweep(now=now)
    workload_keep(
        user=researcher, workload_id=deployment.pk, kind="deployment", now=now + timedelta(minutes=1)
    )
    deployment.refresh_from_db()
    assert deployment.idle_warned_at is None
    assert deployments_idle_sweep(now=now + timedelta(minutes=20)).reclaimed == []
    assert "deployment.kept" in AuditEvent.objects.values_list("action", flat=True)


def test_scaling_to_zero_by_hand_and_up_again_checks_quota_at_todays_price(
    run_jobs, serving, researcher, team
):
    deployment, _ = serving
    run_jobs(lambda: deployment_scale(user=researcher, deployment_id=deployment.pk, replicas=0))
    deployment.refresh_from_db()
    assert (deployment.state, deployment.replicas, deployment.idle_parked_replicas) == (S.RUNNING, 0, None)
    team.quota_gpus = Decimal("0.2")  # less than one 3g.40gb replica (3/7 of a GPU)
    team.save()
    with pytest.raises(QuotaExceeded):
        deployment_scale(user=researcher, deployment_id=deployment.pk, replicas=1)
    deployment.refresh_from_db()
    assert deployment.replicas == 0 and not Allocation.objects.filter(
        workload=deployment, ended_at__isnull=True
    )


def test_the_page_and_the_api_warn_keep_and_scale_back(run_jobs, serving, researcher, client):
    from rest_framework.test import APIClient

    deployment, now = serving
    deployments_idle_sweep(now=now)
    client.force_login(researcher)
    page = client.get(f"/deployments/{deployment.number}/").content.decode()
    assert 'id="idle-warning"' in page and "scaled to\n      zero at" in page and ">Keep it</button>" in page
    api = APIClient()
    api.force_authenticate(researcher)
    warned = api.get(f"/api/v1/deployments/{deployment.number}").json()  # what the page says, a client reads
    assert warned["idle_warned_at"] is not None and "keep" in warned["allowed_actions"]
    reclaim_at = datetime.fromisoformat(warned["idle_reclaim_at"].replace("Z", "+00:00"))
    assert reclaim_at - datetime.fromisoformat(warned["idle_warned_at"].replace("Z", "+00:00")) == timedelta(
        minutes=15
    )
    assert client.post(f"/deployments/{deployment.number}/keep/").status_code == 302
    deployment.refresh_from_db()
    assert deployment.idle_warned_at is None

    Workload.objects.filter(pk=deployment.pk).update(
        idle_warned_at=now - timedelta(hours=1), idle_kept_at=None
    )
    run_jobs(lambda: deployments_idle_sweep(now=now + timedelta(minutes=2)))
    deployment.refresh_from_db()
    assert deployment.replicas == 0
    page = client.get(f"/deployments/{deployment.number}/").content.decode()
    assert 'id="scaled-to-zero"' in page and "Scale back to 1 replica</button>" in page
    assert "scaled to zero" in page  # the replicas fact
    shown = api.get(f"/api/v1/deployments/{deployment.number}").json()
    assert (shown["replicas"], shown["ready_replicas"], shown["idle_parked_replicas"]) == (0, 0, 1)
    assert "scale_back" in shown["allowed_actions"] and "keep" not in shown["allowed_actions"]
    assert shown["idle_warned_at"] is None and shown["idle_reclaim_at"] is None
    back = run_jobs(lambda: api.post(f"/api/v1/deployments/{deployment.number}/scale-back"))
    assert back.status_code == 200 and back.json()["replicas"] == 1
    assert api.post(f"/api/v1/deployments/{deployment.number}/scale-back").status_code == 409
    assert api.post(f"/api/v1/deployments/{deployment.number}/keep").status_code == 200


def test_scaling_a_warned_deployment_by_hand_is_its_owners_word_on_it(run_jobs, serving, researcher):
    """Scaled to zero by hand while warned, then up again: no reclaim follows without a new warning."""
    deployment, now = serving
    deployments_idle_sweep(now=now)
    run_jobs(lambda: deployment_scale(user=researcher, deployment_id=deployment.pk, replicas=0))
    deployment.refresh_from_db()
    assert deployment.idle_warned_at is None and deployment.idle_kept_at is not None
    run_jobs(lambda: deployment_scale(user=researcher, deployment_id=deployment.pk, replicas=1))
    assert deployments_idle_sweep(now=now + timedelta(minutes=20)).reclaimed == []


def test_idle_reclaim_withdraws_a_scale_up_that_waits_so_approving_it_later_bills_nothing(
    run_jobs, serving, researcher, lead
):
    from portal.approvals.services import approval_decide
    from portal.workloads.models import Approval

    deployment, now = serving
    deployment_scale(user=researcher, deployment_id=deployment.pk, replicas=3)  # beyond policy: waits
    waiting = Approval.objects.get(workload=deployment, kind=Approval.Kind.SCALE)
    assert deployments_idle_sweep(now=now).warned == [deployment.pk]
    idle_minutes(deployment, now, 16, utilization=1.0)
    assert run_jobs(lambda: deployments_idle_sweep(now=now + timedelta(minutes=16))).reclaimed == [
        deployment.pk
    ]
    waiting.refresh_from_db()
    assert waiting.state == Approval.State.CANCELLED
    assert waiting.comment == "Withdrawn: the deployment was scaled to 0 instead."
    with pytest.raises(Conflict):
        approval_decide(user=lead, approval_id=waiting.pk, approve=True)
    assert Workload.objects.get(pk=deployment.pk).replicas == 0
    assert not Allocation.objects.filter(workload=deployment, ended_at__isnull=True).exists()
