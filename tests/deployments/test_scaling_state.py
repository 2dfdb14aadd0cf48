"""A running deployment being scaled keeps serving: it shows as running, "scaling 1 -> 0" (or up),
its progress line does not go back, and its start and expiry stay."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.deployments.services import deployment_request, deployment_scale
from portal.workloads.models import Workload, WorkloadState
from portal.workloads.selectors import progress_steps
from workers.reconcile.workloads import reconcile_workload

pytestmark = pytest.mark.django_db
S = WorkloadState


@pytest.fixture
def running(run_jobs, fleet, catalog, researcher):
    workload = run_jobs(
        lambda: deployment_request(
            user=researcher, team="vision", name="llama8b", model="llama-3.1-8b-instruct", ttl_hours=8
        )
    )
    workload.refresh_from_db()
    assert workload.state == S.RUNNING and workload.replicas == 1
    return workload


def test_scaling_a_running_deployment_keeps_it_running_with_scaling_shown(running, researcher):
    started, expires = running.started_at, running.expires_at
    deployment_scale(user=researcher, deployment_id=running.pk, replicas=0)
    workload = Workload.objects.get(pk=running.pk)
    assert workload.state == S.PROVISIONING  # for the reconciler
    assert workload.shown_state == S.RUNNING and workload.is_scaling and workload.scaling_from == 1
    labels = {step.label: step.status for step in progress_steps(workload, None)}
    assert labels["Running"] == "current" and labels["Provisioning"] == "done"

    reconcile_workload(workload.pk)
    workload.refresh_from_db()
    assert workload.state == S.RUNNING and workload.scaling_from is None
    assert workload.started_at == started and workload.expires_at == expires


def test_the_page_and_the_api_show_running_and_scaling(running, researcher, researcher_client, alice):
    deployment_scale(user=researcher, deployment_id=running.pk, replicas=0)
    html = researcher_client.get(reverse("deployment-detail", args=[running.number])).content.decode()
    assert "state-running" in html and "scaling 1 → 0" in html
    assert "state-provisioning" not in html
    # to zero it stops serving: not "the running ones keep serving"
    assert "its replicas are being stopped, and it no longer serves" in html and "keep serving" not in html
    body = alice.get(f"/api/v1/deployments/{running.number}").json()
    assert body["state"] == "running"
    assert (body["scaling_from"], body["scaling_to"]) == (1, 0)
    assert "scale" in body["allowed_actions"] and "terminate" in body["allowed_actions"]
    listed = alice.get("/api/v1/deployments", {"state": "running"}).json()
    assert [row["id"] for row in listed["results"]] == [running.number]
    assert alice.get("/api/v1/deployments", {"state": "provisioning"}).json()["results"] == []


def test_a_deployment_not_being_scaled_shows_no_scaling(running, alice):
    body = alice.get(f"/api/v1/deployments/{running.number}").json()
    assert body["state"] == "running" and body["scaling_from"] is None and body["scaling_to"] is None


def test_a_terminating_deployment_offers_no_scale_extend_or_terminate(
    running, researcher, researcher_client, alice
):
    alice.post(f"/api/v1/deployments/{running.number}/terminate")
    assert Workload.objects.get(pk=running.pk).state == S.TERMINATING  # its objects not gone yet
    html = researcher_client.get(reverse("deployment-detail", args=[running.number])).content.decode()
    assert (
        'id="scale-form"' not in html and 'id="extend-form"' not in html and 'id="terminate-form"' not in html
    )
    assert "going away" in html and "Cost so far" not in html
    body = alice.get(f"/api/v1/deployments/{running.number}").json()
    assert body["allowed_actions"] == []
    assert (
        alice.post(f"/api/v1/deployments/{running.number}/scale", {"replicas": 2}, format="json").status_code
        == 409
    )
