"""My teams: each of the user's teams with its quota and budget left, what is approved at once,
the longest lifetime, idle reclaim and its leads; a lead's link to the team's settings."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.conftest import signed_in
from tests.factories import MembershipFactory
from tests.rows import make_sandbox

pytestmark = pytest.mark.django_db


def test_a_researcher_sees_what_each_team_has_left_and_what_needs_a_lead(
    researcher, lead, team, other_team, fleet
):
    MembershipFactory(user=researcher, team=other_team)
    team.quota_gpus, team.auto_approve_max_gpus, team.auto_approve_max_hours = Decimal("8"), 2, Decimal("12")
    team.idle_reclaim_minutes, team.idle_grace_minutes = 30, 15
    team.save()
    make_sandbox(owner=researcher, team=team, gpu=fleet["whole"].gpus.first(), hours_ago=2)  # holds 1 GPU

    page = signed_in(researcher).get("/teams/").content.decode()

    assert page.index(f'id="team-{other_team.slug}"') < page.index('id="team-vision"')  # by short name
    vision = page[page.index('id="team-vision"') :]
    assert "<strong>7</strong> of 8 GPU equivalents left" in vision
    assert "up to 2 whole GPUs (any single MIG slice) for up to 12 h" in vision
    assert "warned after 30 min under 5 % GPU utilization, ended 15 min later" in vision
    assert "Bob" in vision or "bob" in vision  # its lead
    assert "Team settings" not in vision  # a researcher's
    assert f'id="team-{other_team.slug}"' in page
    assert "$" in vision and "spent since the 1st" in vision


def test_a_lead_gets_the_settings_link_and_nobody_sees_another_teams(lead, other_team, team):
    page = signed_in(lead).get("/teams/").content.decode()
    assert 'href="/teams/vision/settings/"' in page
    assert f'id="team-{other_team.slug}"' not in page
    assert 'href="/teams/"' in page  # in the user menu


def test_each_team_names_its_active_members_with_their_usernames(
    lead, researcher, team, django_assert_max_num_queries, monkeypatch
):
    from portal.workloads import views
    from tests.factories import UserFactory

    gone = UserFactory(username="gone", is_active=False)
    MembershipFactory(user=gone, team=team)
    for n in range(4):
        MembershipFactory(user=UserFactory(username=f"member{n}", first_name=f"M{n}"), team=team)
    monkeypatch.setattr(views, "MEMBERS_SHOWN", 3)
    client = signed_in(lead)
    with django_assert_max_num_queries(25):
        page = client.get("/teams/").content.decode()
    members = page[page.index('id="members-vision"') :]
    members = members[: members.index("</div>")]
    assert "Members (6)" in members and "gone" not in members  # bob, alice, four more; not the deactivated
    assert 'Alice <span class="muted">(alice)</span>' in members and ", and 3 more" in members


def test_without_a_team_the_page_says_what_to_do(client, django_user_model):
    loner = django_user_model.objects.create_user(username="loner", password="x")
    client.force_login(loner)
    page = client.get("/teams/").content.decode()
    assert "not a member of any team yet" in page and "Ask a platform admin to add you to one." in page


def test_an_admin_in_no_team_is_told_where_to_add_themselves(admin_user):
    """Told to ask a platform admin, a platform admin would be asking themselves."""
    client = signed_in(admin_user)
    for path in ("/teams/", "/sandboxes/new/", "/deployments/new/"):
        page = client.get(path).content.decode()
        assert "Ask a platform admin" not in page, path
        assert (
            '<a href="/admin/accounts/team/">open its team</a> and add yourself under its memberships' in page
        ), path


def test_the_page_reads_a_few_queries_per_team(researcher, team, other_team, django_assert_max_num_queries):
    """Each team's quota and budget are read for it (a user is in a few teams), its project labels
    with every other team's, nothing per row."""
    client = signed_in(researcher)
    client.get("/teams/")  # the session and the nav warmed up
    with django_assert_max_num_queries(20) as one:
        client.get("/teams/")
    MembershipFactory(user=researcher, team=other_team)
    with django_assert_max_num_queries(22) as two:
        client.get("/teams/")
    assert len(two.captured_queries) - len(one.captured_queries) <= 5


def test_a_team_over_its_budget_reads_over_by_how_much(researcher, team, fleet):
    team.monthly_budget = Decimal("5.00")
    team.save()
    make_sandbox(owner=researcher, team=team, gpu=fleet["whole"].gpus.first(), hours_ago=2)  # 2 h at $6.88

    vision = signed_in(researcher).get("/teams/").content.decode().split('id="team-vision"')[1]
    assert "<strong>$8.76</strong> over the budget of $5.00" in vision and "$-" not in vision


def test_each_team_shows_the_project_labels_it_uses(researcher, lead, team, other_team, h100):
    MembershipFactory(user=researcher, team=other_team)
    make_sandbox(owner=researcher, team=team, gpu_type=h100, project="llm-eval")
    make_sandbox(owner=lead, team=team, gpu_type=h100, project="bobs-own")  # a researcher sees their own

    page = signed_in(researcher).get("/teams/").content.decode()

    vision, nlp = (
        page.split('id="team-vision"')[1],
        page.split('id="team-nlp"')[1].split('id="team-vision"')[0],
    )
    assert "<code>llm-eval</code>" in vision and "bobs-own" not in page
    assert "<code>bobs-own</code>" in signed_in(lead).get("/teams/").content.decode()
    assert "none labelled yet" in nlp
