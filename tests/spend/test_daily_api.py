"""GET /spend/daily: cost per UTC day split by user, GPU type or workload (top N and the rest),
GPU-hours, the running total, a team's month budget; the same figures as GET /spend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from portal.fleet.models import Gpu, StorageHold
from portal.spend.selectors import month_start
from tests.rows import make_hold, make_sandbox

URL = "/api/v1/spend/daily"
MARCH = {"start": "2026-03-01T00:00:00Z", "end": "2026-04-01T00:00:00Z"}
WEEK = {"start": "2026-03-01T00:00:00Z", "end": "2026-03-08T00:00:00Z"}


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def holds(fleet, team, other_team, researcher, lead, other_researcher):
    """alice: a 1g.10gb for 2 h; bob: a whole H100 for 2 h over midnight; carol (nlp): 3 h. At 6.88/h."""
    whole = list(Gpu.objects.filter(mig_enabled=False).order_by("index"))
    mig = Gpu.objects.filter(mig_enabled=True).first()
    make_hold(
        gpu=mig, mig_profile="1g.10gb", share=(1, 7), user=researcher, team=team,
        started_at=at("2026-03-02T10:00"), ended_at=at("2026-03-02T12:00"),
    )  # fmt: skip
    make_hold(
        gpu=whole[0], user=lead, team=team, started_at=at("2026-03-02T23:00"), ended_at=at("2026-03-03T01:00")
    )
    make_hold(
        gpu=whole[1], user=other_researcher, team=other_team,
        started_at=at("2026-03-05T00:00"), ended_at=at("2026-03-05T03:00"),
    )  # fmt: skip


def ok(response) -> dict:
    assert response.status_code == 200, response.json()
    return response.json()


def day(body: dict, iso: str) -> dict:
    return next(d for d in body["days"] if d["day"] == iso)


def test_a_lead_gets_each_day_split_by_user_with_the_running_total_and_the_months_budget(holds, bob, team):
    body = ok(bob.get(URL, {**MARCH, "split": "user", "team": "vision"}))

    assert [(g["key"], g["label"], g["cost"], g["gpu_hours"]) for g in body["groups"]] == [
        ("bob", "Bob", "13.76", "2.00"),
        ("alice", "Alice", "1.97", "0.29"),  # 6.88 x 1/7 x 2 h = 1.9657...
    ]
    assert len(body["days"]) == 31 and body["days"][0]["day"] == "2026-03-01"
    assert day(body, "2026-03-02") == {
        "day": "2026-03-02", "cost": "8.85", "gpu_hours": "1.29", "cumulative": "8.85", "by_group": ["6.88", "1.97"],
    }  # fmt: skip
    assert day(body, "2026-03-03")["by_group"] == ["6.88", "0.00"]
    assert day(body, "2026-03-03")["cumulative"] == "15.73"  # 15.7257..., not 8.85 + 6.88
    assert body["days"][-1]["cumulative"] == body["total"] == "15.73"
    assert body["gpu_hours"] == "2.29"
    assert body["budget"] == {
        "team": "vision", "month": "2026-03-01", "budget": f"{team.monthly_budget:.2f}",
        "thresholds": [50, 80, 100], "forecast": None,  # a month gone by has nothing to forecast
    }  # fmt: skip


def test_the_top_groups_are_named_and_the_rest_share_one(holds, admin):
    body = ok(admin.get(URL, {**WEEK, "split": "user", "top": 2}))

    assert [(g["key"], g["cost"]) for g in body["groups"]] == [
        ("carol", "20.64"),
        ("bob", "13.76"),
        ("others", "1.97"),
    ]
    assert day(body, "2026-03-02")["by_group"] == ["0.00", "6.88", "1.97"]
    assert body["budget"] is None  # not one team's month


def test_the_figures_are_exactly_those_of_the_spend_report(holds, admin):
    daily = ok(admin.get(URL, {**WEEK, "split": "gpu_type"}))
    by_day = ok(admin.get("/api/v1/spend", {**WEEK, "group_by": "day"}))
    by_type = ok(admin.get("/api/v1/spend", {**WEEK, "group_by": "gpu_type"}))
    by_team = ok(admin.get("/api/v1/spend", {**WEEK, "group_by": "team"}))

    spent_days = {d["day"]: (d["cost"], d["gpu_hours"]) for d in daily["days"] if d["cost"] != "0.00"}
    assert spent_days == {r["key"]: (r["cost"], r["gpu_hours"]) for r in by_day["rows"]}
    assert [(g["key"], g["cost"], g["gpu_hours"]) for g in daily["groups"]] == [
        (r["key"], r["cost"], r["gpu_hours"]) for r in by_type["rows"]
    ]
    assert daily["total"] == by_team["total"] == "36.37"
    assert sum(Decimal(d["cost"]) for d in daily["days"]) == Decimal(by_day["total"])


def test_storage_and_workloads_are_groups_of_their_own(holds, fleet, researcher, team, alice):
    whole = Gpu.objects.filter(mig_enabled=False).order_by("index")[5]
    box = make_sandbox(owner=researcher, team=team, name="notebook", gpu_type=whole.gpu_type)
    make_hold(
        gpu=whole, user=researcher, team=team, workload=box,
        started_at=at("2026-03-04T00:00"), ended_at=at("2026-03-04T01:00"),
    )  # fmt: skip
    StorageHold.objects.create(
        user=researcher,
        team=team,
        what="home of alice",
        size_gb=50,
        price_per_gb_month=Decimal("0.10"),
        started_at=at("2026-03-01T00:00"),
        ended_at=at("2026-03-04T01:00"),
    )  # fmt: skip  50 GB x 73 h / 730 x 0.10 = $0.50

    body = ok(alice.get(URL, {**WEEK, "split": "workload"}))
    assert [(g["key"], g["label"], g["cost"]) for g in body["groups"]] == [
        (f"sandbox-{box.number}", "sandbox notebook", "6.88"),
        ("storage", "Persistent storage (homes)", "0.50"),
        ("others", "Everything else", "1.97"),  # the slice of no workload
    ]
    by_type = ok(alice.get(URL, {**WEEK, "split": "gpu_type"}))
    assert [(g["key"], g["cost"], g["gpu_hours"]) for g in by_type["groups"]] == [
        ("h100-80gb", "8.85", "1.29"),
        ("storage", "0.50", "0.00"),
    ]
    assert by_type["total"] == ok(alice.get("/api/v1/spend", {**WEEK, "group_by": "user"}))["total"] == "9.35"


def test_a_name_used_again_is_told_apart_by_the_workloads_number(holds, fleet, researcher, team, alice):
    """An ended sandbox and the one requested anew under its name: the chart's series and the
    report's rows name both with their numbers; a name used once stays as it is."""
    whole = list(Gpu.objects.filter(mig_enabled=False).order_by("index"))
    first = make_sandbox(
        owner=researcher, team=team, name="notebook", gpu_type=whole[0].gpu_type, state="expired"
    )
    again = make_sandbox(owner=researcher, team=team, name="notebook", gpu_type=whole[0].gpu_type)
    other = make_sandbox(owner=researcher, team=team, name="trainer", gpu_type=whole[0].gpu_type)
    for n, (box, hours) in enumerate(((first, 3), (again, 2), (other, 1))):
        make_hold(
            gpu=whole[3 + n], user=researcher, team=team, workload=box,
            started_at=at("2026-03-04T00:00"), ended_at=at("2026-03-04T00:00") + timedelta(hours=hours),
        )  # fmt: skip
    want = [
        (f"sandbox-{first.number}", f"sandbox notebook #{first.number}"),
        (f"sandbox-{again.number}", f"sandbox notebook #{again.number}"),
        (f"sandbox-{other.number}", "sandbox trainer"),
    ]
    body = ok(alice.get(URL, {**WEEK, "split": "workload"}))
    assert [(g["key"], g["label"]) for g in body["groups"]][:3] == want
    rows = ok(alice.get("/api/v1/spend", {**WEEK, "group_by": "workload"}))["rows"]
    assert [(r["key"], r["label"]) for r in rows][:3] == want


@pytest.mark.parametrize(
    "who, expected",
    [
        ("alice", ["alice"]),
        ("bob", ["bob", "alice"]),
        ("carol", ["carol"]),
        ("admin", ["carol", "bob", "alice"]),
    ],
)
def test_each_role_sees_only_the_spend_it_may(holds, alice, bob, carol, admin, who, expected):
    client = {"alice": alice, "bob": bob, "carol": carol, "admin": admin}[who]
    assert [g["key"] for g in ok(client.get(URL, WEEK))["groups"]] == expected


def test_a_researcher_sees_no_budget_line_of_spend_they_do_not_see_whole(holds, alice, admin):
    body = ok(alice.get(URL, {**MARCH, "team": "vision"}))
    assert [g["key"] for g in body["groups"]] == ["alice"] and body["budget"] is None
    assert ok(admin.get(URL, {**MARCH, "team": "vision"}))["budget"]["team"] == "vision"


def test_the_month_under_way_has_its_forecast(fleet, lead, team, bob):
    whole = Gpu.objects.filter(mig_enabled=False).first()
    now = timezone.now()
    make_hold(gpu=whole, user=lead, team=team, started_at=now - timedelta(minutes=30), ended_at=None)

    body = ok(bob.get(URL, {"team": "vision"}))  # this month so far

    assert body["start"].startswith(month_start(now).strftime("%Y-%m-%dT00:00:00"))
    forecast = body["budget"]["forecast"]
    assert forecast["hourly"] == "6.88"
    assert Decimal(forecast["month_end"]) > Decimal(forecast["spent"])  # the live GPU until the month's end
    assert body["days"][-1]["day"] == now.date().isoformat()


@pytest.mark.parametrize(
    "params, field",
    [
        ({"split": "team"}, "split"),
        ({"split": "day"}, "split"),
        ({"top": "0"}, "top"),
        ({"top": "21"}, "top"),
        ({"start": "yesterday"}, "start"),
        ({"start": "2026-03-08T00:00:00Z", "end": "2026-03-01T00:00:00Z"}, "end"),
        ({"start": "2025-01-01T00:00:00Z", "end": "2026-03-01T00:00:00Z"}, "end"),
    ],
)
def test_bad_parameters_are_a_400_naming_the_field(holds, alice, params, field):
    response = alice.get(URL, params)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and field in error["fields"]


@pytest.mark.parametrize("slug", ["nlp", "nope"])
def test_a_team_one_is_not_in_is_not_found_as_in_the_spend_report(holds, alice, slug):
    response = alice.get(URL, {"team": slug})
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert alice.get("/api/v1/spend", {"team": slug}).status_code == 404


def test_signed_out_callers_are_refused(holds, client):
    assert client.get(URL).status_code in (401, 403)
