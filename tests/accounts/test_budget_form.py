"""A team's budget alerts and policy on the web: its leads and admins set them (the rules of
PATCH /api/v1/teams/{slug}/budget, audited the same way), its members read them, others see nothing."""

from __future__ import annotations

import pytest

from portal.accounts.models import Team
from portal.audit.models import AuditEvent
from tests.conftest import signed_in
from tests.rows import HTMX

pytestmark = pytest.mark.django_db

URL = "/teams/vision/budget/"
CHANGE = {"thresholds": "90, 30 ,60", "policy": "stop", "stop_grace_hours": "12"}


def policy_of(team: Team) -> tuple:
    team.refresh_from_db()
    return team.budget_thresholds, team.budget_policy, team.budget_stop_grace_hours


def test_a_lead_reads_the_current_values_in_the_form_and_sets_new_ones(lead_client, team):
    page = lead_client.get(URL).content.decode()
    assert 'name="thresholds"' in page and 'value="50, 80, 100"' in page
    assert '<option value="block" selected>' in page and 'name="stop_grace_hours" value="24"' in page

    response = lead_client.post(URL, CHANGE, follow=True)

    assert response.redirect_chain == [(URL, 302)]
    assert policy_of(team) == ([30, 60, 90], "stop", 12)
    assert "Budget alerts and policy saved." in response.content.decode()
    event = AuditEvent.objects.get(action="team.budget_policy")
    assert event.actor.username == "bob" and "thresholds=[30, 60, 90]" in event.detail
    assert "policy=stop" in event.detail and "stop_grace_hours=12" in event.detail


def test_the_page_says_who_sets_the_budget_itself_and_an_admin_gets_the_way_there(
    lead_client, admin_client, team
):
    """Leads set alerts and policy here, not the amount: the page says so, or they look for it."""
    lead_page = lead_client.get(URL).content.decode()
    assert "is set by the platform's admins; ask one to change it." in lead_page
    assert f"/admin/accounts/team/{team.pk}/change/" not in lead_page

    admin_page = admin_client.get(URL).content.decode()
    assert f'<a href="/admin/accounts/team/{team.pk}/change/">change it in the admin</a>' in admin_page


def test_an_htmx_save_answers_with_the_form_and_the_message(lead_client, team):
    fragment = lead_client.post(URL, {**CHANGE, "policy": "warn"}, **HTMX).content.decode()
    assert "<html" not in fragment and 'id="team-budget-policy"' in fragment
    assert 'value="30, 60, 90"' in fragment and "Budget alerts and policy saved." in fragment
    assert policy_of(team)[1] == "warn"


def test_an_admin_may_set_them_too(admin_client, team):
    assert admin_client.post(URL, CHANGE).status_code == 302
    assert policy_of(team) == ([30, 60, 90], "stop", 12)


def test_a_researcher_reads_them_and_may_not_change_them(researcher_client, team):
    page = researcher_client.get(URL).content.decode()
    assert 'name="thresholds"' not in page
    assert "50, 80, 100 % of the budget" in page and "The team's leads set these." in page
    before = policy_of(team)

    assert researcher_client.post(URL, CHANGE).status_code == 403
    assert policy_of(team) == before and not AuditEvent.objects.filter(action="team.budget_policy").exists()


def test_another_teams_member_gets_not_found_as_for_a_team_that_does_not_exist(other_client, lead, team):
    before = policy_of(team)
    assert other_client.get(URL).status_code == 404
    assert other_client.post(URL, CHANGE).status_code == 404
    assert signed_in(lead).get("/teams/nope/budget/").status_code == 404
    assert policy_of(team) == before


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"thresholds": "50, lots"}, "thresholds", "Up to 10 whole percentages from 1 to 200."),
        ({"thresholds": "0, 80"}, "thresholds", "Up to 10 whole percentages from 1 to 200."),
        ({"thresholds": "250"}, "thresholds", "Up to 10 whole percentages from 1 to 200."),
        ({"thresholds": ", ".join(str(n) for n in range(1, 12))}, "thresholds", "Up to 10 whole percentages"),
        ({"thresholds": ""}, "thresholds", "This field is required."),
        ({"stop_grace_hours": "0"}, "stop_grace_hours", "Whole hours from 1 to 720."),
        ({"stop_grace_hours": "721"}, "stop_grace_hours", "Whole hours from 1 to 720."),
        ({"policy": "explode"}, "policy", "Select a valid choice."),
    ],
)
def test_bad_input_says_what_is_wrong_and_changes_nothing(lead_client, team, change, field, message):
    before = policy_of(team)

    response = lead_client.post(URL, {**CHANGE, **change})

    page = response.content.decode()
    assert response.status_code == 200
    error = page.split(f'id="field-{field}"')[1].split("</div>")[0]
    assert message in error and 'aria-invalid="true"' in error
    assert policy_of(team) == before and not AuditEvent.objects.filter(action="team.budget_policy").exists()


def test_the_team_settings_page_brings_the_form_and_the_spend_page_links_to_it(lead_client, team):
    settings_page = lead_client.get(f"/teams/{team.slug}/settings/").content.decode()
    assert f'hx-get="{URL}" hx-trigger="load"' in settings_page and f'href="{URL}"' in settings_page
    assert f'href="{URL}"' in lead_client.get("/spend/").content.decode()
    loaded = lead_client.get(URL, **HTMX).content.decode()
    assert 'id="team-budget-policy"' in loaded and 'name="thresholds"' in loaded and "<html" not in loaded


def test_the_budget_page_runs_a_bounded_number_of_queries(lead_client, team, django_assert_max_num_queries):
    with django_assert_max_num_queries(20):
        assert lead_client.get(URL).status_code == 200
