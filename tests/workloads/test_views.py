"""The web actions every workload shares: an invalid form stops before any service sees it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.audit.models import AuditEvent
from portal.workloads.models import Workload, WorkloadKind, WorkloadState


@pytest.fixture
def running(fleet, team, researcher, h100) -> Workload:
    return Workload.objects.create(
        kind=WorkloadKind.SANDBOX,
        name="box",
        team=team,
        owner=researcher,
        image=team.default_image,
        gpu_type=h100,
        state=WorkloadState.RUNNING,
        expires_at=timezone.now() + timedelta(hours=2),
    )


@pytest.mark.parametrize("hours", ["abc", "", "NaN"])
def test_an_extension_that_is_no_number_is_refused_by_the_form_and_changes_nothing(
    client, researcher, running, hours
):
    client.force_login(researcher)
    expires_at = running.expires_at

    page = client.post(f"/sandboxes/{running.number}/extend/", {"hours": hours}, follow=True).content.decode()

    assert "Extend by (hours):" in page
    running.refresh_from_db()
    assert running.expires_at == expires_at
    assert not AuditEvent.objects.filter(action__startswith="sandbox.extend").exists()


@pytest.mark.parametrize("replicas", ["two", "-1", "99"])
def test_a_scale_that_the_form_refuses_never_reaches_the_service(client, researcher, running, replicas):
    running.kind = WorkloadKind.DEPLOYMENT
    running.save(update_fields=["kind"])
    client.force_login(researcher)

    response = client.post(f"/deployments/{running.number}/scale/", {"replicas": replicas}, follow=True)

    assert "Replicas:" in response.content.decode()
    running.refresh_from_db()
    assert running.replicas == 1 and running.state == WorkloadState.RUNNING
    assert not AuditEvent.objects.filter(action__startswith="deployment.scale").exists()


def test_the_catalog_sends_a_signed_out_htmx_poll_to_the_sign_in_page(client, db):
    response = client.get(
        "/catalog/", HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="http://testserver/catalog/"
    )

    assert response.status_code == 204
    assert response["HX-Redirect"].startswith("/login/?next=")
