"""Spend downloads (CSV and JSON, streamed) and the budget state in the spend report."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.accounts.models import Membership
from portal.fleet.models import Gpu
from tests.factories import MembershipFactory, UserFactory
from tests.rows import make_hold, make_sandbox

URL = "/api/v1/spend"
WINDOW = {"start": "2026-03-01T00:00:00Z", "end": "2026-03-08T00:00:00Z"}
NOW = datetime(2026, 3, 20, 12, tzinfo=UTC)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def holds(fleet, team, other_team, researcher, lead, other_researcher):
    """alice: a 1g.10gb for 2 h; bob: a whole H100 for 2 h over midnight, for a sandbox; carol
    (nlp): 3 h in March and 1 h in April. At 6.88/h."""
    whole = list(Gpu.objects.filter(mig_enabled=False).order_by("index"))
    mig = Gpu.objects.filter(mig_enabled=True).first()
    make_hold(gpu=mig, mig_profile="1g.10gb", share=(1, 7), user=researcher, team=team,
              started_at=at("2026-03-02T10:00"), ended_at=at("2026-03-02T12:00"))  # fmt: skip
    box = make_sandbox(owner=lead, team=team, name="train", gpu_type=whole[0].gpu_type)
    make_hold(gpu=whole[0], user=lead, team=team, workload=box,
              started_at=at("2026-03-02T23:00"), ended_at=at("2026-03-03T01:00"))  # fmt: skip
    make_hold(gpu=whole[1], user=other_researcher, team=other_team,
              started_at=at("2026-03-05T00:00"), ended_at=at("2026-03-05T03:00"))  # fmt: skip
    make_hold(gpu=whole[1], user=other_researcher, team=other_team,
              started_at=at("2026-04-02T00:00"), ended_at=at("2026-04-02T01:00"))  # fmt: skip


def body_of(response) -> str:
    assert response.status_code == 200, response.content
    assert response.streaming
    return b"".join(response.streaming_content).decode()


def csv_rows(response) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(body_of(response))))


@pytest.mark.parametrize("group_by", ["user", "team", "gpu_type", "day", "workload"])
def test_a_csv_export_has_the_report_rows_and_adds_up_to_its_total_to_the_cent(holds, admin, group_by):
    query = {**WINDOW, "group_by": group_by}
    report = admin.get(URL, query).json()
    response = admin.get(URL, {**query, "format": "csv"})

    assert response["Content-Type"] == "text/csv; charset=utf-8"
    text = body_of(admin.get(URL, {**query, "format": "csv"}))
    assert text.splitlines()[0] == "key,label,cost,gpu_hours,idle_cost"
    exported = csv_rows(response)
    assert [(r["key"], r["label"], r["cost"], r["gpu_hours"], r["idle_cost"]) for r in exported] == [
        (r["key"], r["label"], r["cost"], r["gpu_hours"], r["idle_cost"]) for r in report["rows"]
    ]
    assert sum(Decimal(r["cost"]) for r in exported) == Decimal(report["total"]) == Decimal("36.37")
    assert sum(Decimal(r["gpu_hours"]) for r in exported) == Decimal(report["gpu_hours"])


def test_the_csv_names_team_range_and_grouping_in_its_file_name(holds, admin, bob):
    response = admin.get(URL, {**WINDOW, "group_by": "day", "team": "vision", "format": "csv"})
    assert (
        response["Content-Disposition"]
        == 'attachment; filename="spend_vision_2026-03-01_2026-03-07_by-day.csv"'
    )
    response = admin.get(URL, {**WINDOW, "group_by": "team", "format": "csv"})
    assert 'filename="spend_all_2026-03-01_2026-03-07_by-team.csv"' in response["Content-Disposition"]


def test_accept_text_csv_asks_for_the_csv_too(holds, bob):
    response = bob.get(URL, {**WINDOW, "group_by": "user"}, HTTP_ACCEPT="text/csv")
    assert response["Content-Type"].startswith("text/csv")
    assert [(r["key"], r["cost"]) for r in csv_rows(response)] == [("bob", "13.76"), ("alice", "1.97")]


def test_a_researcher_exports_only_their_own_spend(holds, alice):
    assert [
        (r["key"], r["cost"], r["gpu_hours"])
        for r in csv_rows(alice.get(URL, {**WINDOW, "group_by": "user", "format": "csv"}))
    ] == [("alice", "1.97", "0.29")]


def test_a_day_export_over_months_reads_month_by_month_and_equals_the_report(holds, admin):
    query = {"start": "2026-02-20T00:00:00Z", "end": "2026-04-10T00:00:00Z", "group_by": "day"}
    report = admin.get(URL, query).json()
    exported = csv_rows(admin.get(URL, {**query, "format": "csv"}))
    assert [(r["key"], r["cost"]) for r in exported] == [(r["key"], r["cost"]) for r in report["rows"]]
    assert [r["key"] for r in exported] == ["2026-03-02", "2026-03-03", "2026-03-05", "2026-04-02"]
    assert sum(Decimal(r["cost"]) for r in exported) == Decimal(report["total"]) == Decimal("43.25")


def test_a_json_export_is_the_report_streamed_as_a_download(holds, admin):
    query = {**WINDOW, "group_by": "workload", "team": "vision"}
    report = admin.get(URL, query).json()
    response = admin.get(URL, {**query, "format": "json"})
    assert (
        response["Content-Disposition"]
        == 'attachment; filename="spend_vision_2026-03-01_2026-03-07_by-workload.json"'
    )
    exported = json.loads(body_of(response))
    budget = exported.pop("budget")
    report_budget = report.pop("budget")
    assert exported == report
    assert [r["label"] for r in exported["rows"]] == ["sandbox train", "Everything else"]
    assert exported["total"] == "15.73"
    assert budget["team"] == report_budget["team"] == "vision"


def test_a_formula_in_a_label_is_defused_in_the_csv(holds, admin, team, fleet):
    mallory = UserFactory(username="mallory", first_name='=HYPERLINK("http://x")')
    MembershipFactory(user=mallory, team=team, role=Membership.Role.RESEARCHER)
    gpu = Gpu.objects.filter(mig_enabled=False).order_by("index")[2]
    make_hold(
        gpu=gpu, user=mallory, team=team, started_at=at("2026-03-04T00:00"), ended_at=at("2026-03-04T01:00")
    )
    labels = {
        r["key"]: r["label"]
        for r in csv_rows(admin.get(URL, {**WINDOW, "group_by": "user", "format": "csv"}))
    }
    assert labels["mallory"] == '\'=HYPERLINK("http://x")'


def test_an_unknown_format_is_a_400_in_the_error_shape(holds, admin):
    response = admin.get(URL, {**WINDOW, "format": "xlsx"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"
    assert "format" in response.json()["error"]["fields"]


def test_a_bad_query_for_a_csv_answers_the_json_error_shape(holds, admin):
    response = admin.get(
        URL, {"start": "2026-03-08T00:00:00Z", "end": "2026-03-01T00:00:00Z", "format": "csv"}
    )
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["fields"] == {"end": ["Must be after start."]}
    assert admin.get(URL, {"group_by": "nope"}, HTTP_ACCEPT="text/csv").json()["error"]["code"] == "invalid"


# The budget state in the report


@pytest.fixture
def this_month(fleet, team, researcher, lead):
    """March 2026 so far (it is the 20th, noon): bob held a whole H100 for 10 h ($68.80) and holds
    one since the 20th 00:00 for a sandbox that expires on the 21st, noon. Budget $100."""
    team.monthly_budget = Decimal("100.00")
    team.save()
    whole = list(Gpu.objects.filter(mig_enabled=False).order_by("index"))
    make_hold(
        gpu=whole[0], user=lead, team=team, started_at=at("2026-03-10T00:00"), ended_at=at("2026-03-10T10:00")
    )
    box = make_sandbox(
        owner=lead, team=team, name="live", gpu_type=whole[1].gpu_type, expires_at=at("2026-03-21T12:00")
    )
    make_hold(
        gpu=whole[1], user=lead, team=team, workload=box, started_at=at("2026-03-20T00:00"), ended_at=None
    )


def test_a_report_for_one_team_carries_its_budget_state(this_month, bob, admin):
    with time_machine.travel(NOW, tick=False):
        budget = bob.get(URL, {"group_by": "user", "team": "vision"}).json()["budget"]
        alone = bob.get("/api/v1/teams/vision/budget").json()
    # 10 h + 12 h so far at 6.88 = 151.36; the live hold until its expiry: 24 h more = 165.12
    assert budget["spent"] == "151.36"
    assert budget["budget"] == "100.00"
    assert budget["used_percent"] == 151
    assert budget["forecast_month_end"] == "316.48"
    assert budget["forecast_percent"] == 316
    assert budget["runs_out_at"] == "2026-03-20T12:00:00Z"
    assert budget["thresholds"] == [50, 80, 100]
    assert budget["thresholds_crossed"] == [50, 80, 100]
    assert budget["policy"] == "block"
    assert {k: v for k, v in budget.items() if k in alone} == alone


def test_a_member_of_one_team_gets_its_budget_and_an_admin_without_a_team_none(this_month, alice, admin):
    with time_machine.travel(NOW, tick=False):
        assert alice.get(URL).json()["budget"]["team"] == "vision"
        assert admin.get(URL).json()["budget"] is None
        assert admin.get(URL, {"team": "vision"}).json()["budget"]["spent"] == "151.36"


def test_a_member_of_two_teams_gets_no_budget_without_naming_one(
    this_month, researcher, other_team, client_for
):
    MembershipFactory(user=researcher, team=other_team)
    with time_machine.travel(NOW, tick=False):
        assert client_for(researcher).get(URL).json()["budget"] is None
        assert client_for(researcher).get(URL, {"team": "nlp"}).json()["budget"]["team"] == "nlp"


# The spend page's downloads


def test_the_spend_page_links_downloads_of_the_view_shown(holds, lead_client):
    page = lead_client.get(
        "/spend/", {"group_by": "day", "start": "2026-03-01", "end": "2026-03-07"}
    ).content.decode()
    # the lead leads one team and is in no other: the page opens on it, and so do its downloads
    query = "group_by=day&amp;start=2026-03-01&amp;end=2026-03-07&amp;team=vision"
    assert f'href="/spend/export.csv?{query}"' in page and f'href="/spend/export.json?{query}"' in page
    everyone = lead_client.get("/spend/", {"group_by": "day", "team": ""}).content.decode()
    assert 'href="/spend/export.csv?group_by=day&amp;team="' in everyone  # "All I can see", as chosen


def test_the_web_download_has_the_page_figures(holds, lead_client):
    response = lead_client.get(
        "/spend/export.csv", {"group_by": "user", "start": "2026-03-01", "end": "2026-03-07"}
    )
    assert [(r["key"], r["cost"]) for r in csv_rows(response)] == [("bob", "13.76"), ("alice", "1.97")]
    assert 'filename="spend_bob_2026-03-01_2026-03-07_by-user.csv"' in response["Content-Disposition"]
    exported = json.loads(
        body_of(
            lead_client.get(
                "/spend/export.json", {"group_by": "team", "start": "2026-03-01", "end": "2026-03-07"}
            )
        )
    )
    assert exported["total"] == "15.73"


def test_a_web_download_with_bad_dates_goes_back_to_the_page_that_says_why(holds, lead_client):
    response = lead_client.get("/spend/export.csv", {"start": "2026-03-07", "end": "2026-03-01"})
    assert response.status_code == 302 and response["Location"] == "/spend/?start=2026-03-07&end=2026-03-01"
    page = lead_client.get(response["Location"]).content.decode()
    assert "Nothing was downloaded: the filters below need fixing first." in page
    assert "The end is before the start." in page
    assert lead_client.get("/spend/export.xlsx").status_code == 400


def test_export_queries_do_not_grow_with_the_holds(holds, admin, team, lead, django_assert_max_num_queries):
    gpu = Gpu.objects.filter(mig_enabled=False).order_by("index")[5]
    for n in range(30):
        box = make_sandbox(owner=lead, team=team, gpu_type=gpu.gpu_type)
        start = at("2026-03-10T00:00") + timedelta(hours=n)
        make_hold(
            gpu=gpu, user=lead, team=team, workload=box, started_at=start, ended_at=start + timedelta(hours=1)
        )
    year = {"start": "2026-01-01T00:00:00Z", "end": "2027-01-01T00:00:00Z"}
    with django_assert_max_num_queries(12):
        rows = csv_rows(admin.get(URL, {**year, "group_by": "workload", "format": "csv"}))
    assert len(rows) == 32  # 31 workloads, and the holds of none
    assert sum(Decimal(r["cost"]) for r in rows) == Decimal("249.65")  # 43.25 + 30 x 6.88
    # by day, a month at a time: the report's own reads, plus a plan (a few reads, and where a
    # month's first day is not rolled up the first hold's time) per month
    with CaptureQueriesContext(connection) as report:
        admin.get(URL, {**year, "group_by": "day"})
    with CaptureQueriesContext(connection) as export:
        days = csv_rows(admin.get(URL, {**year, "group_by": "day", "format": "csv"}))
    assert len(export) <= len(report) + 6 * 12
    assert sum(Decimal(r["cost"]) for r in days) == sum(Decimal(r["cost"]) for r in rows)


def test_a_download_of_all_i_can_see_follows_the_page(holds, lead_client):
    assert lead_client.get("/spend/export.csv", {"group_by": "day", "team": ""}).status_code == 200
