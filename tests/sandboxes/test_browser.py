"""One end-to-end run in headless Chromium: request a MIG slice, watch it start, end it.

Skipped where /usr/bin/chromium (Debian's package) or Playwright is missing; with
PORTAL_REQUIRE_BROWSER=1 (CI) that fails the run instead.
"""

from __future__ import annotations

from portal.sandboxes.gate import gate_cache_clear
from portal.workloads.models import Workload, WorkloadState
from tests import browser_support
from tests.browser_support import BROWSER, sign_in_as_alice, slow_pods, wait_for_pods
from tests.factories import MembershipFactory
from tests.rows import make_sandbox

browser_page = browser_support.browser_page  # the fixture, where pytest looks for it

pytestmark = BROWSER


def test_a_researcher_requests_a_slice_watches_it_start_and_ends_it(
    live_server, transactional_db, settings, browser_page, fleet, researcher, team
):
    from playwright.sync_api import expect

    # Pods take a moment to start, so the page has something to watch; jobs run eagerly on commit.
    slow_pods(settings)
    page = browser_page

    sign_in_as_alice(page, live_server)
    expect(page.locator("h1")).to_have_text("My sandboxes")
    expect(page.locator(".empty")).to_contain_text("No sandboxes here")
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
    sandbox = Workload.objects.get(owner=researcher, name="browser-slice")
    assert page.url == f"{live_server.url}/sandboxes/{sandbox.number}/"
    state = page.locator("#sandbox-live .status-head .state")
    expect(state).to_have_text("provisioning")
    page.evaluate("window.__notReloaded = true")

    expect(page.locator("#sandbox-kubectl")).to_have_count(0)  # while it starts
    expect(page.locator("#sandbox-cost")).to_have_count(0)

    wait_for_pods()

    expect(state).to_have_text("running", timeout=10_000)
    expect(page.locator("#sandbox-live")).to_contain_text("gpu-h100-b · GPU 0 · 1g.10gb")
    # what running brings, swapped in with the live card: its charts (drawn), kubectl, its /home
    expect(page.locator("#sandbox-cost canvas")).to_have_count(1)
    expect(page.locator("#sandbox-kubectl")).to_contain_text("Get a kubeconfig")
    expect(page.locator("#home-note")).to_contain_text("alice's home volume (50 GB)")
    expect(page.locator("#sandbox-insight")).to_contain_text("Scheduled")
    assert page.evaluate("window.__notReloaded") is True

    # Open JupyterLab: through the portal's sign-in check to the sandbox (the simulated cluster's
    # stand-in page), in a new tab, as alice
    with page.context.expect_page() as opened:
        page.click("#open-app")
    app = opened.value
    expect(app.locator("#simulated-banner")).to_contain_text("Simulated cluster.")
    expect(app.locator("#portal-user")).to_have_text("alice")
    expect(app.locator("#sandbox-gpus")).to_contain_text("MIG 1g.10gb on NVIDIA H100 80GB (GPU 0")
    assert "portal_ticket" not in app.url  # the one-time ticket does not stay in the address bar
    app_url = app.url
    app.screenshot(path="/tmp/ui-sandbox-app.png", full_page=True)
    app.close()

    page.goto(f"{live_server.url}/")
    expect(page.locator(f"#sandbox-row-{sandbox.pk} .state")).to_have_text("running")
    page.screenshot(path="/tmp/ui-dashboard.png", full_page=True)

    page.goto(f"{live_server.url}/sandboxes/{sandbox.number}/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("button:has-text('Terminate')")
    expect(page.locator(".flash-success")).to_contain_text("billing stopped")
    expect(state).to_have_text("terminated")
    expect(page.locator("#sandbox-actions")).to_have_count(0)  # nothing left to extend or end
    sandbox.refresh_from_db()
    assert sandbox.state == WorkloadState.TERMINATED
    gate_cache_clear()  # the gate re-reads who may pass every few seconds; don't wait for it
    page.goto(app_url)  # the gate cookie is still in the browser, the door is shut
    expect(page.locator("h1")).to_have_text("You cannot open this sandbox")
    expect(page.locator("main")).to_contain_text("This sandbox has ended.")

    page.goto(f"{live_server.url}/")
    expect(page.locator(f"#sandbox-row-{sandbox.pk} .state")).to_have_text("terminated")


def test_the_project_field_suggests_the_labels_of_the_team_chosen(
    live_server, transactional_db, browser_page, fleet, researcher, team, other_team, h100
):
    MembershipFactory(user=researcher, team=other_team)
    make_sandbox(owner=researcher, team=team, gpu_type=h100, project="vision-ft")
    make_sandbox(owner=researcher, team=other_team, gpu_type=h100, project="nlp-chat")
    page = browser_page
    sign_in_as_alice(page, live_server)
    page.goto(f"{live_server.url}/sandboxes/new/")
    offered = "Array.from(document.querySelector('input[name=project]').list.options, o => o.value)"

    page.select_option("select[name=team]", "vision")
    assert page.evaluate(offered) == ["vision-ft"]
    page.select_option("select[name=team]", "nlp")
    assert page.evaluate(offered) == ["nlp-chat"]
