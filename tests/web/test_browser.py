"""One end-to-end run in headless Chromium: request a MIG slice, watch it start, end it.

Skipped where /usr/bin/chromium (Debian's package) or Playwright is missing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from portal.sandboxes.models import Sandbox, SandboxState

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
POD_START_SECONDS = 2.0

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"),
]


@pytest.fixture
def browser_page(monkeypatch):
    sync_api = pytest.importorskip("playwright.sync_api")
    # Playwright's sync API keeps an event loop on this thread; the ORM calls the test makes
    # between browser steps are plain synchronous code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        page.set_default_timeout(15_000)
        yield page
        browser.close()


def _reconcile_like_beat() -> None:
    """What the periodic `reconcile_due` job does in production: look at sandboxes that are due."""
    from workers.tasks.sandboxes import reconcile_due

    reconcile_due.apply()


def test_a_researcher_requests_a_slice_watches_it_start_and_ends_it(
    live_server, transactional_db, settings, browser_page, fleet, researcher, team
):
    from playwright.sync_api import expect

    from workers.drivers.factory import get_driver

    # Pods take a moment to start, so the page has something to watch; jobs run eagerly on commit.
    settings.PORTAL_SIM_POD_START_SECONDS = POD_START_SECONDS
    get_driver.cache_clear()
    page = browser_page

    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "pw-for-tests")
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("My sandboxes")
    page.screenshot(path="/tmp/ui-dashboard-empty.png", full_page=True)

    page.goto(f"{live_server.url}/sandboxes/new/")
    hourly = page.locator("#estimate-hourly")
    expect(hourly).to_have_text("$6.88")  # one whole H100 to start with
    page.check("input[name=gpu_mode][value=mig]")
    page.select_option("select[name=mig_profile]", "3g.40gb")
    expect(hourly).to_have_text("$2.95")  # 3/7 of 6.88
    page.select_option("select[name=mig_profile]", "1g.10gb")
    expect(hourly).to_have_text("$0.98")  # 1/7 of 6.88
    page.locator("input[name=ttl_hours]").fill("")
    page.locator("input[name=ttl_hours]").press_sequentially("2")
    expect(page.locator("#estimate-total")).to_have_text("$1.97")
    expect(page.locator("#estimate")).to_contain_text("Approved at once")
    expect(page.locator("#estimate")).to_contain_text("Capacity free now")
    page.locator("input[name=name]").press_sequentially("browser-slice")
    page.fill("textarea[name=purpose]", "Checking the portal end to end")
    page.screenshot(path="/tmp/ui-request-form.png", full_page=True)

    page.click("button:has-text('Request sandbox')")
    expect(page.locator("h1")).to_have_text("browser-slice")
    sandbox = Sandbox.objects.get(owner=researcher, name="browser-slice")
    assert page.url == f"{live_server.url}/sandboxes/{sandbox.pk}/"
    state = page.locator("#sandbox-live .status-head .state")
    expect(state).to_have_text("provisioning")
    page.evaluate("window.__notReloaded = true")

    time.sleep(POD_START_SECONDS + 0.2)
    _reconcile_like_beat()

    expect(state).to_have_text("running", timeout=10_000)
    assert page.evaluate("window.__notReloaded") is True
    expect(page.locator("#sandbox-live")).to_contain_text("gpu-h100-b · GPU 0 · 1g.10gb")
    expect(page.locator("#sandbox-live [data-copy]")).to_have_count(1)

    page.goto(f"{live_server.url}/")
    expect(page.locator(f"#sandbox-row-{sandbox.pk} .state")).to_have_text("running")
    page.screenshot(path="/tmp/ui-dashboard.png", full_page=True)

    page.goto(f"{live_server.url}/sandboxes/{sandbox.pk}/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("button:has-text('Terminate')")
    expect(page.locator(".flash-success")).to_contain_text("billing stopped")
    expect(state).to_have_text("terminated")
    sandbox.refresh_from_db()
    assert sandbox.state == SandboxState.TERMINATED
    assert os.path.exists("/tmp/ui-request-form.png")
