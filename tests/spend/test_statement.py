"""The monthly team statement: exact figures (to the cent) by user, GPU type and workload, idle
cost and storage, budget against actual; UTC months; who sees what; bounded queries."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.utils.dateparse import parse_datetime

from portal.fleet.models import Allocation, Gpu, GpuMinute, StorageHold
from tests.factories import MembershipFactory, UserFactory
from tests.rows import make_hold, make_sandbox

URL = "/spend/statement/vision/2026-03/"
API = "/api/v1/teams/vision/statement"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def march(fleet, team, other_team, researcher, lead, other_researcher):
    """Team vision in March 2026 (UTC), at $6.88 per GPU-hour; budget $200:
    alice: 1/7 of an H100 for 7 h (6.88) and a 50 GB home for 73 h at $0.10 per GB-month (0.50);
    bob: a whole H100 for 10 h for sandbox "train" (68.80), 30 of its minutes read idle (3.44),
    and one from Feb 28 22:00 to Mar 1 02:00 (2 h in March: 13.76) and one from Mar 31 23:00 to
    Apr 1 01:00 (1 h in March: 6.88). carol (nlp): 5 h, not vision's."""
    team.monthly_budget = Decimal("200.00")
    team.save()
    whole = list(Gpu.objects.filter(mig_enabled=False).order_by("index"))
    mig = Gpu.objects.filter(mig_enabled=True).first()
    make_hold(gpu=mig, mig_profile="1g.10gb", share=(1, 7), user=researcher, team=team,
              started_at=at("2026-03-03T08:00"), ended_at=at("2026-03-03T15:00"))  # fmt: skip
    StorageHold.objects.create(user=researcher, team=team, what="home of alice", size_gb=50,
                               price_per_gb_month=Decimal("0.10"), started_at=at("2026-03-05T00:00"),
                               ended_at=at("2026-03-08T01:00"))  # fmt: skip
    train = make_sandbox(owner=lead, team=team, name="train", gpu_type=whole[0].gpu_type)
    make_hold(gpu=whole[0], user=lead, team=team, workload=train,
              started_at=at("2026-03-10T00:00"), ended_at=at("2026-03-10T10:00"))  # fmt: skip
    for n in range(30):
        GpuMinute.objects.create(gpu=whole[0], device=whole[0].uuid, minute=at("2026-03-10T01:00") + timedelta(minutes=n),
                                 samples=1, utilization_sum=0, utilization_samples=1)  # fmt: skip
    make_hold(
        gpu=whole[1], user=lead, team=team, started_at=at("2026-02-28T22:00"), ended_at=at("2026-03-01T02:00")
    )
    make_hold(
        gpu=whole[2], user=lead, team=team, started_at=at("2026-03-31T23:00"), ended_at=at("2026-04-01T01:00")
    )
    make_hold(gpu=whole[3], user=other_researcher, team=other_team,
              started_at=at("2026-03-12T00:00"), ended_at=at("2026-03-12T05:00"))  # fmt: skip


def figures(rows) -> list[tuple[str, str, str]]:
    return [(r["key"], r["cost"], r["idle_cost"]) for r in rows]


def test_a_lead_gets_the_team_month_exact_to_the_cent(march, bob):
    body = bob.get(API, {"month": "2026-03"}).json()

    assert body["team"] == "vision" and body["month"] == "2026-03" and body["scope"] == "team"
    assert (body["start"], body["end"]) == ("2026-03-01T00:00:00Z", "2026-04-01T00:00:00Z")
    assert body["to_date"] is False
    # GPUs: 6.88 + 68.80 + 13.76 + 6.88 = 96.32; storage 50 x 73 / 730 x 0.10 = 0.50
    assert (body["total"], body["gpu_cost"], body["storage"]) == ("96.82", "96.32", "0.50")
    assert (body["gpu_hours"], body["idle_cost"]) == ("14.00", "3.44")
    assert figures(body["by_user"]) == [("bob", "89.44", "3.44"), ("alice", "7.38", "0.00")]
    assert figures(body["by_gpu_type"]) == [("h100-80gb", "96.32", "3.44"), ("storage", "0.50", "0.00")]
    train = next(r for r in body["by_workload"] if r["label"] == "sandbox train")["key"]
    assert figures(body["by_workload"]) == [
        (train, "68.80", "3.44"),
        ("storage", "0.50", "0.00"),
        ("others", "27.52", "0.00"),
    ]
    assert (body["budget"], body["used_percent"], body["left"]) == ("200.00", 48, "103.18")
    assert body["forecast"] is None  # a month gone by


def test_the_page_shows_the_same_figures_printably(march, lead_client):
    response = lead_client.get(URL)
    page = response.content.decode()

    assert response.status_code == 200
    assert "Vision · March 2026" in page
    assert 'id="statement-total">$96.82<' in page
    assert 'id="statement-storage">$0.50 ' in page
    assert 'id="statement-idle">$3.44 ' in page
    assert 'id="statement-used">$96.82 (48 %)<' in page
    assert 'id="statement-left">$103.18<' in page
    assert "sandbox train" in page and "$89.44" in page and "Everything else" in page
    assert page.count('<th class="num money">$3.44</th>') == 3  # idle, the total of each table
    assert "carol" not in page
    # printing: its own stylesheet (no navigation, a page per section); no inline style or script
    assert 'href="/static/css/print.css" media="print"' in page
    assert page.count('class="statement-part') == 4
    assert "style=" not in page.split("<main", 1)[1] and "<script>" not in page


def test_month_boundaries_are_utc_whatever_the_time_zone(march, bob, settings):
    settings.TIME_ZONE = "Asia/Tokyo"  # 9 hours ahead: a local month would move the edges
    february = bob.get(API, {"month": "2026-02"}).json()
    assert parse_datetime(february["start"]) == at("2026-02-01T00:00")
    assert parse_datetime(february["end"]) == at("2026-03-01T00:00")
    assert february["total"] == "13.76"  # the 2 h before March 1, 00:00 UTC
    assert bob.get(API, {"month": "2026-04"}).json()["total"] == "6.88"  # the hour after April 1, 00:00 UTC
    assert bob.get(API, {"month": "2026-03"}).json()["total"] == "96.82"


def test_a_researcher_gets_a_statement_of_only_their_own_spend(march, alice, researcher_client):
    body = alice.get(API, {"month": "2026-03"}).json()
    assert body["scope"] == "own"
    assert (body["total"], body["storage"]) == ("7.38", "0.50")
    assert figures(body["by_user"]) == [("alice", "7.38", "0.00")]
    assert body["budget"] is None and body["used_percent"] is None and body["forecast"] is None
    page = researcher_client.get(URL).content.decode()
    assert "of your own spend in the team" in page and 'id="statement-total">$7.38<' in page
    assert not re.search(r"\bBob\b", page) and "statement-budget" not in page  # not in the CSRF token


def test_no_statement_for_a_team_one_does_not_belong_to(march, carol, other_client):
    response = carol.get(API, {"month": "2026-03"})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert other_client.get(URL).status_code == 404
    assert other_client.get("/spend/statement/nosuch/2026-03/").status_code == 404


def test_an_admin_gets_any_team_statement(march, admin, admin_client):
    assert admin.get(API, {"month": "2026-03"}).json()["total"] == "96.82"
    assert admin.get("/api/v1/teams/nlp/statement", {"month": "2026-03"}).json()["total"] == "34.40"
    assert admin_client.get("/spend/statement/nlp/2026-03/").status_code == 200


@pytest.mark.parametrize("month", ["2026-13", "2026-3", "26-03", "march", "", "2026-00", "1999-12"])
def test_a_malformed_month_is_a_400_in_the_error_shape(march, bob, lead_client, month):
    response = bob.get(API, {"month": month})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"
    assert "month" in response.json()["error"]["fields"]
    if month:
        page = lead_client.get(f"/spend/statement/vision/{month}/")
        assert page.status_code == 400
        assert b'id="statement-error"' in page.content
        assert "month:" not in page.content.decode()  # words, not the API's field name


def test_a_month_not_begun_is_a_400(march, bob, lead_client):
    with time_machine.travel(at("2026-03-31T23:59:59"), tick=False):
        response = bob.get(API, {"month": "2026-04"})
        refused = lead_client.get("/spend/statement/vision/2026-04/")
        assert refused.status_code == 400
        assert (
            "No statement for 2026-04: This month has not begun yet (months are counted in UTC)."
            in refused.content.decode()
        )
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {
        "month": ["This month has not begun yet (months are counted in UTC)."]
    }


def test_the_running_month_is_to_date_with_its_forecast(march, bob, team):
    # March 20, noon: bob holds a whole H100 since 00:00 for a sandbox that expires on the 21st, noon
    live = make_sandbox(owner=team.memberships.get(role="lead").user, team=team, name="live",
                        gpu_type=Gpu.objects.first().gpu_type, expires_at=at("2026-03-21T12:00"))  # fmt: skip
    gpu = Gpu.objects.filter(mig_enabled=False).order_by("index")[4]
    make_hold(
        gpu=gpu, user=live.owner, team=team, workload=live, started_at=at("2026-03-20T00:00"), ended_at=None
    )
    Allocation.objects.filter(started_at=at("2026-03-31T23:00")).delete()  # nothing ended in the future
    with time_machine.travel(at("2026-03-20T12:00"), tick=False):
        body = bob.get(API, {"month": "2026-03"}).json()
    assert body["to_date"] is True
    # up to now: everything before the 20th (6.88 + 0.50 + 68.80 + 13.76) + 12 h live at 6.88
    assert body["total"] == "172.50"
    assert body["forecast"]["spent"] == "172.50"
    assert body["forecast"]["forecast_month_end"] == "337.62"  # + 24 h until the sandbox expires
    # 27.50 left at 6.88 an hour: 3.997 h after noon
    assert body["forecast"]["runs_out_at"].startswith("2026-03-20T15:59:49")
    assert body["forecast"]["thresholds_crossed"] == [50, 80]


def test_statement_queries_are_bounded(march, team, lead_client, bob, django_assert_max_num_queries):
    # as many queries for 25 more users, workloads and holds as for none
    gpu = Gpu.objects.filter(mig_enabled=False).order_by("index")[5]
    for n in range(25):
        user = UserFactory(username=f"user-{n}")
        MembershipFactory(user=user, team=team)
        box = make_sandbox(owner=user, team=team, gpu_type=gpu.gpu_type)
        start = at("2026-03-15T00:00") + timedelta(hours=n)
        make_hold(
            gpu=gpu, user=user, team=team, workload=box, started_at=start, ended_at=start + timedelta(hours=1)
        )
    with django_assert_max_num_queries(36):
        assert lead_client.get(URL).status_code == 200
    with django_assert_max_num_queries(36):
        assert bob.get(API, {"month": "2026-03"}).status_code == 200


def test_the_spend_page_picks_a_month_for_the_statement(march, lead_client, researcher_client, admin_client):
    page = lead_client.get("/spend/").content.decode()
    assert 'action="/spend/statement/"' in page and 'type="month"' in page and "Monthly statement" in page
    response = lead_client.get("/spend/statement/", {"team": "vision", "month": "2026-03"})
    assert response.status_code == 302 and response["Location"] == URL
    # a researcher picks only the month: their team's statement
    assert researcher_client.get("/spend/statement/", {"month": "2026-03"})["Location"] == URL
    # an admin, in no team, gets the first team whose spend they see (by slug)
    assert (
        admin_client.get("/spend/statement/", {"month": "2026-03"})["Location"]
        == "/spend/statement/nlp/2026-03/"
    )
