"""Every page a lead or an admin opens, audited in headless Chromium: axe-core's accessibility
rules (WCAG 2 A and AA: contrast, names, labels, links set apart from text), in the light and the
dark theme and at phone width, and every form control in the house style (a button or field left
to the browser's defaults: a class the stylesheet does not know, an input type it does not list).

Skipped where /usr/bin/chromium or Playwright is missing; PORTAL_REQUIRE_BROWSER=1 (CI) fails instead.
"""

from __future__ import annotations

import pytest

from portal.accounts.action_links import action_token_make
from portal.catalog.demo import catalog_seed
from portal.sandboxes.services.sandbox import sandbox_request
from portal.workloads.models import Approval
from tests import browser_support
from tests.browser_support import BROWSER, sign_in_as
from tests.browser_support import PHONE as PHONE_SIZE
from tests.rows import make_deployment, make_sandbox

browser_page = browser_support.browser_page  # the fixture, where pytest looks for it

pytestmark = BROWSER

# Buttons, and fields one types into or picks from, in the page's content, that are shown and
# keep the browser's square corners: the house style rounds every one of them.
UNSTYLED = """() => [...document.querySelectorAll(
    "main button, main input:not([type=hidden]):not([type=checkbox]):not([type=radio]), main select, main textarea"
  )].filter(e => e.offsetParent !== null && getComputedStyle(e).borderTopLeftRadius === "0px")
   .map(e => e.outerHTML.slice(0, 120))"""
WCAG = {"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}}


def _violations(page) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    found = Axe().run(page, options=WCAG).response["violations"]
    return [f"{rule['id']}: {node['html'][:100]}" for rule in found for node in rule["nodes"][:3]]


@pytest.fixture
def pages(fleet, researcher, lead, team, whole_gpus) -> dict[str, list[str]]:
    """What a lead and an admin open, with something on each: a running sandbox and deployment,
    a request waiting for the lead, and the page the lead's e-mailed link opens."""
    catalog_seed()
    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0], name="notebook")
    deployment = make_deployment(owner=researcher, team=team, gpu=whole_gpus[1], name="chat")
    waiting = sandbox_request(
        user=researcher, team="vision", name="big", gpu_type="h100-80gb", count=2, ttl_hours=48
    )
    approval = Approval.objects.get(workload=waiting)
    token = action_token_make(approval_id=approval.pk, lead_id=lead.pk, action="reject")
    return {
        "bob": [
            "/",
            "/sandboxes/new/",
            f"/sandboxes/{sandbox.number}/",
            "/deployments/",
            "/deployments/new/",
            f"/deployments/{deployment.number}/",
            "/catalog/",
            "/catalog/llama-3.1-8b-instruct/",
            "/approvals/",
            f"/approvals/{approval.pk}/act/{token}/",
            "/spend/",
            "/notifications/",
            "/teams/vision/settings/",
            "/teams/",
            "/ssh-keys/",
            "/home/",
            "/tokens/",
            "/presets/",
            "/audit/",
        ],
        "admin": ["/fleet/"],
    }


def _audit(page, live_server, pages, *, styled: bool) -> dict[str, list[str]]:
    found = {}
    for user, paths in pages.items():
        page.context.clear_cookies()
        sign_in_as(page, live_server, user)
        for path in paths:
            page.goto(f"{live_server.url}{path}")
            page.wait_for_load_state("networkidle")
            found[f"{user} {path}"] = _violations(page) + (page.evaluate(UNSTYLED) if styled else [])
    return {where: what for where, what in found.items() if what}


# In the dark theme, a page of each kind of component (badges, verdicts, facts, tables, forms, tiles);
# at phone width, the pages whose tables and facts fold into cards.
DARK = (
    "/",
    "/sandboxes/new/",
    "/catalog/llama-3.1-8b-instruct/",
    "/approvals/",
    "/spend/",
    "/notifications/",
)
PHONE = ("/", "/approvals/", "/spend/", "/fleet/")


def _some(pages: dict[str, list[str]], wanted: tuple[str, ...]) -> dict[str, list[str]]:
    """Of `pages`, those listed and the pages of one object (a sandbox, a deployment, a model, an
    approval's link: their addresses hold a number)."""
    return {
        user: [path for path in paths if path in wanted or any(c.isdigit() for c in path)]
        for user, paths in pages.items()
    }


# Three tests, not one: the browser tests run on two workers, and one test of every page would keep
# one of them busy while the other finished the rest.
@pytest.mark.long
@pytest.mark.parametrize("view", ["light", "dark", "phone"])
def test_a_leads_and_an_admins_pages_pass_the_audits_light_dark_and_on_a_phone(
    live_server, transactional_db, browser_page, pages, admin_user, view
):
    if view == "light":
        assert _audit(browser_page, live_server, pages, styled=True) == {}
    elif view == "dark":
        dark = browser_page.context.browser.new_page(color_scheme="dark")
        assert _audit(dark, live_server, _some(pages, DARK), styled=False) == {}
        dark.close()
    else:
        browser_page.set_viewport_size(PHONE_SIZE)
        assert _audit(browser_page, live_server, _some(pages, PHONE), styled=False) == {}
