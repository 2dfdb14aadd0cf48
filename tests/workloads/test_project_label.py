"""A project label on sandboxes and deployments: set when asked for (form and API), checked,
shown on the pages and lists, kept when extended, and a filter of the API lists."""

from __future__ import annotations

import pytest

from portal.catalog.demo import catalog_seed
from portal.workloads.models import Workload
from tests.rows import make_sandbox

SANDBOXES = "/api/v1/sandboxes"
DEPLOYMENTS = "/api/v1/deployments"
SLICE_FORM = {
    "team": "vision",
    "name": "mig-small",
    "image": "",
    "gpu_type": "h100-80gb",
    "gpu_mode": "mig",
    "mig_profile": "1g.10gb",
    "lifetime_mode": "hours",
    "ttl_hours": "1",
}


@pytest.fixture
def catalog(db):
    catalog_seed()


def test_a_sandbox_requested_over_the_api_keeps_its_project_and_shows_it(run_jobs, fleet, alice, slice_body):
    created = run_jobs(lambda: alice.post(SANDBOXES, {**slice_body, "project": "llm-eval"}, format="json"))

    assert created.status_code == 201, created.json()
    assert created.json()["project"] == "llm-eval"
    assert Workload.objects.get(kind="sandbox", number=created.json()["id"]).project == "llm-eval"
    assert alice.get(f"{SANDBOXES}/{created.json()['id']}").json()["project"] == "llm-eval"


def test_a_sandbox_without_a_project_has_an_empty_label(run_jobs, fleet, alice, slice_body):
    created = run_jobs(lambda: alice.post(SANDBOXES, slice_body, format="json"))

    assert created.json()["project"] == ""


@pytest.mark.parametrize("label", ["LLM", "llm_eval", "a" * 41, "llm eval", "storage", "évaluation"])
def test_a_bad_project_label_is_a_clear_field_error_and_creates_nothing(fleet, alice, slice_body, label):
    response = alice.post(SANDBOXES, {**slice_body, "project": label}, format="json")

    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert "project" in error["fields"], error
    assert not Workload.objects.exists()


def test_a_deployment_takes_a_project_over_the_api(run_jobs, fleet, catalog, alice):
    body = {
        "name": "llama8b", "team": "vision", "model": "llama-3.1-8b-instruct",
        "gpu": {"type": "h100-80gb", "count": 1}, "ttl_hours": 4, "project": "chat-bot",
    }  # fmt: skip
    created = run_jobs(lambda: alice.post(DEPLOYMENTS, body, format="json"))

    assert created.status_code == 201, created.json()
    assert created.json()["project"] == "chat-bot"
    assert Workload.objects.get(kind="deployment", number=created.json()["id"]).project == "chat-bot"


def test_the_request_form_sets_the_project_and_the_page_and_list_show_it(
    researcher_client, researcher, fleet, run_jobs
):
    response = run_jobs(
        lambda: researcher_client.post("/sandboxes/new/", {**SLICE_FORM, "project": "llm-eval"})
    )

    sandbox = Workload.objects.get(owner=researcher, name="mig-small")
    assert response.status_code == 302
    assert sandbox.project == "llm-eval"
    assert (
        'id="project-label">llm-eval<'
        in researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    )
    assert "llm-eval" in researcher_client.get("/").content.decode()


def test_the_request_form_shows_a_bad_label_next_to_the_field(researcher_client, fleet):
    page = researcher_client.post("/sandboxes/new/", {**SLICE_FORM, "project": "Bad Label"}).content.decode()

    assert "lowercase letters, digits and hyphens" in page
    assert not Workload.objects.exists()


def test_an_extension_keeps_the_project(run_jobs, fleet, alice, slice_body):
    created = run_jobs(lambda: alice.post(SANDBOXES, {**slice_body, "project": "llm-eval"}, format="json"))
    extended = alice.post(f"{SANDBOXES}/{created.json()['id']}/extend", {"hours": 1}, format="json")

    assert extended.status_code in (200, 202), extended.json()
    assert Workload.objects.get(kind="sandbox", number=created.json()["id"]).project == "llm-eval"


def test_the_api_list_filters_by_project(fleet, h100, team, researcher, alice):
    mine = make_sandbox(owner=researcher, team=team, gpu_type=h100, name="a", project="llm-eval")
    make_sandbox(owner=researcher, team=team, gpu_type=h100, name="b", project="other")
    make_sandbox(owner=researcher, team=team, gpu_type=h100, name="c")

    listed = alice.get(SANDBOXES, {"project": "llm-eval"}).json()

    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [row["id"] for row in rows] == [mine.number]
