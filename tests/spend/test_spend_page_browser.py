"""The spend page's charts in headless Chromium: drawn from the daily spend API, redrawn when the
split changes, the budget line for a lead's team month, and no script error.

Skipped where /usr/bin/chromium (Debian's package) or Playwright is missing; with
PORTAL_REQUIRE_BROWSER=1 (CI) that fails the run instead.
"""

from __future__ import annotations

from datetime import UTC, datetime

from tests import browser_support
from tests.browser_support import BROWSER, sign_in_as
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
    expect(page.locator('[data-spend-chart="cumulative"] .u-legend')).to_contain_text(
        "$50,000.00"
    )  # as the page writes money
    page.screenshot(path="/tmp/ui-spend-charts.png", full_page=True)

    page.select_option("select[name=split]", "gpu_type")
    expect(page.locator('[data-spend-chart="stacked"] .u-legend')).to_contain_text("NVIDIA H100 80GB")
    expect(page.locator('[data-spend-chart="stacked"] canvas')).to_have_count(1)
    page.wait_for_load_state("networkidle")
    assert "split=gpu_type" in page.url
    assert errors == []


def test_the_charts_count_whole_utc_days_wherever_the_viewer_is(
    live_server, transactional_db, browser_page, lead, researcher, team, whole_gpus
):
    """The day axis ticks UTC midnights and names UTC days, in a browser twelve hours ahead of UTC too:
    a bar is a UTC day, so an hour tick, or the viewer's own midnight, would misplace it."""
    from playwright.sync_api import expect

    make_hold(
        gpu=whole_gpus[0], user=researcher, team=team,
        started_at=datetime(2026, 1, 10, 10, tzinfo=UTC), ended_at=datetime(2026, 1, 10, 13, tzinfo=UTC),
    )  # fmt: skip
    context = browser_page.context.browser.new_context(timezone_id="Pacific/Auckland")  # UTC+13 in January
    page = context.new_page()
    sign_in_as(page, live_server, "bob")
    for start, end in (("2026-01-05", "2026-01-14"), ("2026-01-01", "2026-03-31")):
        page.goto(f"{live_server.url}/spend/?start={start}&end={end}&team=vision&split=user")
        for kind in ("stacked", "cumulative", "hours"):
            chart = page.locator(f'[data-spend-chart="{kind}"]')
            expect(chart.locator("canvas")).to_have_count(1)
            splits, labels = chart.evaluate("e => [e.chart.axes[0]._splits, e.chart.axes[0]._values]")
            assert len(splits) >= 3, (kind, end, splits)
            assert all(split % 86400 == 0 for split in splits), (kind, end, splits)
            first = datetime.fromtimestamp(splits[0], UTC)
            assert labels[0] == f"{first:%b} {first.day}\n{first.year}", (kind, end, labels)
            for split, label in zip(splits[1:], labels[1:], strict=True):
                day = datetime.fromtimestamp(split, UTC)
                assert label.split("\n")[0] == f"{day:%b} {day.day}", (kind, end, labels)
    page.goto(f"{live_server.url}/spend/?start=2026-01-09&end=2026-01-11&team=vision&split=user")
    stacked = page.locator('[data-spend-chart="stacked"]')
    expect(stacked.locator("canvas")).to_have_count(1)
    over = stacked.locator(".u-over")
    box = over.bounding_box()
    over.hover(position={"x": box["width"] / 2, "y": box["height"] - 2})  # the middle bar: the 10th
    legend = stacked.locator(".u-legend")
    expect(legend).to_contain_text("2026-01-10")
    expect(legend).to_contain_text("$")
    context.close()
