"""The strict Content Security Policy breaks no page: headless Chromium walks the main pages (the
dashboard, the request form and its live estimate, a sandbox and its app behind the sign-in check,
spend with its charts, a deployment and the deploy form redrawn for another model, the fleet, the
Django admin, the browsable API and the API docs) and the console reports no violation and no
script error.

Skipped where /usr/bin/chromium (Debian's package) or Playwright is missing; with
PORTAL_REQUIRE_BROWSER=1 (CI) that fails the run instead.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests import browser_support
from tests.browser_support import BROWSER, sign_in_as_alice
from tests.rows import make_deployment, make_hold, make_sandbox

browser_page = browser_support.browser_page  # the fixture, where pytest looks for it

pytestmark = BROWSER


class Console:
    """What the pages of a browser context say: CSP violations, script errors, failed loads."""

    def __init__(self, context):
        self.problems: list[str] = []
        context.on("console", self._message)
        context.on("weberror", lambda error: self.problems.append(f"script error: {error.error}"))
        context.on("response", self._response)

    def _message(self, message) -> None:
        text = message.text
        if text.startswith("Failed to load resource"):
            return  # told by _response, with the address
        if message.type == "error" or "Content Security Policy" in text or "Content-Security-Policy" in text:
            self.problems.append(f"{message.type} on {message.page.url if message.page else '?'}: {text}")

    def _response(self, response) -> None:
        # Browsers ask for /favicon.ico of pages that name none (DRF's, the admin's).
        if response.status >= 400 and not response.url.endswith("/favicon.ico"):
            self.problems.append(f"{response.status} for {response.url}")


def visit(page, url: str, console: Console, ready: str) -> None:
    """Open `url`, wait for `ready` and for htmx's requests to settle, then note the console."""
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.locator(ready).first).to_be_visible()
    page.wait_for_load_state("networkidle")


@pytest.mark.long
def test_the_main_pages_raise_no_content_security_policy_violation(
    live_server, transactional_db, browser_page, fleet, researcher, lead, team, admin_user, whole_gpus
):
    from playwright.sync_api import expect

    from portal.catalog.demo import catalog_seed

    catalog_seed()
    now = timezone.now()
    cluster = whole_gpus[0].node.cluster
    sandbox = make_sandbox(
        owner=researcher,
        team=team,
        gpu=whole_gpus[0],
        name="csp-box",
        namespace="sbx-csp-box",
        cluster=cluster,
    )
    deployment = make_deployment(owner=researcher, team=team, gpu=whole_gpus[1])
    make_hold(
        gpu=whole_gpus[2],
        user=researcher,
        team=team,
        started_at=now - timedelta(days=3),
        ended_at=now - timedelta(days=2),
    )
    page = browser_page
    console = Console(page.context)
    base = live_server.url

    sign_in_as_alice(page, live_server)
    expect(page.locator("h1")).to_have_text("My sandboxes")
    page.wait_for_load_state("networkidle")

    visit(page, f"{base}/sandboxes/new/", console, "#estimate-hourly")
    # The live estimate follows the form (htmx triggers relayed by portal.js, no eval).
    expect(page.locator("#estimate-hourly")).to_have_text("$6.88")
    page.check("input[name=gpu_mode][value=mig]")
    page.select_option("select[name=mig_profile]", "1g.10gb")
    expect(page.locator("#estimate-hourly")).to_have_text("$0.98")
    page.locator("input[name=ttl_hours]").fill("")
    page.locator("input[name=ttl_hours]").press_sequentially("2")
    expect(page.locator("#estimate-total")).to_have_text("$1.97")

    visit(page, f"{base}/sandboxes/{sandbox.number}/", console, "#sandbox-live")
    with page.context.expect_page() as opened:
        page.click("#open-app")
    app = opened.value
    expect(app.locator("#simulated-banner")).to_contain_text("Simulated cluster.")
    app.wait_for_load_state("networkidle")
    app.close()

    visit(page, f"{base}/deployments/{deployment.number}/", console, "h1")
    visit(page, f"{base}/deployments/new/?model=llama-3.1-8b-instruct", console, "#sizing-fields")
    # Another model redraws the sizing fields out of band, and htmx settles the new inputs from
    # the old ones of the same id. Style attributes are not settled: one left on the old inputs by
    # script (a password manager, the browser's autofill, here the style object) would be copied,
    # which the policy refuses even when empty.
    page.evaluate(
        "document.querySelectorAll('#sizing-fields input').forEach(input => input.style.cssText = '')"
    )
    page.select_option("select[name=model]", "bge-large-en-v1.5")
    expect(page.locator("input[name=context]")).to_have_value("512")
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(200)  # past htmx's settle delay
    visit(page, f"{base}/catalog/", console, "h1")
    visit(page, f"{base}/home/", console, "h1")
    visit(page, f"{base}/tokens/", console, "h1")
    visit(page, f"{base}/api/v1/me", console, "pre")  # the browsable API, signed in by session

    page.context.clear_cookies()
    page.goto(f"{base}/login/")
    page.fill("#id_username", "bob")
    page.fill("#id_password", "pw-for-tests")
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_be_visible()
    visit(page, f"{base}/spend/?group_by=day", console, "#spend-table")
    visit(page, f"{base}/approvals/", console, "h1")

    page.context.clear_cookies()
    visit(page, f"{base}/admin/login/", console, "#id_username")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw-for-tests")
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_be_visible()
    visit(page, f"{base}/admin/accounts/user/", console, "#result_list")
    visit(page, f"{base}/admin/accounts/user/{researcher.pk}/change/", console, "#user_form")
    visit(page, f"{base}/fleet/", console, ".gpu-bar")
    visit(page, f"{base}/api/docs/", console, ".swagger-ui .info")
    expect(page.locator(".swagger-ui .opblock").first).to_be_visible()

    assert not console.problems, "\n".join(console.problems)
