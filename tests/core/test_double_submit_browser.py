"""A form posted twice in a row (a double click on its button) sends one request: the second
answer would otherwise replace the page of the first, which went through. A plain form is held by
portal.js; a decision sent by htmx swaps its row, form and all, so a second click's request, which
htmx queues behind the first, has no form left to send.

Skipped where /usr/bin/chromium or Playwright is missing; PORTAL_REQUIRE_BROWSER=1 (CI) fails instead.
"""

from __future__ import annotations

import time

from portal.sandboxes.views import pages
from portal.workloads.models import Workload
from tests import browser_support
from tests.browser_support import BROWSER, sign_in_as, sign_in_as_alice

browser_page = browser_support.browser_page  # the fixture, where pytest looks for it

pytestmark = BROWSER


def double_click(page, button) -> None:
    """Two clicks 150 ms apart, as a person double-clicks, with the mouse itself: a click on the
    button would wait for the page the first one opens."""
    button.scroll_into_view_if_needed()
    box = button.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.click(x, y)
    page.wait_for_timeout(150)
    page.mouse.click(x, y)


def test_a_double_clicked_request_is_sent_once_and_lands_on_its_sandbox(
    live_server, transactional_db, browser_page, fleet, researcher, team, monkeypatch
):
    from playwright.sync_api import expect

    # The portal takes a moment to answer, as under load: the second click comes while the first
    # request is on its way.
    request = pages.sandbox_request
    monkeypatch.setattr(pages, "sandbox_request", lambda **kwargs: time.sleep(0.6) or request(**kwargs))
    page = browser_page
    sign_in_as_alice(page, live_server)
    page.goto(f"{live_server.url}/sandboxes/new/")
    page.locator("input[name=name]").fill("twice")
    page.fill("textarea[name=purpose]", "A double click")
    form_url = f"{live_server.url}/sandboxes/new/"
    posts = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" and r.url == form_url else None)

    double_click(page, page.locator("button:has-text('Request sandbox')"))

    expect(page.locator("h1")).to_have_text("twice")
    sandbox = Workload.objects.get(owner=researcher, name="twice")
    assert page.url == f"{live_server.url}/sandboxes/{sandbox.number}/"
    assert posts == [form_url]
    expect(page.locator(".flash-error")).to_have_count(0)

    # Back on the form, it can be sent again: a page the browser restores from its cache keeps the
    # form as it was left (busy), and its pageshow frees it.
    page.go_back()
    page.evaluate(
        """() => {
        document.getElementById("request-form").setAttribute("aria-busy", "true");
        window.dispatchEvent(new PageTransitionEvent("pageshow", {persisted: true}));
    }"""
    )
    expect(page.locator("form[aria-busy]")).to_have_count(0)


def test_a_double_clicked_decision_is_sent_once_and_says_approved(
    live_server, transactional_db, browser_page, fleet, researcher, lead, monkeypatch
):
    from playwright.sync_api import expect

    from portal.approvals import views
    from portal.sandboxes.services.sandbox import sandbox_request

    sandbox_request(user=researcher, team="vision", name="big", gpu_type="h100-80gb", count=2, ttl_hours=48)
    decide = views.approval_decide
    monkeypatch.setattr(views, "approval_decide", lambda **kwargs: time.sleep(0.6) or decide(**kwargs))
    page = browser_page
    sign_in_as(page, live_server, "bob")
    page.goto(f"{live_server.url}/approvals/")
    posts = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)

    double_click(page, page.locator("button:has-text('Approve')"))

    row = page.locator("tr[id^=approval-]")
    expect(row.locator(".state")).to_have_text("approved")
    page.wait_for_timeout(1500)  # a second request, had one been queued, has had its answer
    expect(row.locator(".state")).to_have_text("approved")
    expect(row.locator(".field-error")).to_have_count(0)
    expect(page.locator("#messages .flash-error")).to_have_count(0)
    assert len(posts) == 1, posts
