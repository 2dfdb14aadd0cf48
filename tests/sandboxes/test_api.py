"""The sandbox API: request, list, show, extend, terminate; validation, quota and idempotency."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from portal.accounts.models import Membership
from portal.fleet.models import Gpu
from portal.sandboxes.models import Dataset
from portal.workloads.models import Approval, Workload
from tests.conftest import token_client
from tests.factories import MembershipFactory, UserFactory
from tests.rows import make_hold, make_sandbox

URL = "/api/v1/sandboxes"


def _at(value: str) -> datetime:
    parsed = parse_datetime(value)
    assert parsed is not None
    return parsed


def test_a_researcher_gets_a_running_slice_in_one_request(run_jobs, fleet, alice, slice_body):
    created = run_jobs(lambda: alice.post(URL, slice_body, format="json"))
    assert created.status_code == 201, created.json()
    assert created.json()["team"] == "vision"

    body = alice.get(f"{URL}/{created.json()['id']}").json()
    assert body["state"] == "running"
    assert body["owner"] == "alice"
    assert body["gpu"]["type"] == "h100-80gb"
    assert body["gpu"]["mig_profile"] == "1g.10gb"
    assert body["approval"] is None
    assert body["placement"]["node"] == "gpu-h100-b"
    assert body["placement"]["mig_profile"] == "1g.10gb"
    assert isinstance(body["placement"]["gpu"], int)
    assert isinstance(body["placement"]["start"], int)
    assert body["access"]
    assert body["started_at"] is not None
    assert body["hourly_cost"] == "0.98"  # 6.88 x 1/7
    assert body["cost_so_far"] == "0.00"


def test_four_gpus_for_two_days_wait_for_the_lead_and_run_once_approved(
    run_jobs, fleet, alice, bob, big_body
):
    created = alice.post(URL, big_body, format="json")
    assert created.status_code == 201
    body = created.json()
    assert body["state"] == "pending_approval"
    assert body["placement"] is None
    assert body["approval"]["state"] == "pending"
    assert "approval" in body["message"]

    decided = run_jobs(
        lambda: bob.post(
            f"/api/v1/approvals/{body['approval']['id']}/approve", {"comment": "go"}, format="json"
        )
    )
    assert decided.status_code == 200, decided.json()

    after = alice.get(f"{URL}/{body['id']}").json()
    assert after["state"] == "running"
    assert after["placement"] == {"node": "gpu-h100-a", "gpus": [0, 1, 2, 3]}
    assert after["approval"] == {
        "id": body["approval"]["id"],
        "kind": "create",
        "state": "approved",
        "decided_by": "bob",
        "comment": "go",
    }
    assert after["hourly_cost"] == "27.52"


def test_a_request_with_expires_at_ends_then(fleet, alice, slice_body):
    expires_at = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)
    body = {**slice_body, "expires_at": expires_at.isoformat()}
    del body["ttl_hours"]
    response = alice.post(URL, body, format="json")
    assert response.status_code == 201, response.json()
    assert _at(response.json()["expires_at"]) == expires_at


VALIDATION_CASES = {
    "unknown GPU type": ({"gpu": {"type": "tpu-v5", "count": 1}}, "gpu.type"),
    "MIG profile the type lacks": (
        {"gpu": {"type": "h100-80gb", "mig_profile": "1g.5gb"}},
        "gpu.mig_profile",
    ),
    "count below one": ({"gpu": {"type": "h100-80gb", "count": 0}}, "gpu.count"),
    "count above the node size": ({"gpu": {"type": "h100-80gb", "count": 9}}, "gpu.count"),
    "lifetime beyond the team maximum": ({"ttl_hours": 169}, "ttl_hours"),
    "lifetime of zero": ({"ttl_hours": 0}, "ttl_hours"),
    "neither ttl_hours nor expires_at": ({"ttl_hours": None}, "ttl_hours"),
    "expires_at in the past": ({"ttl_hours": None, "expires_at": "2020-01-01T00:00:00Z"}, "expires_at"),
    "expires_at beyond the team maximum": (
        {"ttl_hours": None, "expires_at": "2999-01-01T00:00:00Z"},
        "expires_at",
    ),
    "a team the user is not in": ({"team": "nlp"}, "team"),
    "a team that does not exist": ({"team": "nope"}, "team"),
    "a name that is not a DNS label": ({"name": "Not_OK"}, "name"),
    "an unknown image": ({"image": "nope"}, "image"),
    "cpu out of range": ({"cpu": 0}, "cpu"),
}


@pytest.mark.parametrize("change, field", VALIDATION_CASES.values(), ids=VALIDATION_CASES.keys())
def test_a_bad_request_names_the_field_and_creates_nothing(
    fleet, alice, other_researcher, slice_body, change, field
):
    response = alice.post(URL, {**slice_body, **change}, format="json")
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert field in error["fields"], error
    assert error["message"]
    assert not Workload.objects.exists()


def test_every_field_error_is_reported_at_once(fleet, alice, slice_body):
    body = {**slice_body, "team": "nlp", "gpu": {"type": "tpu-v5"}, "ttl_hours": -1}
    fields = alice.post(URL, body, format="json").json()["error"]["fields"]
    assert {"team", "gpu.type", "ttl_hours"} <= set(fields)


def test_a_second_live_sandbox_with_the_same_name_is_refused(
    fleet, h100, team, researcher, alice, slice_body
):
    make_sandbox(owner=researcher, team=team, gpu_type=h100, name="mig-small", state="running")
    response = alice.post(URL, slice_body, format="json")
    assert response.status_code == 400
    assert "name" in response.json()["error"]["fields"]
    assert Workload.objects.count() == 1


def test_an_ended_sandbox_name_may_be_used_again(fleet, h100, team, researcher, alice, slice_body):
    ended = make_sandbox(owner=researcher, team=team, gpu_type=h100, name="mig-small", state="terminated")
    response = alice.post(URL, slice_body, format="json")
    assert response.status_code == 201
    assert response.json()["name"] == "mig-small" and response.json()["id"] != ended.number


def test_over_quota_says_how_much_is_left_and_creates_nothing(fleet, team, alice, slice_body):
    team.quota_gpus = Decimal("0.1")
    team.save()
    response = alice.post(URL, slice_body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "quota_exceeded"
    assert error["fields"] == {"quota_left": "0.100", "requested": "0.143"}
    assert "0.1 of 0.1" in error["message"]
    assert not Workload.objects.exists()


def test_the_same_idempotency_key_and_body_return_the_first_sandbox(fleet, alice, slice_body):
    first = alice.post(URL, slice_body, format="json", HTTP_IDEMPOTENCY_KEY="run-42")
    again = alice.post(URL, slice_body, format="json", HTTP_IDEMPOTENCY_KEY="run-42")
    assert first.status_code == again.status_code == 201
    assert again.json()["id"] == first.json()["id"]
    assert again["Idempotent-Replayed"] == "true"
    assert Workload.objects.count() == 1


def test_the_same_idempotency_key_with_another_body_is_a_conflict(fleet, alice, slice_body):
    alice.post(URL, slice_body, format="json", HTTP_IDEMPOTENCY_KEY="run-42")
    other = alice.post(URL, {**slice_body, "name": "other"}, format="json", HTTP_IDEMPOTENCY_KEY="run-42")
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert Workload.objects.count() == 1


def test_without_an_idempotency_key_two_posts_make_two_sandboxes(fleet, alice, slice_body):
    alice.post(URL, slice_body, format="json")
    alice.post(URL, {**slice_body, "name": "second"}, format="json")
    assert Workload.objects.count() == 2


def test_a_stranger_learns_nothing_of_a_teams_datasets(fleet, alice, other_team, slice_body):
    """Asking with another team's dataset and with one that does not exist gets the same answer:
    not a member of that team (the dataset check would tell which slugs the team has)."""
    secret = Dataset.objects.create(
        slug="secret-ds", name="NLP's", kind="nfs", nfs_server="nfs", nfs_path="/x"
    )
    secret.teams.add(other_team)
    answers = [
        alice.post(f"{URL}{path}", {**slice_body, "team": "nlp", "datasets": [slug]}, format="json")
        for path in ("/estimate", "")
        for slug in ("secret-ds", "no-such-ds")
    ]
    assert {a.status_code for a in answers} == {400}
    bodies = [a.json()["error"] for a in answers]
    assert bodies[0] == bodies[1] and bodies[2] == bodies[3] and "datasets" not in bodies[0]["fields"]
    assert "not a member of a team called 'nlp'" in bodies[0]["fields"]["team"][0]
    assert not Workload.objects.exists()


def test_the_estimate_prices_a_request_without_creating_it(fleet, alice, big_body):
    response = alice.post(f"{URL}/estimate", big_body, format="json")
    assert response.status_code == 200
    assert response.json() == {
        "hourly_cost": "27.52",
        "total_cost": "1320.96",
        "gpu_equivalents": "4.000",
        "quota_left": "16.000",
        "fits_quota": True,
        "auto_approved": False,
        "why_needed": "Needs a lead's approval: more than 1 whole GPU and longer than 24 hours.",
        "capacity_free_now": True,
        "starts_at": None,
    }
    assert not Workload.objects.exists()


def test_another_users_sandbox_is_not_found(fleet, alice, carol, slice_body):
    workload_id = alice.post(URL, slice_body, format="json").json()["id"]
    for response in (
        carol.get(f"{URL}/{workload_id}"),
        carol.post(f"{URL}/{workload_id}/extend", {"hours": 1}, format="json"),
        carol.post(f"{URL}/{workload_id}/terminate"),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert Workload.objects.get().state != "terminated"


def test_an_unknown_sandbox_is_not_found(fleet, alice):
    response = alice.get(f"{URL}/999999")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_extending_within_policy_moves_the_expiry(run_jobs, fleet, alice, slice_body):
    made = run_jobs(lambda: alice.post(URL, slice_body, format="json")).json()
    created = alice.get(f"{URL}/{made['id']}").json()  # running: its expiry is set
    response = alice.post(f"{URL}/{created['id']}/extend", {"hours": 4}, format="json")
    assert response.status_code == 200
    moved = _at(response.json()["expires_at"]) - _at(created["expires_at"])
    assert moved == timedelta(hours=4)
    assert response.json()["approval"] is None


def test_extending_past_the_auto_approval_line_waits_for_a_lead(run_jobs, fleet, alice, bob, slice_body):
    made = run_jobs(lambda: alice.post(URL, slice_body, format="json")).json()
    created = alice.get(f"{URL}/{made['id']}").json()  # running: its expiry is set
    response = alice.post(f"{URL}/{created['id']}/extend", {"hours": 30}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["expires_at"] == created["expires_at"]
    assert body["approval"]["kind"] == "extend"
    assert body["approval"]["state"] == "pending"

    approved = bob.post(f"/api/v1/approvals/{body['approval']['id']}/approve", format="json")
    assert approved.status_code == 200
    after = alice.get(f"{URL}/{created['id']}").json()
    assert _at(after["expires_at"]) - _at(created["expires_at"]) == timedelta(hours=30)


def test_extending_a_terminated_sandbox_is_a_conflict(run_jobs, fleet, alice, slice_body):
    workload_id = run_jobs(lambda: alice.post(URL, slice_body, format="json")).json()["id"]
    run_jobs(lambda: alice.post(f"{URL}/{workload_id}/terminate"))
    assert alice.get(f"{URL}/{workload_id}").json()["state"] == "terminated"

    response = alice.post(f"{URL}/{workload_id}/extend", {"hours": 1}, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"


def test_terminating_ends_the_sandbox_and_a_second_time_is_a_conflict(run_jobs, fleet, alice, slice_body):
    workload_id = run_jobs(lambda: alice.post(URL, slice_body, format="json")).json()["id"]
    response = run_jobs(lambda: alice.post(f"{URL}/{workload_id}/terminate"))
    assert response.status_code == 200
    assert response.json()["state"] in ("terminating", "terminated")
    assert response.json()["ended_at"] is not None

    after = alice.get(f"{URL}/{workload_id}").json()
    assert after["state"] == "terminated"
    assert after["hourly_cost"] == "0.00"
    assert alice.post(f"{URL}/{workload_id}/terminate").status_code == 409


def test_a_lead_may_terminate_a_team_members_sandbox(run_jobs, fleet, alice, bob, slice_body):
    workload_id = run_jobs(lambda: alice.post(URL, slice_body, format="json")).json()["id"]
    assert run_jobs(lambda: bob.post(f"{URL}/{workload_id}/terminate")).status_code == 200
    assert Workload.objects.get(kind="sandbox", number=workload_id).state == "terminated"


def test_a_request_that_cannot_be_placed_shows_its_queue_position(run_jobs, fleet, team, alice, slice_body):
    team.auto_approve_max_gpus = 8
    team.save()
    whole = {"team": "vision", "gpu": {"type": "h100-80gb", "count": 8}, "ttl_hours": 1}
    assert run_jobs(lambda: alice.post(URL, {**whole, "name": "all-eight"}, format="json")).status_code == 201
    first = alice.post(
        URL, {**whole, "name": "waits-1", "gpu": {"type": "h100-80gb", "count": 1}}, format="json"
    )
    second = alice.post(
        URL, {**whole, "name": "waits-2", "gpu": {"type": "h100-80gb", "count": 2}}, format="json"
    )
    assert first.json()["state"] == "queued"
    assert first.json()["queue_position"] == 1
    assert second.json()["queue_position"] == 2
    assert "capacity" in first.json()["message"]

    listed = {s["name"]: s["queue_position"] for s in alice.get(URL).json()["results"]}
    assert listed == {"all-eight": None, "waits-1": 1, "waits-2": 2}


@pytest.fixture
def three_owners(h100, team, other_team, researcher, lead, other_researcher):
    make_sandbox(owner=researcher, team=team, gpu_type=h100, name="alices", state="terminated")
    make_sandbox(owner=lead, team=team, gpu_type=h100, name="bobs", state="running")
    make_sandbox(owner=other_researcher, team=other_team, gpu_type=h100, name="carols", state="terminated")


@pytest.mark.parametrize(
    "who, names",
    [
        ("alice", {"alices"}),
        ("bob", {"alices", "bobs"}),
        ("carol", {"carols"}),
        ("admin", {"alices", "bobs", "carols"}),
    ],
)
def test_the_list_shows_what_each_role_may_see(three_owners, alice, bob, carol, admin, who, names):
    client = {"alice": alice, "bob": bob, "carol": carol, "admin": admin}[who]
    body = client.get(URL).json()
    assert {s["name"] for s in body["results"]} == names
    assert body["count"] == len(names)


def test_the_list_is_newest_first_and_paginated(h100, team, researcher, alice):
    now = timezone.now()
    for age, name in [(3, "oldest"), (1, "newest"), (2, "middle")]:
        sandbox = make_sandbox(owner=researcher, team=team, gpu_type=h100, name=name, state="terminated")
        Workload.objects.filter(pk=sandbox.pk).update(created_at=now - timedelta(hours=age))
    first = alice.get(URL, {"page_size": 2}).json()
    assert [s["name"] for s in first["results"]] == ["newest", "middle"]
    assert first["count"] == 3
    second = alice.get(first["next"]).json()
    assert [s["name"] for s in second["results"]] == ["oldest"]


def test_the_list_filters_with_the_sandbox_filter(three_owners, admin):
    assert [s["name"] for s in admin.get(URL, {"state": "running"}).json()["results"]] == ["bobs"]
    assert [s["name"] for s in admin.get(URL, {"live": "true"}).json()["results"]] == ["bobs"]
    assert [s["name"] for s in admin.get(URL, {"team": "nlp"}).json()["results"]] == ["carols"]
    assert [s["name"] for s in admin.get(URL, {"q": "alic"}).json()["results"]] == ["alices"]


def test_an_unknown_state_filter_is_a_400(three_owners, admin):
    response = admin.get(URL, {"state": "sleeping"})
    assert response.status_code == 400
    assert "state" in response.json()["error"]["fields"]


def _list_queries(client, count: int) -> int:
    client.get(URL)  # the token's last-used time is written at most once a minute: not per page
    with CaptureQueriesContext(connection) as queries:
        response = client.get(URL, {"page_size": 50})
    assert response.status_code == 200
    assert len(response.json()["results"]) == count
    return len(queries)


def _fill(researcher, team, h100, start: int, stop: int) -> None:
    gpus = list(Gpu.objects.filter(node__name="gpu-h100-a"))
    now = timezone.now()
    for number in range(start, stop):
        state = ["terminated", "queued", "pending_approval"][number % 3]
        sandbox = make_sandbox(owner=researcher, team=team, gpu_type=h100, name=f"box-{number}", state=state)
        make_hold(
            gpu=gpus[number % len(gpus)],
            user=researcher,
            team=team,
            workload=sandbox,
            started_at=now - timedelta(hours=2),
            ended_at=now - timedelta(hours=1),
        )
        Approval.objects.create(
            workload=sandbox, team=team, requested_by=researcher, why_needed="x", state="approved"
        )


def test_listing_sandboxes_takes_the_same_few_queries_for_two_or_twenty(fleet, h100, team, researcher, alice):
    _fill(researcher, team, h100, 0, 2)
    few = _list_queries(alice, 2)
    _fill(researcher, team, h100, 2, 20)
    many = _list_queries(alice, 20)
    assert many == few
    assert many <= 15


def test_the_owner_shares_a_sandbox_through_the_api_and_it_shows_who_and_where_to_open(
    run_jobs, fleet, alice, bob, carol, lead, slice_body
):
    created = run_jobs(lambda: alice.post(URL, slice_body, format="json")).json()
    assert created["shared_with"] == [] and created["open_url"] is None  # not running yet
    created = alice.get(f"{URL}/{created['id']}").json()
    assert created["state"] == "running"
    assert created["open_url"].startswith("http://127.0.0.1:8000/auth/sandbox/signin/?rd=")

    shared = alice.put(f"{URL}/{created['id']}/sharing", {"users": ["bob"]}, format="json")
    assert shared.status_code == 200 and shared.json()["shared_with"] == ["bob"]
    assert alice.get(URL).json()["results"][0]["shared_with"] == ["bob"]

    refused = alice.put(f"{URL}/{created['id']}/sharing", {"users": ["carol"]}, format="json")
    assert refused.status_code == 400 and refused.json()["error"]["fields"] == {"users": ["carol"]}
    assert (
        bob.put(f"{URL}/{created['id']}/sharing", {"users": []}, format="json").status_code == 403
    )  # a lead
    assert carol.put(f"{URL}/{created['id']}/sharing", {"users": []}, format="json").status_code == 404
    assert alice.put(f"{URL}/{created['id']}/sharing", {"users": "bob"}, format="json").status_code == 400
    assert alice.get(f"{URL}/{created['id']}").json()["shared_with"] == ["bob"]  # nothing changed


def test_a_teammate_finds_what_is_shared_with_them_and_where_to_open_it(
    run_jobs, fleet, alice, carol, client_for, team, slice_body
):
    dave = UserFactory(username="dave")
    MembershipFactory(user=dave, team=team)
    as_dave = client_for(dave)
    created = run_jobs(lambda: alice.post(URL, slice_body, format="json")).json()
    assert as_dave.get(f"{URL}/shared").json()["results"] == []

    alice.put(f"{URL}/{created['id']}/sharing", {"users": ["dave"]}, format="json")
    [shared] = as_dave.get(f"{URL}/shared").json()["results"]
    assert (shared["id"], shared["owner"], shared["team"], shared["gpu"]) == (
        created["id"],
        "alice",
        "vision",
        "h100-80gb 1g.10gb",
    )
    assert shared["open_url"].startswith("http://127.0.0.1:8000/auth/sandbox/signin/?rd=")
    assert as_dave.get(f"{URL}/{created['id']}").status_code == 404  # its page and actions stay alice's
    assert carol.get(f"{URL}/shared").json()["results"] == []

    alice.put(f"{URL}/{created['id']}/sharing", {"users": []}, format="json")
    assert as_dave.get(f"{URL}/shared").json()["results"] == []
    assert as_dave.get(f"{URL}/shared", {"x": "1"}).status_code == 400

    alice.put(f"{URL}/{created['id']}/sharing", {"users": ["dave"]}, format="json")
    Membership.objects.filter(user=dave).delete()  # dave leaves the team: the check lets him in no more
    assert as_dave.get(f"{URL}/shared").json()["results"] == []


def test_restart_and_insight_through_the_api(run_jobs, fleet, alice, carol, slice_body):
    created = run_jobs(lambda: alice.post(URL, slice_body, format="json")).json()
    empty = alice.get(f"{URL}/{created['id']}/insight").json()
    assert empty["read_at"] is None and empty["events"] == []
    asked = run_jobs(lambda: alice.post(f"{URL}/{created['id']}/insight"))
    assert asked.status_code == 202
    read = alice.get(f"{URL}/{created['id']}/insight").json()
    assert read["pending"] is False and read["read_at"] and "[simulated cluster]" in read["log_tail"]
    assert {"at", "type", "reason", "message", "object"} == set(read["events"][0])
    restarted = run_jobs(lambda: alice.post(f"{URL}/{created['id']}/restart"))
    assert restarted.status_code == 200 and restarted.json()["state"] == "running"
    assert carol.post(f"{URL}/{created['id']}/restart").status_code == 404
    assert carol.get(f"{URL}/{created['id']}/insight").status_code == 404


def test_a_kubeconfig_through_the_api(run_jobs, fleet, alice, bob, slice_body):
    created = run_jobs(lambda: alice.post(URL, slice_body, format="json")).json()
    url = f"{URL}/{created['id']}/kubeconfig"
    assert alice.get(url).json() == {"state": "none", "expires_at": None, "error": "", "kubeconfig": ""}
    asked = run_jobs(lambda: alice.post(url))
    assert asked.status_code == 202
    ready = alice.get(url).json()
    assert ready["state"] == "ready" and ready["kubeconfig"].startswith("# GPU Portal: kubectl access")
    assert "current-context: " in ready["kubeconfig"]
    assert bob.post(url).status_code == 403  # a lead: not the owner
    assert bob.get(url).json()["state"] == "none"  # and none was issued to them


def test_a_kubeconfig_needs_a_token_of_the_admin_scope(run_jobs, fleet, alice, researcher, slice_body):
    """A kubeconfig opens a shell in the sandbox and lasts up to a day after the token that got it is
    revoked: a read or workloads token may neither ask for one nor read it."""
    created = run_jobs(lambda: alice.post(URL, slice_body, format="json")).json()
    url = f"{URL}/{created['id']}/kubeconfig"
    for scope in ("read", "workloads"):
        narrow = token_client(researcher, scope)
        refused = narrow.get(url)
        assert refused.status_code == 403 and "admin scope" in refused.json()["error"]["message"]
        assert narrow.post(url).status_code == 403  # a read token: read-only first
        assert narrow.get(f"{URL}/{created['id']}").status_code == 200  # the sandbox itself it reads
    assert run_jobs(lambda: alice.post(url)).status_code == 202  # admin scope (alice's client)
    assert alice.get(url).json()["state"] == "ready"
    read = token_client(researcher, "read").get(url)
    assert read.status_code == 403 and "kubeconfig" not in read.json()


def test_a_token_short_of_the_admin_scope_may_stop_sharing_but_not_share_with_more(
    run_jobs, fleet, alice, researcher, lead, slice_body
):
    from tests.conftest import token_client

    created = run_jobs(lambda: alice.post(URL, slice_body, format="json")).json()
    sharing = f"{URL}/{created['id']}/sharing"
    workloads = token_client(researcher, "workloads")
    refused = workloads.put(sharing, {"users": ["bob"]}, format="json")
    assert refused.status_code == 403 and "admin scope" in refused.json()["error"]["message"]
    assert alice.get(f"{URL}/{created['id']}").json()["shared_with"] == []  # nothing changed
    assert (
        token_client(researcher, "admin").put(sharing, {"users": ["bob"]}, format="json").status_code == 200
    )
    assert workloads.put(sharing, {"users": ["bob"]}, format="json").status_code == 200  # adds nobody
    stopped = workloads.put(sharing, {"users": []}, format="json")
    assert stopped.status_code == 200 and stopped.json()["shared_with"] == []
