"""A sandbox's cost chart in headless Chromium, in a browser far from UTC: its hours are UTC hours,
as in the table beside it and everywhere else in the portal.

Skipped where /usr/bin/chromium (Debian's package) or Playwright is missing; with
PORTAL_REQUIRE_BROWSER=1 (CI) that fails the run instead.
"""

from __future__ import annotations

from datetime import UTC, datetime

from tests import browser_support
from tests.browser_support import BROWSER, sign_in_as
from tests.rows import make_sandbox

browser_page = browser_support.browser_page  # the fixture, where pytest looks for it

pytestmark = BROWSER


def _name(at: datetime, first: bool) -> str:
    """How a tick at `at` is labelled, in 24-hour UTC ("15:00"); the first, and midnights, with
    their day ("Dec 8\n00:00")."""
    if first or (at.hour, at.minute) == (0, 0):
        return f"{at:%b} {at.day}\n{at:%H:%M}"
    return f"{at:%H:%M}"


def test_the_cost_chart_labels_utc_hours_as_its_table_does(
    live_server, transactional_db, browser_page, researcher, team, whole_gpus
):
    from playwright.sync_api import expect

    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0], hours_ago=5)
    context = browser_page.context.browser.new_context(timezone_id="Asia/Kolkata")  # UTC+5:30
    page = context.new_page()
    sign_in_as(page, live_server, "alice")
    page.goto(f"{live_server.url}/sandboxes/{sandbox.number}/")
    chart = page.locator("[data-cost-url]")
    expect(chart.locator("canvas")).to_have_count(1)
    splits, labels = chart.evaluate("e => [e.chart.axes[0]._splits, e.chart.axes[0]._values]")
    assert len(splits) >= 2, splits
    for i, (split, label) in enumerate(zip(splits, labels, strict=True)):
        assert label == _name(datetime.fromtimestamp(split, UTC), first=i == 0), (split, label)
    first_row = page.locator("[data-cost-rows] tr").last.locator("td").first  # the table: oldest last
    expect(first_row).to_contain_text(sandbox.started_at.astimezone(UTC).strftime("%Y-%m-%d %H:00"))
    context.close()


def test_a_new_sandboxs_cost_chart_starts_at_its_first_hour(
    live_server, transactional_db, browser_page, researcher, team, whole_gpus
):
    from playwright.sync_api import expect

    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0], hours_ago=0.3)
    sign_in_as(browser_page, live_server, "alice")
    browser_page.goto(f"{live_server.url}/sandboxes/{sandbox.number}/")
    chart = browser_page.locator("[data-cost-url]")
    expect(chart.locator("canvas")).to_have_count(1)
    low, high = chart.evaluate("e => [e.chart.scales.x.min, e.chart.scales.x.max]")
    first_hour = sandbox.started_at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    assert low == first_hour.timestamp()  # no empty hours before it existed
    assert high - low >= 4 * 3600  # its first hour is not the whole chart
