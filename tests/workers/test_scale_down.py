"""Scaling a deployment down frees the scaled-away GPUs once the reconciler has removed their
replicas, also outside any surrounding transaction, as the worker runs it. On PostgreSQL the
release used to lock the GPU type outside a transaction and fail on every tick; SQLite and a test
wrapped in a transaction both hid it, hence `transaction=True`."""

from __future__ import annotations

import pytest

from portal.approvals.services import approval_decide
from portal.catalog.demo import catalog_seed
from portal.deployments.services import deployment_request, deployment_scale
from portal.fleet.models import Allocation
from portal.workloads.models import Approval, Workload, WorkloadState
from workers.reconcile.workloads import reconcile_workload

pytestmark = pytest.mark.django_db(transaction=True)


def test_scaling_down_frees_the_scaled_away_gpu_when_the_reconciler_runs_outside_a_transaction(
    monkeypatch, fleet, researcher, lead
):
    catalog_seed()
    workload = deployment_request(
        user=researcher,
        team="vision",
        name="llama8b",
        model="llama-3.1-8b-instruct",
        gpu_type="h100-80gb",
        count=1,
        replicas=2,
    )
    approval_decide(user=lead, approval_id=Approval.objects.get(workload=workload).pk, approve=True)
    assert Workload.objects.get(pk=workload.pk).state == WorkloadState.RUNNING  # its jobs ran on commit

    # The scale's own reconcile message is lost; the periodic reconcile picks the row up.
    monkeypatch.setattr("portal.deployments.services.enqueue", lambda *args, **kwargs: None)
    deployment_scale(user=researcher, deployment_id=workload.pk, replicas=1)
    scaled_away = Allocation.objects.get(workload=workload, replica=1)
    assert scaled_away.ended_at is not None and scaled_away.released_at is None

    reconcile_workload(workload.pk)

    scaled_away.refresh_from_db()
    assert scaled_away.released_at is not None
    assert not Allocation.objects.filter(gpu=scaled_away.gpu, released_at__isnull=True).exists()
    live = Allocation.objects.filter(workload=workload, released_at__isnull=True)
    assert list(live.values_list("replica", flat=True)) == [0]
    assert Workload.objects.get(pk=workload.pk).state == WorkloadState.RUNNING
