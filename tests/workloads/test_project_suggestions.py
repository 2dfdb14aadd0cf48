"""Project labels suggested as they are typed (a label spelled two ways splits its spend and
escapes its budget): on the request and deploy forms, the labels of the team chosen as the user
may see them (its project budgets; a researcher's own work, a lead's whole team's); on a list's
filter, those of the listed workloads; on a team's budget form, its members and recent labels."""

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
from portal.workloads.selectors import listed_projects, team_projects
from tests.conftest import field_html, signed_in
from tests.factories import MembershipFactory
from tests.rows import HTMX, make_sandbox

pytestmark = pytest.mark.django_db


def datalists(page: str) -> dict[str, list[str]]:
    """Each datalist of the page by id, with its values."""
    return {
        list_id: re.findall(r'<option value="([^"]*)">', options)
        for list_id, options in re.findall(r'<datalist id="([^"]+)">(.*?)</datalist>', page, re.S)
    }


def suggested(page: str, list_id: str) -> list[str]:
    """The values of the page's datalist `list_id`, after checking an input names it."""
    assert f'list="{list_id}"' in page, list_id
    return datalists(page)[list_id]


@pytest.fixture
def labelled(team, other_team, researcher, lead, other_researcher, h100):
    """Vision's work is labelled llm-eval (twice, Alice's), vision-ft (Bob's, a lead) and none;
    NLP's nlp-secret; Vision has a budget for a label no work has used yet."""
    make_sandbox(owner=researcher, team=team, gpu_type=h100, project="llm-eval")
    make_sandbox(owner=researcher, team=team, gpu_type=h100, project="llm-eval")
    make_sandbox(owner=researcher, team=team, gpu_type=h100)
    make_sandbox(owner=lead, team=team, gpu_type=h100, project="vision-ft")
    make_sandbox(owner=other_researcher, team=other_team, gpu_type=h100, project="nlp-secret")
    Budget.objects.create(team=team, kind="project", project="q4-launch", monthly_amount=Decimal("100"))


def test_a_researcher_gets_the_teams_budget_labels_and_their_own_a_lead_the_teams(
    labelled, team, other_team, researcher, lead, admin_user, django_assert_max_num_queries
):
    with django_assert_max_num_queries(3):  # budgets, work, the teams the user leads
        assert team_projects(researcher, [team.pk]) == {team.pk: ["llm-eval", "q4-launch"]}
    assert team_projects(lead, [team.pk]) == {team.pk: ["llm-eval", "q4-launch", "vision-ft"]}
    assert team_projects(admin_user, [team.pk, other_team.pk]) == {
        team.pk: ["llm-eval", "q4-launch", "vision-ft"],
        other_team.pk: ["nlp-secret"],
    }
    assert team_projects(researcher, []) == {}


def test_a_lead_in_another_team_as_a_researcher_gets_that_teams_labels_of_their_own_work(
    labelled, team, other_team, lead, other_researcher, h100
):
    MembershipFactory(user=lead, team=other_team)
    make_sandbox(owner=lead, team=other_team, gpu_type=h100, project="bobs-nlp")

    assert team_projects(lead, [team.pk, other_team.pk]) == {
        team.pk: ["llm-eval", "q4-launch", "vision-ft"],  # led: the team's work
        other_team.pk: ["bobs-nlp"],  # a researcher there: not Carol's nlp-secret
    }
    assert listed_projects(lead, scope="team") == ["bobs-nlp", "llm-eval", "q4-launch", "vision-ft"]


def test_budgeted_labels_come_first_when_there_are_too_many_to_suggest(team, researcher, h100, monkeypatch):
    monkeypatch.setattr(selectors, "PROJECTS_SUGGESTED", 3)
    for label in ["b-used", "a-used", "d-used", "c-used", "a-used"]:
        make_sandbox(owner=researcher, team=team, gpu_type=h100, project=label)
    Budget.objects.create(team=team, kind="project", project="zz-budget", monthly_amount=Decimal("1"))

    assert team_projects(researcher, [team.pk]) == {team.pk: ["a-used", "b-used", "zz-budget"]}
    assert listed_projects(researcher, scope="mine") == ["a-used", "b-used", "c-used"]


@pytest.mark.parametrize("form", ["/sandboxes/new/", "/deployments/new/"])
def test_the_request_forms_suggest_the_labels_the_user_may_see(
    labelled, fleet, researcher_client, lead, form
):
    catalog_seed()
    page = researcher_client.get(form).content.decode()
    leads = signed_in(lead).get(form).content.decode()

    assert suggested(field_html(page, "project"), "project-suggestions-vision") == ["llm-eval", "q4-launch"]
    assert "vision-ft" not in page and "nlp-secret" not in page  # Bob's work, another team's
    assert suggested(field_html(leads, "project"), "project-suggestions-vision") == [
        "llm-eval", "q4-launch", "vision-ft"
    ]  # fmt: skip


def test_each_team_has_its_own_list_and_the_field_follows_the_team_chosen(
    labelled, fleet, researcher, researcher_client, other_team
):
    MembershipFactory(user=researcher, team=other_team)
    make_sandbox(owner=researcher, team=other_team, gpu_type=fleet["whole"].gpu_type, project="nlp-chat")

    first = field_html(researcher_client.get("/sandboxes/new/").content.decode(), "project")
    refused = researcher_client.post("/sandboxes/new/", {"team": "vision", "name": "Bad Name!"})
    again = field_html(refused.content.decode(), "project")

    assert datalists(first) == {
        "project-suggestions-nlp": ["nlp-chat"],
        "project-suggestions-vision": ["llm-eval", "q4-launch"],
    }
    assert 'list="project-suggestions-nlp"' in first  # the first team, as the select starts
    assert 'data-list-by="team"' in first and 'data-list-prefix="project-suggestions-"' in first
    assert refused.status_code == 200 and "field-error" in refused.content.decode()
    assert 'list="project-suggestions-vision"' in again  # the team sent, drawn again
    assert datalists(again) == datalists(first)


def test_a_form_with_no_labels_to_suggest_draws_no_empty_list(team, fleet, researcher_client):
    page = researcher_client.get("/sandboxes/new/").content.decode()

    assert "project-suggestions" not in page
    assert "<datalist" not in page


def reads_labels(queries) -> bool:
    return any("SELECT DISTINCT" in q["sql"] and '"project"' in q["sql"] for q in queries.captured_queries)


def test_the_parts_a_form_refreshes_read_no_labels(labelled, fleet, researcher_client):
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
    assert suggested(teams, "filter-projects") == ["llm-eval", "q4-launch", "vision-ft"]  # Bob's team's


def test_a_filtered_table_redrawn_reads_no_labels(labelled, researcher_client):
    with CaptureQueriesContext(connection) as queries:
        table = researcher_client.get("/", {"project": "llm"}, **HTMX).content.decode()

    assert "filter-projects" not in table
    assert not reads_labels(queries)


def test_a_teams_budget_form_suggests_its_members_and_its_recent_labels_to_its_leads(
    labelled, team, lead, lead_client, researcher_client, whole_gpus
):
    now = timezone.now()
    make_sandbox(owner=lead, team=team, gpu=whole_gpus[0], hours_ago=30, project="rolled-up")
    make_sandbox(owner=lead, team=team, gpu=whole_gpus[1], hours_ago=24 * 70, project="long-ago")
    ended = now - timedelta(days=65)
    Allocation.objects.filter(workload__project="long-ago").update(ended_at=ended, released_at=ended)
    spend_rollup_due(now=now, days_per_run=100)

    fragment = lead_client.get("/teams/vision/budgets/", **HTMX).content.decode()
    page = lead_client.get("/teams/vision/budgets/").content.decode()
    refused = lead_client.post("/teams/vision/budgets/", {"kind": "user", "target": "nobody", "monthly_amount": "5"},
                               **HTMX).content.decode()  # fmt: skip
    members_read = researcher_client.get("/teams/vision/budgets/").content.decode()

    assert suggested(fragment, "budget-targets") == ["alice", "bob", "rolled-up"]
    assert suggested(page, "budget-targets") == ["alice", "bob", "rolled-up"]
    assert "No member" in refused and suggested(refused, "budget-targets") == ["alice", "bob", "rolled-up"]
    assert "budget-targets" not in members_read  # no form for a member who may not set one
