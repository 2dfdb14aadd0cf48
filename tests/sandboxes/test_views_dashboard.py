"""The dashboard: my sandboxes (a lead also the team's), live updates, notifications."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.accounts.models import Notification
from portal.fleet.models import GpuType
from portal.workloads.models import Approval, WorkloadState
from tests.conftest import signed_in
from tests.factories import GpuTypeFactory, UserFactory
from tests.rows import HTMX, make_sandbox


def test_dashboard_lists_my_sandboxes_and_not_other_peoples(
    researcher_client, researcher, other_researcher, team, other_team, whole_gpus
):
    make_sandbox(owner=researcher, team=team, name="mine-running", gpu=whole_gpus[0])
    make_sandbox(owner=other_researcher, team=other_team, name="carols-box", gpu=whole_gpus[1])

    page = researcher_client.get("/").content.decode()

    assert "mine-running" in page
    assert "carols-box" not in page


def test_someone_in_no_team_is_told_so_on_the_dashboard(db, researcher_client):
    newcomer = signed_in(UserFactory(username="dave"))
    assert 'id="no-team"' in newcomer.get("/").content.decode()  # before trying to request
    assert 'id="no-team"' not in researcher_client.get("/").content.decode()


def test_the_sandboxes_address_leads_to_the_dashboard_with_its_filters(researcher_client):
    response = researcher_client.get("/sandboxes/?state=running")

    assert response.status_code == 302
    assert response["Location"] == "/?state=running"


def test_a_row_shows_state_gpu_placement_expiry_and_costs(researcher_client, researcher, team, whole_gpus):
    make_sandbox(owner=researcher, team=team, name="costly", gpu=whole_gpus[3], hours_ago=2)

    page = researcher_client.get("/").content.decode()

    assert 'class="state state-running"' in page
    assert "1x h100-80gb" in page
    assert "gpu-h100-a · GPU 3" in page
    assert "in 5\xa0hours" in page  # expires in six hours, less the seconds the test took
    assert "$13.76" in page  # 2 h x $6.88
    assert "$6.88" in page


def test_a_lead_opens_on_the_teams_sandboxes_and_may_narrow_to_their_own(
    lead_client, researcher, team, whole_gpus
):
    make_sandbox(owner=researcher, team=team, name="alices-box", gpu=whole_gpus[0])

    opened = lead_client.get("/").content.decode()
    teams = lead_client.get("/?scope=team").content.decode()
    mine = lead_client.get("/?scope=mine").content.decode()

    assert "alices-box" in opened and "alices-box" in teams
    assert "<th>Owner</th>" in opened
    assert "alices-box" not in mine


def test_researchers_cannot_widen_the_scope_to_the_team(researcher_client, lead, team, whole_gpus):
    make_sandbox(owner=lead, team=team, name="bobs-box", gpu=whole_gpus[0])

    page = researcher_client.get("/?scope=team").content.decode()

    assert "bobs-box" not in page


def test_the_state_filter_narrows_the_table(researcher_client, researcher, team, whole_gpus, h100):
    make_sandbox(owner=researcher, team=team, name="runs", gpu=whole_gpus[0])
    make_sandbox(owner=researcher, team=team, name="waits", state=WorkloadState.QUEUED, gpu_type=h100)

    page = researcher_client.get("/?state=queued").content.decode()
    every = researcher_client.get("/?state=&live=").content.decode()

    assert "waits" in page
    assert "runs" not in page
    assert "runs" in every and "waits" in every


def test_the_htmx_request_gets_only_the_table_with_the_nav_badges_out_of_band(
    researcher_client, researcher, team, whole_gpus
):
    make_sandbox(owner=researcher, team=team, name="polled", gpu=whole_gpus[0])
    Notification.objects.create(user=researcher, message="Sandbox polled is running.")

    response = researcher_client.get("/", **HTMX)
    page = response.content.decode()

    assert page.lstrip().startswith('<section id="sandbox-table"')
    assert "<html" not in page and "Notifications</h2>" not in page
    assert "polled" in page
    assert 'id="nav-unread-badge"' in page and 'hx-swap-oob="true"' in page
    assert 'title="Unread notifications" hx-swap-oob="true">1</span>' in page


def test_the_table_polls_while_a_sandbox_is_live_and_stops_when_none_is(
    researcher_client, researcher, team, whole_gpus, h100
):
    live = make_sandbox(owner=researcher, team=team, name="alive", gpu=whole_gpus[0])

    assert 'hx-trigger="every 3s"' in researcher_client.get("/").content.decode()

    live.state = WorkloadState.TERMINATED
    live.save(update_fields=["state"])

    assert 'hx-trigger="every 3s"' not in researcher_client.get("/", **HTMX).content.decode()


def test_unread_notifications_are_highlighted_and_marked_read_in_place(researcher_client, researcher):
    Notification.objects.create(user=researcher, message="Your request for big was approved.")

    page = researcher_client.get("/").content.decode()
    assert '<li class="unread">' in page
    assert "Mark all read" in page

    response = researcher_client.post("/notifications/read/", **HTMX)
    fragment = response.content.decode()

    assert not Notification.objects.filter(user=researcher, read_at__isnull=True).exists()
    assert '<li class="unread">' not in fragment
    assert "Your request for big was approved." in fragment
    assert 'id="nav-unread-badge" class="count is-empty"' in fragment


def test_the_approvals_badge_counts_requests_waiting_for_a_lead(lead_client, researcher, team, h100):
    sandbox = make_sandbox(
        owner=researcher, team=team, name="wants-two", state=WorkloadState.PENDING_APPROVAL, gpu_type=h100
    )
    Approval.objects.create(workload=sandbox, team=team, requested_by=researcher, why_needed="two GPUs")

    page = lead_client.get("/").content.decode()

    assert 'id="nav-approvals-badge" class="count" title="Requests waiting for you">1</span>' in page


def test_dashboard_queries_stay_bounded_with_many_sandboxes(
    lead_client, lead, researcher, team, whole_gpus, h100, django_assert_max_num_queries
):
    make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0]).shared_with.add(lead)
    make_sandbox(owner=researcher, team=team, state=WorkloadState.QUEUED, gpu_type=h100)
    with CaptureQueriesContext(connection) as few:
        lead_client.get("/?scope=team")
    for index in range(1, 8):
        make_sandbox(owner=researcher, team=team, gpu=whole_gpus[index]).shared_with.add(lead)
    for _ in range(11):
        make_sandbox(owner=researcher, team=team, state=WorkloadState.QUEUED, gpu_type=h100)
    for _ in range(5):
        make_sandbox(owner=researcher, team=team, state=WorkloadState.TERMINATED, gpu_type=h100)

    # 15 for the page (one: whether the user is in a team), and for its list and the shared-with-you list who each is shared with and
    # which datasets each mounts, and the shared list itself; the live version (1), the queued
    # rows' estimated waits (4), the filter's teams and GPU types (2) and its project labels (the
    # user's teams, their budgets' labels, their work's: 3): bounded, the same for 2 or 25 rows
    with django_assert_max_num_queries(32) as many:
        response = lead_client.get("/?scope=team")

    assert response.content.decode().count('id="sandbox-row-') == 25
    assert response.content.decode().count("by alice ·") == 8  # all shared with bob
    assert len(many) == len(few)


def test_the_list_narrows_to_a_team_a_project_or_a_gpu_type_from_its_form(
    lead_client, researcher, lead, team, other_team, h100
):
    from portal.accounts.models import Membership

    Membership.objects.create(user=lead, team=other_team, role=Membership.Role.LEAD)
    make_sandbox(owner=researcher, team=team, name="eval-run", project="llm-eval", gpu_type=h100)
    make_sandbox(owner=researcher, team=team, name="other-run", gpu_type=h100)
    make_sandbox(owner=lead, team=other_team, name="nlp-run", gpu_type=h100)

    page = lead_client.get("/?scope=team").content.decode()
    assert '<select name="team">' in page and f'<option value="{other_team.slug}"' in page
    assert 'name="project"' in page
    by_project = lead_client.get("/?scope=team&project=llm-eval").content.decode()
    assert "eval-run" in by_project and "other-run" not in by_project
    by_team = lead_client.get(f"/?scope=team&team={other_team.slug}").content.decode()
    assert "nlp-run" in by_team and "eval-run" not in by_team
    assert f'<option value="{other_team.slug}" selected>' in by_team
    GpuTypeFactory(slug="a100-80gb")
    make_sandbox(owner=researcher, team=team, name="a100-run", gpu_type=GpuType.objects.get(slug="a100-80gb"))
    with_types = lead_client.get("/?scope=team").content.decode()
    assert '<select name="gpu_type">' in with_types and '<option value="a100-80gb"' in with_types
    by_type = lead_client.get("/?scope=team&gpu_type=a100-80gb").content.decode()
    assert "a100-run" in by_type and "eval-run" not in by_type


def test_a_researcher_in_two_teams_narrows_their_own_list_to_one(
    researcher_client, researcher, team, other_team, h100
):
    from portal.accounts.models import Membership

    Membership.objects.create(user=researcher, team=other_team, role=Membership.Role.RESEARCHER)
    make_sandbox(owner=researcher, team=team, name="first-run", gpu_type=h100)
    make_sandbox(owner=researcher, team=other_team, name="second-run", gpu_type=h100)

    page = researcher_client.get("/").content.decode()
    assert '<select name="team">' in page and f'<option value="{other_team.slug}"' in page
    narrowed = researcher_client.get(f"/?team={other_team.slug}").content.decode()
    assert "second-run" in narrowed and "first-run" not in narrowed
    assert f'<option value="{other_team.slug}" selected>' in narrowed  # the select says what narrows it
