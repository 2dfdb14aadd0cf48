"""Every form control the portal draws wears the house style, on every page a lead or an admin
opens: a button or field left to the browser's defaults (a class the stylesheet does not know, an
input type it does not list) shows up here, checked in headless Chromium.

Skipped where /usr/bin/chromium or Playwright is missing; PORTAL_REQUIRE_BROWSER=1 (CI) fails instead.
"""

from __future__ import annotations

from portal.accounts.action_links import action_token_make
from portal.sandboxes.services.sandbox import sandbox_request
from portal.workloads.models import Approval
from tests import browser_support
from tests.browser_support import BROWSER, sign_in_as

browser_page = browser_support.browser_page  # the fixture, where pytest looks for it

pytestmark = BROWSER

# Buttons, and fields one types into or picks from, in the page's content, that are shown and
# keep the browser's square corners: the house style rounds every one of them.
UNSTYLED = """() => [...document.querySelectorAll(
    "main button, main input:not([type=hidden]):not([type=checkbox]):not([type=radio]), main select, main textarea"
  )].filter(e => e.offsetParent !== null && getComputedStyle(e).borderTopLeftRadius === "0px")
   .map(e => e.outerHTML.slice(0, 120))"""


def test_every_control_a_lead_and_an_admin_see_is_styled(
    live_server, transactional_db, browser_page, fleet, researcher, lead, admin_user
):
    sandbox = sandbox_request(
        user=researcher, team="vision", name="big", gpu_type="h100-80gb", count=2, ttl_hours=48
    )
    approval = Approval.objects.get(workload=sandbox)
    token = action_token_make(approval_id=approval.pk, lead_id=lead.pk, action="reject")
    lead_pages = [
        "/",
        "/sandboxes/new/",
        f"/sandboxes/{sandbox.number}/",
        "/deployments/new/",
        "/approvals/",
        f"/approvals/{approval.pk}/act/{token}/",
        "/spend/",
        "/notifications/",
        "/teams/vision/settings/",
        "/home/",
        "/tokens/",
        "/presets/",
    ]
    page = browser_page
    unstyled = {}
    sign_in_as(page, live_server, "bob")
    for path in lead_pages:
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
        unstyled[path] = page.evaluate(UNSTYLED)
    page.context.clear_cookies()
    sign_in_as(page, live_server, "admin")
    for path in ("/fleet/", "/audit/"):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
        unstyled[path] = page.evaluate(UNSTYLED)
    assert {path: found for path, found in unstyled.items() if found} == {}
