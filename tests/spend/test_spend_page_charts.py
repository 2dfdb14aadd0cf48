"""The spend page's charts: the daily figures as tables rendered with the page (the charts' fallback
for screen readers), the API address the charts read, bounded queries, no inline script or style."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.fleet.models import Gpu
from portal.spend.services import spend_rollup_due
from portal.workloads.models import Workload
from tests.factories import MembershipFactory, UserFactory
from tests.rows import HTMX, make_hold, make_sandbox

JANUARY = {"start": "2026-01-01", "end": "2026-01-31"}


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def january(fleet, team, other_team, researcher, lead, other_researcher):
    """alice 3 h on the 10th and a 1/7 slice for 7 h on the 12th; bob 4 h over midnight of the
    10th; carol (nlp) 1 h on the 11th. At 6.88/h."""
    whole = list(Gpu.objects.filter(mig_enabled=False).order_by("index"))
    make_hold(
        gpu=whole[0],
        user=researcher,
        team=team,
        started_at=at("2026-01-10T10:00"),
        ended_at=at("2026-01-10T13:00"),
    )
    make_hold(
        gpu=whole[1], user=researcher, team=team, share=(1, 7), mig_profile="1g.10gb",
        started_at=at("2026-01-12T08:00"), ended_at=at("2026-01-12T15:00"),
    )  # fmt: skip
    make_hold(
        gpu=whole[2], user=lead, team=team, started_at=at("2026-01-10T22:00"), ended_at=at("2026-01-11T02:00")
    )
    make_hold(
        gpu=whole[3],
        user=other_researcher,
        team=other_team,
        started_at=at("2026-01-11T00:00"),
        ended_at=at("2026-01-11T01:00"),
    )


def table(page: str, table_id: str) -> dict[str, list[str]]:
    """A table's body rows by their first cell: the other cells' text."""
    body = page.split(f'id="{table_id}"')[1].split("</table>")[0]
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        cells = [
            re.sub(r"<[^>]+>", "", cell).strip()
            for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
        ]
        rows[cells[0]] = cells[1:]
    return rows


def test_a_lead_gets_the_three_charts_with_their_figures_as_tables(lead_client, january):
    page = lead_client.get("/spend/", {**JANUARY, "team": "vision", "split": "user"}).content.decode()

    split = table(page, "spend-daily-split")
    assert split["Day (UTC)"] == ["Alice", "Bob", "Total"]
    assert split["2026-01-10"] == ["$20.64", "$13.76", "$34.40"]  # alice 3 h, bob 2 h before midnight
    assert split["2026-01-11"] == ["$0.00", "$13.76", "$13.76"]  # carol's team is not his
    assert split["2026-01-12"] == ["$6.88", "$0.00", "$6.88"]
    assert split["Total"] == ["$27.52", "$27.52", "$55.04"]
    cumulative = table(page, "spend-daily-cumulative")
    assert cumulative["2026-01-11"] == ["$48.16", "$49,951.84"]  # with what the $50,000 budget has left
    assert cumulative["2026-01-31"] == ["$55.04", "$49,944.96"]
    hours = table(page, "spend-daily-hours")
    assert hours["2026-01-10"] == ["5.00"] and hours["2026-01-12"] == ["1.00"] and hours["Total"] == ["8.00"]
    assert len(split) == 1 + 31 + 1  # head, every day of January, total
    assert 'id="spend-budget-line"' in page and "January 2026" in page


def test_the_charts_read_the_daily_api_with_the_pages_filters_and_get_the_same_figures(lead_client, january):
    page = lead_client.get("/spend/", {**JANUARY, "team": "vision", "split": "gpu_type"}).content.decode()

    url = re.search(r'data-daily-url="([^"]+)"', page).group(1).replace("&amp;", "&")
    assert url.startswith("/api/v1/spend/daily?") and "split=gpu_type" in url and "team=vision" in url
    body = lead_client.get(url).json()  # the browser's session signs it
    assert [(g["label"], g["cost"]) for g in body["groups"]] == [("NVIDIA H100 80GB", "55.04")]
    assert table(page, "spend-daily-split")["2026-01-11"] == ["$13.76", "$13.76"]
    assert next(d for d in body["days"] if d["day"] == "2026-01-11")["by_group"] == ["13.76"]
    assert body["budget"]["budget"] == "50000.00"
    assert 'src="/static/js/spend_charts.js"' in page and 'src="/static/vendor/uplot.iife.min.js"' in page


def test_the_page_has_no_inline_script_or_style(lead_client, january):
    page = lead_client.get("/spend/", {**JANUARY, "team": "vision"}).content.decode()
    assert 'style="' not in page and " on" + "click=" not in page
    assert all("src=" in tag for tag in re.findall(r"<script[^>]*>", page))
    # the budget meter: the browser's own, drawn from its value with no script or style attribute
    assert re.search(r'<meter class="meter" min="0" max="100" value="0" aria-label="Budget used">', page)


def test_a_filter_change_swaps_the_charts_out_of_band(lead_client, january):
    fragment = lead_client.get("/spend/", {**JANUARY, "split": "workload"}, **HTMX).content.decode()
    assert '<section id="spend-charts" class="spend-charts" hx-swap-oob="true"' in fragment
    assert "split=workload" in fragment and 'id="spend-daily-split"' in fragment


def test_a_researcher_charts_only_their_own_spend_and_reaches_their_teams_budget(researcher_client, january):
    page = researcher_client.get("/spend/", JANUARY).content.decode()
    split = table(page, "spend-daily-split")
    assert split["Day (UTC)"] == ["Alice", "Total"]
    # a word: the page's random CSRF token can hold the letters
    assert not re.search(r"\bBob\b", page) and "Budget left" not in page
    assert 'href="/teams/vision/budget/"' in page


def test_a_range_longer_than_the_charts_reach_says_so(lead_client, january):
    page = lead_client.get("/spend/", {"start": "2024-01-01", "end": "2026-01-31"}).content.decode()
    assert "The charts cover up to 366 days" in page and "data-daily-url" not in page
    assert 'id="spend-total"' in page  # the table still answers


def test_the_page_runs_a_bounded_number_of_queries(
    lead_client, january, team, fleet, django_assert_max_num_queries, settings
):
    # January's whole days: no hours or blocks of 8 hours in the range to roll (each day since
    # January would roll three blocks, twice)
    settings.PORTAL_SPEND_HOUR_DAYS = settings.PORTAL_SPEND_8H_DAYS = 0
    query = {**JANUARY, "team": "vision", "split": "workload"}
    spend_rollup_due(days_per_run=400)  # the workers keep past days rolled up
    with CaptureQueriesContext(connection) as few:
        lead_client.get("/spend/", query)
    whole = list(Gpu.objects.filter(mig_enabled=False).order_by("index"))
    for n in range(12):  # a dozen more people spending on other days
        user = UserFactory(username=f"user{n}")
        MembershipFactory(user=user, team=team)
        make_sandbox(owner=user, team=team, gpu_type=whole[0].gpu_type)
        make_hold(gpu=whole[4 + n % 4], user=user, team=team, started_at=at(f"2026-01-{n + 2:02d}T05:00"),
                  ended_at=at(f"2026-01-{n + 2:02d}T06:00"), workload=Workload.objects.filter(owner=user).get())  # fmt: skip
    spend_rollup_due(days_per_run=400)
    with django_assert_max_num_queries(len(few) + 1):  # + the workloads' names: none had one before
        page = lead_client.get("/spend/", query).content.decode()
    assert len(few) <= 60
    assert table(page, "spend-daily-cumulative")["2026-01-31"] == ["$137.60", "$49,862.40"]  # + 12 x 6.88


def test_a_lead_of_one_team_opens_on_it_and_so_on_its_budget_line(lead_client, january):
    page = lead_client.get("/spend/", JANUARY).content.decode()
    assert '<option value="vision" selected>' in page and 'id="spend-budget-line"' in page
    everyone = lead_client.get("/spend/", {**JANUARY, "team": ""}).content.decode()
    assert 'id="spend-budget-line"' not in everyone  # "All I can see", once chosen, stays chosen
    assert '<option value="" selected>' in everyone
    assert "pick one team and a month from its 1st" in everyone


def test_a_member_is_not_told_to_pick_a_team_they_have_no_control_for(researcher_client, january):
    page = researcher_client.get("/spend/", JANUARY).content.decode()
    assert "pick one team" not in page and "the team's budget line is for its leads" in page


def test_a_lead_also_in_another_team_opens_on_all_they_can_see(lead_client, lead, other_team, january):
    MembershipFactory(user=lead, team=other_team)  # their own spend there is in "All I can see"
    page = lead_client.get("/spend/", JANUARY).content.decode()
    assert '<option value="vision" selected>' not in page and 'id="spend-budget-line"' not in page
