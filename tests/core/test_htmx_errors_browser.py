"""An action htmx sends that fails (the server errs, the page is stale, the network is down) says
so in the messages area instead of doing nothing, in headless Chromium.

Skipped where /usr/bin/chromium or Playwright is missing; PORTAL_REQUIRE_BROWSER=1 (CI) fails instead.
"""

from __future__ import annotations

from portal.sandboxes.services.sandbox import sandbox_request
from tests import browser_support
from tests.browser_support import BROWSER, sign_in_as

browser_page = browser_support.browser_page  # the fixture, where pytest looks for it

pytestmark = BROWSER


def test_a_failed_decision_says_so_and_a_poll_does_not(
    live_server, transactional_db, browser_page, fleet, researcher, lead
):
    from playwright.sync_api import expect

    sandbox_request(user=researcher, team="vision", name="big", gpu_type="h100-80gb", count=2, ttl_hours=48)
    page = browser_page
    sign_in_as(page, live_server, "bob")
    page.goto(f"{live_server.url}/approvals/")
    messages = page.locator("#messages")

    page.route("**/decide/", lambda route: route.fulfill(status=500, body="boom"))
    page.click("button:has-text('Approve')")
    expect(messages).to_contain_text("the portal failed on its side")
    page.unroute("**/decide/")

    page.route("**/decide/", lambda route: route.fulfill(status=403, body="stale"))
    page.click("button:has-text('Approve')")
    expect(messages).to_contain_text("most likely because this page is older than your sign-in")
    page.unroute("**/decide/")

    page.route("**/decide/", lambda route: route.abort())
    page.click("button:has-text('Approve')")
    expect(messages).to_contain_text("could not be reached")
    page.unroute("**/decide/")

    page.evaluate("document.getElementById('messages').replaceChildren()")
    page.route("**/live/badges/**", lambda route: route.fulfill(status=500, body="boom"))
    page.evaluate("htmx.ajax('GET', '/live/badges/', {source: '#nav-live', swap: 'none'})")  # as a poll
    page.wait_for_timeout(500)
    expect(messages).to_be_empty()  # a failed poll stays quiet: the next one tries again
