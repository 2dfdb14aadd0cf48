"""GET /audit-events: what each action writes (who did what to which object of which team, from
which state to which), and who reads it: admins all, leads their teams', researchers none;
filterable, paginated."""

from __future__ import annotations

from portal.sandboxes.models import Home
from portal.workloads.models import Workload

URL = "/api/v1/audit-events"


def events(client, **filters) -> list[tuple]:
    """The events the client may read, oldest first, as (actor, action, object, team, from, to)."""
    body = client.get(URL, {"page_size": 100, **filters}).json()
    return [
        (
            e["actor"],
            e["action"],
            f"{e['object_type']}:{e['object_id']}",
            e["team"],
            e["from_state"],
            e["to_state"],
        )
        for e in reversed(body["results"])
    ]


def _key(sandbox: dict) -> str:
    """Events name a workload by the number the API calls its id (they keep its primary key)."""
    assert Workload.objects.get(kind="sandbox", number=sandbox["id"]).pk is not None
    return str(sandbox["id"])


def test_a_sandbox_is_audited_from_request_to_end_with_who_did_each_step(
    run_jobs, fleet, alice, admin, slice_body
):
    sandbox = run_jobs(lambda: alice.post("/api/v1/sandboxes", slice_body, format="json")).json()
    run_jobs(lambda: alice.post(f"/api/v1/sandboxes/{sandbox['id']}/terminate", format="json"))

    box = f"sandbox:{_key(sandbox)}"
    assert events(admin, object_type="sandbox") == [
        ("alice", "sandbox.request", box, "vision", "", "queued"),
        (None, "sandbox.placed", box, "vision", "queued", "provisioning"),
        (None, "sandbox.running", box, "vision", "provisioning", "running"),
        ("alice", "sandbox.terminating", box, "vision", "running", "terminating"),
        (None, "sandbox.terminated", box, "vision", "terminating", "terminated"),
    ]
    # the id an event shows finds the same events again, in the JSON and in the CSV
    assert events(admin, object_type="sandbox", object_id=_key(sandbox)) == events(
        admin, object_type="sandbox"
    )
    csv = admin.get(URL, {"object_type": "sandbox", "format": "csv"})
    csv_lines = b"".join(csv.streaming_content).decode().splitlines()
    assert {line.split(",")[4] for line in csv_lines[1:]} == {_key(sandbox)}
    request = admin.get(URL, {"action": "sandbox.request"}).json()["results"][0]
    assert request["object_repr"] == f"mig-small (#{sandbox['id']})"
    assert request["detail"] == "h100-80gb 1g.10gb for 1 h"


def test_a_leads_approval_is_audited_with_the_decider(run_jobs, fleet, alice, bob, admin, big_body):
    sandbox = alice.post("/api/v1/sandboxes", big_body, format="json").json()
    approval = bob.get("/api/v1/approvals").json()["results"][0]
    run_jobs(lambda: bob.post(f"/api/v1/approvals/{approval['id']}/approve", {}, format="json"))

    box = f"sandbox:{_key(sandbox)}"
    assert events(admin, team="vision") == [
        ("alice", "sandbox.request", box, "vision", "", "pending_approval"),
        ("bob", "approval.approve", f"approval:{approval['id']}", "vision", "pending", "approved"),
        ("bob", "sandbox.approved", box, "vision", "pending_approval", "queued"),
        ("bob", "sandbox.placed", box, "vision", "queued", "provisioning"),
        (
            None,
            "home.created",
            f"home:{Home.objects.get().pk}",
            "vision",
            "",
            "",
        ),  # her first sandbox makes it
        (None, "sandbox.running", box, "vision", "provisioning", "running"),
    ]


def test_creating_and_revoking_a_token_are_audited_with_its_prefix_only(alice, admin):
    token = alice.post("/api/v1/tokens", {"name": "ci"}, format="json").json()
    alice.post(f"/api/v1/tokens/{token['id']}/revoke", format="json")

    mine = admin.get(URL, {"object_type": "apitoken", "object_id": str(token["id"])}).json()["results"]
    assert [(e["actor"], e["action"], e["object_type"]) for e in reversed(mine)] == [
        ("alice", "token.create", "apitoken"),
        ("alice", "token.revoke", "apitoken"),
    ]
    details = {e["action"]: e["detail"] for e in mine}
    assert details["token.revoke"] == f"token {token['prefix']}…"
    assert details["token.create"].startswith(f"token {token['prefix']}… (workloads), made with token gpp_")
    assert token["token"] not in str(mine)  # the secret itself is never written down


def test_an_admin_sees_every_teams_events_newest_first(run_jobs, fleet, alice, carol, admin, slice_body):
    run_jobs(lambda: alice.post("/api/v1/sandboxes", slice_body, format="json"))
    carol.post("/api/v1/sandboxes", {**slice_body, "team": "nlp", "name": "carols"}, format="json")
    results = admin.get(URL, {"action": "sandbox.request"}).json()["results"]
    assert [(e["actor"], e["team"]) for e in results] == [("carol", "nlp"), ("alice", "vision")]
    times = [e["created_at"] for e in admin.get(URL).json()["results"]]
    assert times == sorted(times, reverse=True)


def test_a_lead_sees_their_teams_events_only(fleet, alice, bob, carol, admin, slice_body):
    alice.post("/api/v1/sandboxes", slice_body, format="json")
    carol.post("/api/v1/sandboxes", {**slice_body, "team": "nlp", "name": "carols"}, format="json")
    assert [(e[0], e[1], e[3]) for e in events(bob, action="sandbox.request")] == [
        ("alice", "sandbox.request", "vision")
    ]
    assert {e[3] for e in events(bob)} == {"vision"}
    assert {e[3] for e in events(admin, action="sandbox.request")} == {"vision", "nlp"}


def test_a_researcher_sees_no_audit_events_though_their_request_was_recorded(fleet, alice, admin, slice_body):
    alice.post("/api/v1/sandboxes", slice_body, format="json")
    assert [e[:2] for e in events(admin, actor="alice", action="sandbox.request")] == [
        ("alice", "sandbox.request")
    ]
    assert alice.get(URL).json()["count"] == 0


def test_audit_events_filter_by_action_and_actor_and_paginate(run_jobs, fleet, alice, admin, slice_body):
    run_jobs(lambda: alice.post("/api/v1/sandboxes", slice_body, format="json"))
    requested = admin.get(URL, {"action": "sandbox.request", "actor": "alice"}).json()
    assert [(e["action"], e["actor"]) for e in requested["results"]] == [("sandbox.request", "alice")]
    assert admin.get(URL, {"action": "sandbox.request", "actor": "bob"}).json()["count"] == 0
    everything = admin.get(URL).json()
    page = admin.get(URL, {"page_size": 1}).json()
    assert [e["id"] for e in page["results"]] == [everything["results"][0]["id"]]
    assert page["count"] == everything["count"] > 1
    second = admin.get(page["next"]).json()
    assert [e["id"] for e in second["results"]] == [everything["results"][1]["id"]]


def test_a_bad_since_filter_is_a_400(admin):
    response = admin.get(URL, {"since": "last tuesday"})
    assert response.status_code == 400
    assert "since" in response.json()["error"]["fields"]


def test_since_keeps_what_came_at_or_after_it_and_until_what_came_before(admin, team):
    from portal.audit.models import AuditEvent
    from portal.audit.services import audit_record

    for day in (1, 2, 3):
        audit_record(actor=None, action=f"team.day{day}", obj=team, team=team)
        AuditEvent.objects.filter(action=f"team.day{day}").update(created_at=f"2026-12-0{day}T12:00:00Z")

    def actions(**bounds) -> list[str]:
        return sorted(e[1] for e in events(admin, action="team.day", **bounds))

    assert actions(since="2026-12-02T12:00:00Z") == ["team.day2", "team.day3"]  # at it, and after
    assert actions(until="2026-12-02T12:00:00Z") == ["team.day1"]
    assert actions(since="2026-12-02T00:00:00Z", until="2026-12-03T00:00:00Z") == ["team.day2"]
    assert actions(since="0001-01-01T00:00:00+01:00") == ["team.day1", "team.day2", "team.day3"]
    assert actions(until="0001-01-01T00:00:00+01:00") == []


def test_filters_ignore_case_and_an_action_is_found_by_the_words_the_page_shows(
    run_jobs, fleet, alice, admin, slice_body
):
    sandbox = run_jobs(lambda: alice.post("/api/v1/sandboxes", slice_body, format="json")).json()
    alice.post(f"/api/v1/sandboxes/{sandbox['id']}/extend", {"hours": 1}, format="json")
    assert [e[1] for e in events(admin, action="Extended")] == ["sandbox.extend"]
    assert [e[1] for e in events(admin, action="EXTEND")] == ["sandbox.extend"]
    assert events(admin, team="Vision") == events(admin, team="vision") != []
    assert events(admin, actor="Alice") == events(admin, actor="alice") != []
    assert (
        events(admin, object_type="Sandbox", object_id=sandbox["id"])
        == events(admin, object_type="sandbox", object_id=sandbox["id"])
        != []
    )
    assert events(admin, team="vis") == []  # a whole slug or name, not a part
