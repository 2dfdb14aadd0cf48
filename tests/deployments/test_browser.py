"""One end-to-end run in headless Chromium: size a big model in the catalog, deploy a small one,
watch it start, use its endpoint's example, scale it, end it.

Skipped where /usr/bin/chromium (Debian's package) or Playwright is missing; with
PORTAL_REQUIRE_BROWSER=1 (CI) that fails the run instead.
"""

from __future__ import annotations

import pytest

from portal.catalog.demo import catalog_seed
from portal.workloads.models import Workload, WorkloadState
from tests import browser_support
from tests.browser_support import BROWSER, sign_in_as_alice, slow_pods, wait_for_pods

browser_page = browser_support.browser_page  # the fixture, where pytest looks for it

pytestmark = BROWSER


@pytest.mark.long
def test_a_researcher_sizes_70b_deploys_8b_scales_it_and_ends_it(
    live_server, transactional_db, settings, browser_page, fleet, researcher, team
):
    from playwright.sync_api import expect

    catalog_seed()
    team.auto_approve_max_gpus = 2  # two replicas on one whole GPU each stay within policy
    team.save()
    slow_pods(settings)
    page = browser_page

    sign_in_as_alice(page, live_server)
    expect(page.locator("h1")).to_have_text("My sandboxes")

    # The catalog: Llama 3.1 70B in bf16 does not fit one 80 GB GPU; four, at $27.52 an hour.
    page.click("nav >> text=Catalog")
    row = page.locator("#catalog-row-llama-3\\.1-70b-instruct")
    expect(row).to_contain_text("4 \N{MULTIPLICATION SIGN} h100-80gb")
    expect(row).to_contain_text("$27.52")
    row.locator("a").first.click()
    expect(page.locator("#sizing-verdict")).to_contain_text(
        "Needs at least 4 \N{MULTIPLICATION SIGN} 80 GB GPUs"
    )
    expect(page.locator("#sizing-fits")).to_contain_text("$27.52")
    page.screenshot(path="/tmp/dep-catalog-70b.png", full_page=True)

    # Deploy Llama 3.1 8B from its catalog page, on one whole H100.
    page.goto(f"{live_server.url}/catalog/llama-3.1-8b-instruct/")
    page.click("#deploy-model")
    expect(page.locator("h1")).to_have_text("Deploy a model")
    expect(page.locator("select[name=model]")).to_have_value("llama-3.1-8b-instruct")
    hourly = page.locator("#estimate-hourly")
    expect(hourly).to_have_text("$2.95")  # the cheapest fit: a 3g.40gb slice
    # Another model redraws its precision and context; coming back restores Llama's.
    page.select_option("select[name=model]", "bge-large-en-v1.5")
    expect(page.locator("input[name=context]")).to_have_value("512")
    expect(page.locator("select[name=dtype]")).to_have_value("fp16")
    page.select_option("select[name=model]", "llama-3.1-8b-instruct")
    expect(page.locator("input[name=context]")).to_have_value("8192")
    expect(hourly).to_have_text("$2.95")
    page.select_option("select[name=gpu]", "h100-80gb/1")
    expect(hourly).to_have_text("$6.88")
    page.locator("input[name=replicas]").fill("2")
    page.locator("input[name=replicas]").press("Tab")
    expect(hourly).to_have_text("$13.76")
    page.locator("input[name=replicas]").fill("1")
    page.locator("input[name=replicas]").press("Tab")
    expect(hourly).to_have_text("$6.88")
    expect(page.locator("#estimate")).to_contain_text("Approved at once")
    page.locator("input[name=name]").press_sequentially("llama-chat")
    page.screenshot(path="/tmp/dep-form.png", full_page=True)

    page.click("button:has-text('Deploy')")
    expect(page.locator("h1")).to_have_text("llama-chat")
    workload = Workload.objects.get(owner=researcher, kind="deployment", name="llama-chat")
    assert page.url == f"{live_server.url}/deployments/{workload.number}/"
    state = page.locator("#deployment-live .status-head .state")
    expect(state).to_have_text("provisioning")
    expect(page.locator("#deployment-cost")).to_have_count(0)
    page.evaluate("window.__notReloaded = true")

    wait_for_pods()
    expect(state).to_have_text("running", timeout=10_000)
    expect(page.locator("#deployment-cost canvas")).to_have_count(1)  # its charts, swapped in
    expect(page.locator("#deployment-utilization")).to_have_count(1)
    # what it served, from the same API a script reads: nothing yet, said so (not "Loading…")
    expect(page.locator("#deployment-serving-chart [data-serving-rows]")).to_contain_text("Nothing served")
    assert page.evaluate("window.__notReloaded") is True
    workload.refresh_from_db()
    expect(page.locator("#endpoint code")).to_have_text(workload.access)
    host = workload.access.removeprefix("https://")
    expect(page.locator("#example")).to_contain_text(f"/simulated-endpoint/{host}/v1/chat/completions")
    expect(page.locator("#endpoint-simulated")).to_be_visible()
    expect(page.locator("#example")).to_contain_text('"model": "meta-llama/Llama-3.1-8B-Instruct"')
    expect(page.locator("#replica-health")).to_have_text("1 of 1 ready")
    expect(page.locator("#placement")).to_contain_text("replica 0: gpu-h100-a · GPU 0")
    page.screenshot(path="/tmp/dep-running.png", full_page=True)

    # Scale to two replicas: within policy, so at once; the second one starts like the first.
    page.fill("#scale-form input[name=replicas]", "2")
    page.click("#scale-form button")
    expect(page.locator(".flash-success")).to_contain_text("Scaling to 2 replicas")
    wait_for_pods()
    expect(page.locator("#replica-health")).to_have_text("2 of 2 ready", timeout=10_000)
    expect(page.locator("#placement li")).to_have_count(2)
    expect(page.locator("#hourly-cost")).to_contain_text("$13.76")
    page.screenshot(path="/tmp/dep-scaled.png", full_page=True)

    page.click("nav >> text=Deployments")
    row = page.locator(f"#deployment-row-{workload.pk}")
    expect(row.locator(".replicas")).to_have_text("2/2")
    expect(row).to_contain_text(workload.access)
    page.screenshot(path="/tmp/dep-list.png", full_page=True)

    page.goto(f"{live_server.url}/deployments/{workload.number}/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("button:has-text('Terminate')")
    expect(page.locator(".flash-success")).to_contain_text("billing stopped")
    expect(state).to_have_text("terminated", timeout=10_000)
    expect(page.locator("#deployment-actions")).to_have_count(0)
    page.screenshot(path="/tmp/dep-ended.png", full_page=True)
    workload.refresh_from_db()
    assert workload.state == WorkloadState.TERMINATED
