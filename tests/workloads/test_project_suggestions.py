"""Project labels suggested as they are typed (a label spelled two ways splits its spend and
escapes its budget): on the request and deploy forms, the labels the user's teams use; on a list's
filter, those of the listed workloads; on a team's budget page, its members and recent labels."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal.catalog.demo import catalog_seed
from portal.fleet.models import Allocation
from portal.spend.models import Budget
from portal.spend.services import spend_rollup_due
from portal.workloads import selectors
from portal.workloads.models import Workload
from portal.workloads.selectors import known_projects
from tests.conftest import field_html
from tests.rows import HTMX, make_sandbox

pytestmark = pytest.mark.django_db


def suggested(page: str, list_id: str) -> list[str]:
    """The values of the page's datalist `list_id`, after checking an input names it."""
    assert f'list="{list_id}"' in page, list_id
    (options,) = re.findall(rf'<datalist id="{list_id}">(.*?)</datalist>', page, re.S)
    return re.findall(r'<option value="([^"]*)">', options)


@pytest.fixture
def labelled(team, other_team, researcher, lead, other_researcher, h100):
    """Vision's work is labelled llm-eval (twice), vision-ft (Bob's) and none; NLP's nlp-secret;
    Vision has a budget for a label no work has used yet."""
    make_sandbox(owner=researcher, team=team, gpu_type=h100, project="llm-eval")
    make_sandbox(owner=researcher, team=team, gpu_type=h100, project="llm-eval")
    make_sandbox(owner=researcher, team=team, gpu_type=h100)
    make_sandbox(owner=lead, team=team, gpu_type=h100, project="vision-ft")
    make_sandbox(owner=other_researcher, team=other_team, gpu_type=h100, project="nlp-secret")
    Budget.objects.create(team=team, kind="project", project="q4-launch", monthly_amount=Decimal("100"))


def test_labels_come_from_the_teams_budgets_and_work_once_each_in_order(labelled, team):
    labels = known_projects(Workload.objects.filter(team=team), budget_teams=[team])

    assert labels == ["llm-eval", "q4-launch", "vision-ft"]
    assert known_projects(Workload.objects.filter(team=team)) == ["llm-eval", "vision-ft"]


def test_budgets_and_the_newest_work_are_kept_when_there_are_too_many_labels(
    team, researcher, h100, monkeypatch
):
    monkeypatch.setattr(selectors, "PROJECTS_SUGGESTED", 3)
    monkeypatch.setattr(selectors, "PROJECTS_LOOKED_AT", 4)
    for label in ["old-a", "old-b", "mid-c", "new-d", "new-e", "new-e"]:
        make_sandbox(owner=researcher, team=team, gpu_type=h100, project=label)
    Budget.objects.create(team=team, kind="project", project="zz-budget", monthly_amount=Decimal("1"))

    labels = known_projects(Workload.objects.filter(team=team), budget_teams=[team])

    # the budget's label, then the newest work's (new-e twice, new-d), within 4 workloads read
    assert labels == ["new-d", "new-e", "zz-budget"]


@pytest.mark.parametrize("form", ["/sandboxes/new/", "/deployments/new/"])
def test_the_request_forms_suggest_the_users_teams_labels_only(labelled, fleet, researcher_client, form):
    catalog_seed()
    page = researcher_client.get(form).content.decode()

    labels = suggested(field_html(page, "project"), "project-suggestions")
    assert labels == ["llm-eval", "q4-launch", "vision-ft"]
    assert "nlp-secret" not in page


def test_a_form_with_no_labels_to_suggest_draws_no_empty_list(team, fleet, researcher_client):
    page = researcher_client.get("/sandboxes/new/").content.decode()

    assert "project-suggestions" not in page
    assert "<datalist" not in page


def reads_labels(queries) -> bool:
    return any(f"LIMIT {selectors.PROJECTS_LOOKED_AT}" in q["sql"] for q in queries.captured_queries)


def test_the_parts_a_form_refreshes_read_no_labels(
    labelled, fleet, researcher_client, django_assert_num_queries
):
    catalog_seed()
    with CaptureQueriesContext(connection) as queries:
        estimate = researcher_client.get(
            "/sandboxes/estimate/", {"team": "vision", "gpu_type": "h100-80gb"}, **HTMX
        )
        deploy = researcher_client.get("/deployments/new/estimate/", {"team": "vision"}, **HTMX)

    assert (estimate.status_code, deploy.status_code) == (200, 200)
    assert not reads_labels(queries)


def test_a_lists_filter_suggests_the_labels_of_what_it_lists(labelled, researcher_client, lead_client):
    mine = researcher_client.get("/").content.decode()
    teams = lead_client.get("/?scope=team").content.decode()

    assert suggested(mine, "filter-projects") == ["llm-eval"]  # Alice's own work
    assert suggested(teams, "filter-projects") == ["llm-eval", "vision-ft"]  # Bob's team's


def test_a_filtered_table_redrawn_reads_no_labels(labelled, researcher_client):
    with CaptureQueriesContext(connection) as queries:
        table = researcher_client.get("/", {"project": "llm"}, **HTMX).content.decode()

    assert "filter-projects" not in table
    assert not reads_labels(queries)


def test_a_teams_budget_form_suggests_its_members_and_its_recent_labels(
    labelled, team, lead, lead_client, whole_gpus
):
    now = timezone.now()
    make_sandbox(owner=lead, team=team, gpu=whole_gpus[0], hours_ago=30, project="rolled-up")
    make_sandbox(owner=lead, team=team, gpu=whole_gpus[1], hours_ago=24 * 70, project="long-ago")
    ended = now - timedelta(days=65)
    Allocation.objects.filter(workload__project="long-ago").update(ended_at=ended, released_at=ended)
    spend_rollup_due(now=now, days_per_run=100)

    page = lead_client.get("/teams/vision/budgets/", **HTMX).content.decode()

    assert suggested(page, "budget-targets") == ["alice", "bob", "rolled-up"]
