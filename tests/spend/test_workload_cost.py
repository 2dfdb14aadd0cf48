"""A workload's own cost over time: per hour or day of its life, exact to the cent by the one cost
definition, on the API its page's chart and table read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from rest_framework.test import APIClient

from portal.spend.workload_cost import workload_cost_series
from tests.rows import make_hold, make_sandbox

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 20, 12, 30, tzinfo=UTC)


@pytest.fixture
def box(researcher, team, whole_gpus):
    with time_machine.travel(NOW, tick=False):
        sandbox = make_sandbox(
            owner=researcher, team=team, gpu=whole_gpus[0], hours_ago=2, price=Decimal("6.88")
        )
    # a second hold, a 1/7 slice at $7 for 40 minutes, ended
    make_hold(gpu=whole_gpus[1], user=researcher, team=team, workload=sandbox, mig_profile="1g.10gb",
              started_at=NOW - timedelta(minutes=50), ended_at=NOW - timedelta(minutes=10), share=(1, 7),
              price=Decimal("7"))  # fmt: skip
    return sandbox


def test_the_series_sums_to_what_it_cost_hour_by_hour(box):
    points = workload_cost_series(workload=box, now=NOW)
    assert [p.at.hour for p in points] == [10, 11, 12]
    # whole GPU from 10:30 at 6.88; the slice 11:40-12:20 at 1/7 x 7 = $1 an hour
    assert [p.cost for p in points] == [Decimal("3.44"), Decimal("7.21"), Decimal("3.77")]
    assert points[-1].total == Decimal("14.43")  # 2 h x 6.88 + 40 min x $1 = 13.76 + 0.6667, rounded once
    days = workload_cost_series(workload=box, step=86400, now=NOW)
    assert len(days) == 1 and days[0].total == Decimal("14.43")


def test_the_api_and_the_page(box, researcher, other_researcher, researcher_client):
    api = APIClient()
    api.force_authenticate(researcher)
    with time_machine.travel(NOW, tick=False):
        answer = api.get(f"/api/v1/sandboxes/{box.number}/cost")
        assert answer.status_code == 200 and answer.json()[-1]["total"] == "14.43"
        assert api.get(f"/api/v1/sandboxes/{box.number}/cost", {"step": "60"}).status_code == 400
        assert api.get(f"/api/v1/sandboxes/{box.number}/cost", {"step": "x"}).status_code == 400
        assert api.get(f"/api/v1/deployments/{box.number}/cost").status_code == 404  # not a deployment
        api.force_authenticate(other_researcher)
        assert api.get(f"/api/v1/sandboxes/{box.number}/cost").status_code == 404
    page = researcher_client.get(f"/sandboxes/{box.number}/").content.decode()
    assert (
        f'data-cost-url="/api/v1/sandboxes/{box.number}/cost"' in page
        and "<summary>As a table</summary>" in page
    )
