"""GET /spend: exact figures from allocations with known times, grouping, windows, visibility."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from portal.fleet.models import Gpu
from tests.rows import make_hold

URL = "/api/v1/spend"
WINDOW = {"start": "2026-03-01T00:00:00Z", "end": "2026-03-08T00:00:00Z"}


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def holds(fleet, team, other_team, researcher, lead, other_researcher):
    """alice: a 1g.10gb for 2 h; bob: a whole H100 for 2 h over midnight; carol (nlp): 3 h. At 6.88/h."""
    whole = list(Gpu.objects.filter(mig_enabled=False).order_by("index"))
    mig = Gpu.objects.filter(mig_enabled=True).first()
    make_hold(
        gpu=mig,
        mig_profile="1g.10gb",
        share=(1, 7),
        user=researcher,
        team=team,
        started_at=at("2026-03-02T10:00"),
        ended_at=at("2026-03-02T12:00"),
    )
    make_hold(
        gpu=whole[0], user=lead, team=team, started_at=at("2026-03-02T23:00"), ended_at=at("2026-03-03T01:00")
    )
    make_hold(
        gpu=whole[1],
        user=other_researcher,
        team=other_team,
        started_at=at("2026-03-05T00:00"),
        ended_at=at("2026-03-05T03:00"),
    )


def rows(response) -> list[tuple[str, str, str]]:
    assert response.status_code == 200, response.json()
    return [(r["key"], r["cost"], r["gpu_hours"]) for r in response.json()["rows"]]


def test_a_slice_for_two_hours_costs_a_seventh_of_the_gpu_price(holds, alice):
    # 6.88 x 1/7 x 2 h = 1.965714... -> 1.97; 2/7 GPU-hours -> 0.29
    response = alice.get(URL, {**WINDOW, "group_by": "user"})
    assert rows(response) == [("alice", "1.97", "0.29")]
    assert response.json()["rows"][0]["label"] == "Alice"
    assert response.json()["total"] == "1.97"


def test_spend_by_team_sums_before_rounding(holds, admin):
    response = admin.get(URL, {**WINDOW, "group_by": "team"})
    # vision: 1.965714 + 13.76 = 15.725714 -> 15.73
    assert rows(response) == [("nlp", "20.64", "3.00"), ("vision", "15.73", "2.29")]
    body = response.json()
    assert body["group_by"] == "team"
    assert body["currency"] == "USD"
    assert body["total"] == "36.37"
    assert body["gpu_hours"] == "5.29"
    assert parse_datetime(body["start"]) == at("2026-03-01T00:00")
    assert parse_datetime(body["end"]) == at("2026-03-08T00:00")


def test_spend_by_user_is_largest_first(holds, admin):
    assert rows(admin.get(URL, {**WINDOW, "group_by": "user"})) == [
        ("carol", "20.64", "3.00"),
        ("bob", "13.76", "2.00"),
        ("alice", "1.97", "0.29"),
    ]


def test_spend_by_gpu_type_adds_every_hold(holds, admin):
    # 1.965714 + 13.76 + 20.64 = 36.365714
    assert rows(admin.get(URL, {**WINDOW, "group_by": "gpu_type"})) == [("h100-80gb", "36.37", "5.29")]


def test_spend_by_day_splits_a_hold_at_midnight(holds, admin):
    # 2 March: the slice (1.965714) and bob's first hour (6.88); 3 March: bob's second hour.
    assert rows(admin.get(URL, {**WINDOW, "group_by": "day"})) == [
        ("2026-03-02", "8.85", "1.29"),
        ("2026-03-03", "6.88", "1.00"),
        ("2026-03-05", "20.64", "3.00"),
    ]


def test_by_day_from_the_first_year_a_report_covers_costs_no_day_before_the_first_hold(
    holds, admin, django_assert_max_num_queries
):
    """Years of days before anything was held cost nothing to report (each would be read from the
    holds, having no roll-up: a request that tied up a worker for minutes)."""
    with django_assert_max_num_queries(60):
        response = admin.get(
            URL, {"start": "2000-01-01T00:00:00Z", "end": "2026-03-06T00:00:00Z", "group_by": "day"}
        )
    assert rows(response) == [
        ("2026-03-02", "8.85", "1.29"),
        ("2026-03-03", "6.88", "1.00"),
        ("2026-03-05", "20.64", "3.00"),
    ]


def test_by_day_over_years_when_nothing_was_ever_held_is_empty_at_once(admin, django_assert_max_num_queries):
    with django_assert_max_num_queries(20):
        response = admin.get(
            URL, {"start": "2000-01-01T00:00:00Z", "end": "2999-12-31T00:00:00Z", "group_by": "day"}
        )
    assert rows(response) == [] and response.json()["total"] == "0.00"


def test_only_the_part_of_a_hold_inside_the_window_counts(holds, admin):
    window = {"start": "2026-03-02T11:00:00Z", "end": "2026-03-02T23:30:00Z", "group_by": "user"}
    # alice: 1 h of a seventh = 0.982857 -> 0.98; bob: half an hour = 3.44
    assert rows(admin.get(URL, window)) == [("bob", "3.44", "0.50"), ("alice", "0.98", "0.14")]


@pytest.mark.parametrize(
    "who, expected",
    [
        ("alice", [("vision", "1.97", "0.29")]),
        ("bob", [("vision", "15.73", "2.29")]),
        ("carol", [("nlp", "20.64", "3.00")]),
    ],
)
def test_each_role_sees_only_the_spend_it_may(holds, alice, bob, carol, who, expected):
    client = {"alice": alice, "bob": bob, "carol": carol}[who]
    assert rows(client.get(URL, {**WINDOW, "group_by": "team"})) == expected


def test_the_team_parameter_narrows_an_admins_report(holds, admin):
    response = admin.get(URL, {**WINDOW, "group_by": "user", "team": "nlp"})
    assert rows(response) == [("carol", "20.64", "3.00")]
    assert response.json()["team"] == "nlp"


def test_the_default_window_is_this_month_so_far_by_team(holds, alice):
    before = timezone.now()
    body = alice.get(URL).json()
    assert body["group_by"] == "team"
    assert parse_datetime(body["start"]) == before.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    assert before <= parse_datetime(body["end"]) <= timezone.now()


@pytest.mark.parametrize(
    "params, field",
    [
        ({"group_by": "week"}, "group_by"),
        ({"start": "yesterday"}, "start"),
        ({"end": "2026-13-45"}, "end"),
        ({"start": "2026-03-08T00:00:00Z", "end": "2026-03-01T00:00:00Z"}, "end"),
        ({"start": "2026-03-01T00:00:00Z", "end": "2026-03-01T00:00:00Z"}, "end"),
    ],
)
def test_bad_parameters_are_a_400_naming_the_field(holds, alice, params, field):
    response = alice.get(URL, params)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert field in error["fields"]
