"""The spend page's charts in headless Chromium: drawn from the daily spend API, redrawn when the
split changes, the budget line for a lead's team month, and no script error.

Skipped where /usr/bin/chromium (Debian's package) or Playwright is missing; with
PORTAL_REQUIRE_BROWSER=1 (CI) that fails the run instead.
"""

from __future__ import annotations

from datetime import UTC, datetime

from tests import browser_support
from tests.browser_support import BROWSER
from tests.rows import make_hold

browser_page = browser_support.browser_page  # the fixture, where pytest looks for it

pytestmark = BROWSER


def test_a_lead_sees_the_three_charts_and_changes_the_split(
    live_server, transactional_db, browser_page, lead, researcher, team, whole_gpus
):
    from playwright.sync_api import expect

    make_hold(
        gpu=whole_gpus[0], user=researcher, team=team,
        started_at=datetime(2026, 1, 10, 10, tzinfo=UTC), ended_at=datetime(2026, 1, 10, 13, tzinfo=UTC),
    )  # fmt: skip
    make_hold(
        gpu=whole_gpus[1], user=lead, team=team,
        started_at=datetime(2026, 1, 10, 22, tzinfo=UTC), ended_at=datetime(2026, 1, 11, 2, tzinfo=UTC),
    )  # fmt: skip
    page = browser_page
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "bob")
    page.fill("#id_password", "pw-for-tests")
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")

    page.goto(f"{live_server.url}/spend/?start=2026-01-01&end=2026-01-31&team=vision&split=user")

    for kind in ("stacked", "cumulative", "hours"):
        expect(page.locator(f'[data-spend-chart="{kind}"] canvas')).to_have_count(1)
    legend = page.locator('[data-spend-chart="stacked"] .u-legend')
    expect(legend).to_contain_text("Alice")
    expect(legend).to_contain_text("Bob")
    expect(page.locator('[data-spend-chart="cumulative"] .u-legend')).to_contain_text("Budget")
    page.screenshot(path="/tmp/ui-spend-charts.png", full_page=True)

    page.select_option("select[name=split]", "gpu_type")
    expect(page.locator('[data-spend-chart="stacked"] .u-legend')).to_contain_text("NVIDIA H100 80GB")
    expect(page.locator('[data-spend-chart="stacked"] canvas')).to_have_count(1)
    page.wait_for_load_state("networkidle")
    assert "split=gpu_type" in page.url
    assert errors == []
