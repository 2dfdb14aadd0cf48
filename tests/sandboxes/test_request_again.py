"""Request again: a sandbox's or a deployment's settings as a body the create endpoint takes,
and the form filled with them."""

from __future__ import annotations

import pytest

from portal.accounts.models import Membership
from portal.catalog.demo import catalog_seed
from portal.deployments.models import Serving
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Workload, WorkloadState
from portal.workloads.services import again_name, workload_terminate

pytestmark = pytest.mark.django_db
SANDBOXES = "/api/v1/sandboxes"
DEPLOYMENTS = "/api/v1/deployments"
SAME_SETTINGS = (
    "team_id",
    "image_id",
    "gpu_type_id",
    "gpu_count",
    "mig_profile",
    "ttl_hours",
    "cpu",
    "memory_gb",
)


@pytest.fixture
def catalog(db):
    catalog_seed()


def test_names_for_the_next_one_count_up_and_stay_within_forty():
    assert again_name("train") == "train-2"
    assert again_name("train-2") == "train-3"
    long = again_name("a" * 40)
    assert len(long) == 40 and long.endswith("-2")


def test_posting_the_request_body_of_an_ended_sandbox_asks_for_an_equal_one(
    run_jobs, fleet, researcher, alice
):
    first = run_jobs(
        lambda: sandbox_request(
            user=researcher,
            team="vision",
            name="mig-small",
            gpu_type="h100-80gb",
            mig_profile="1g.10gb",
            ttl_hours=3,
            cpu=4,
            memory_gb=32,
            project="llm-eval",
            purpose="eval runs",
        )
    )
    run_jobs(lambda: workload_terminate(user=researcher, workload_id=first.pk, kind="sandbox"))

    body = alice.get(f"{SANDBOXES}/{first.number}/request-body")
    assert body.status_code == 200
    assert body.json()["name"] == "mig-small-2"
    assert body.json()["gpu"] == {"type": "h100-80gb", "mig_profile": "1g.10gb"}

    created = run_jobs(lambda: alice.post(SANDBOXES, body.json(), format="json"))
    assert created.status_code == 201, created.json()
    again = Workload.objects.get(kind="sandbox", number=created.json()["id"])
    first.refresh_from_db()
    assert [getattr(again, f) for f in SAME_SETTINGS] == [getattr(first, f) for f in SAME_SETTINGS]
    assert (again.project, again.purpose, again.storage_gb) == ("llm-eval", "eval runs", first.storage_gb)


def test_others_get_404_for_the_request_body(run_jobs, fleet, researcher, carol, slice_request):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    assert carol.get(f"{SANDBOXES}/{sandbox.number}/request-body").status_code == 404


def test_the_request_form_opens_filled_with_a_sandbox_settings(
    run_jobs, fleet, researcher, researcher_client
):
    sandbox = run_jobs(
        lambda: sandbox_request(
            user=researcher, team="vision", name="whole", gpu_type="h100-80gb", count=2, ttl_hours=5, cpu=12
        )
    )
    html = researcher_client.get(f"/sandboxes/new/?again={sandbox.number}").content.decode()
    assert 'value="whole-2"' in html
    assert 'name="cpu" value="12"' in html
    assert 'name="count" value="2"' in html
    assert f"Filled in from: the settings of sandbox #{sandbox.number}" in html
    assert 'id="preset-problem"' not in html


def test_the_detail_page_offers_request_again_even_once_ended(
    run_jobs, fleet, researcher, researcher_client, slice_request
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    run_jobs(lambda: workload_terminate(user=researcher, workload_id=sandbox.pk, kind="sandbox"))
    html = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert f"/sandboxes/new/?again={sandbox.number}" in html


def test_posting_the_request_body_of_a_deployment_asks_for_an_equal_one(run_jobs, fleet, catalog, alice):
    body = {
        "name": "llama8b",
        "team": "vision",
        "model": "llama-3.1-8b-instruct",
        "gpu": {"type": "h100-80gb", "count": 1},
        "ttl_hours": 4,
        "context": 4096,
    }
    first = run_jobs(lambda: alice.post(DEPLOYMENTS, body, format="json"))
    assert first.status_code == 201, first.json()
    again_body = alice.get(f"{DEPLOYMENTS}/{first.json()['id']}/request-body").json()
    assert again_body["name"] == "llama8b-2" and again_body["context"] == 4096
    again = run_jobs(lambda: alice.post(DEPLOYMENTS, again_body, format="json"))
    assert again.status_code == 201, again.json()
    one, two = (
        Serving.objects.get(workload__kind="deployment", workload__number=r.json()["id"])
        for r in (first, again)
    )
    assert (one.model_id, one.precision, one.context, one.concurrency) == (
        two.model_id,
        two.precision,
        two.context,
        two.concurrency,
    )
    assert (
        Workload.objects.get(kind="deployment", number=again.json()["id"]).state
        != WorkloadState.PENDING_APPROVAL
    )


def test_the_form_says_when_a_setting_no_longer_fits_such_as_a_team_the_owner_left(
    run_jobs, fleet, researcher, researcher_client, slice_request, other_team
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    run_jobs(lambda: workload_terminate(user=researcher, workload_id=sandbox.pk, kind="sandbox"))
    Membership.objects.filter(user=researcher).delete()
    Membership.objects.create(user=researcher, team=other_team, role=Membership.Role.RESEARCHER)
    html = researcher_client.get(f"/sandboxes/new/?again={sandbox.number}").content.decode()
    assert f"Filled in from: the settings of sandbox #{sandbox.number}" in html
    assert 'id="preset-problem"' in html and "a team called &#x27;vision&#x27;" in html
    assert '<option value="nlp">NLP</option>' in html  # the team they are in, not chosen silently
