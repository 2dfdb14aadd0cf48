"""In headless Chromium: from a running deployment's page to a serving token, and with it a call
that passes the endpoint check (on the simulated cluster, the portal's stand-in for the model
server), while a call without it is refused.

Skipped where /usr/bin/chromium (Debian's package) or Playwright is missing; with
PORTAL_REQUIRE_BROWSER=1 (CI) that fails the run instead.
"""

from __future__ import annotations

from portal.catalog.demo import catalog_seed
from tests import browser_support
from tests.browser_support import BROWSER, sign_in_as_alice
from tests.rows import make_deployment

browser_page = browser_support.browser_page  # the fixture, where pytest looks for it

pytestmark = BROWSER


def test_a_researcher_makes_a_serving_token_from_the_page_and_calls_the_endpoint_with_it(
    live_server, transactional_db, settings, browser_page, fleet, researcher, team
):
    from playwright.sync_api import expect

    settings.PORTAL_BASE_URL = live_server.url  # where the example's stand-in is
    catalog_seed()
    deployment = make_deployment(owner=researcher, team=team, gpu=fleet["whole"].gpus.first())
    deployment.access = f"https://dep-vision-chat-{deployment.pk}.sandboxes.gpu.internal"
    deployment.save(update_fields=["access"])
    page = browser_page
    sign_in_as_alice(page, live_server)

    page.goto(f"{live_server.url}/deployments/{deployment.number}/")
    example = page.locator("#example pre").first.inner_text()
    assert "Authorization: Bearer $SERVING_TOKEN" in example
    url = example.split()[2]  # curl -s <url> ...
    assert url.startswith(f"{live_server.url}/simulated-endpoint/")

    page.click("#endpoint-token a")
    expect(page.locator("select[name=scope]")).to_have_value("serving")
    expect(page.locator("select[name=team]")).to_have_value("vision")
    page.fill("input[name=name]", "chat-client")
    page.click("button:has-text('Create token')")
    secret = page.locator("#new-token-secret").inner_text()
    expect(page.locator("#serving-token-use")).to_contain_text("team Vision")

    body = {"model": "meta-llama/Llama-3.1-8B-Instruct", "messages": [{"role": "user", "content": "hi"}]}
    refused = page.request.post(url, data=body)
    answered = page.request.post(url, data=body, headers={"Authorization": f"Bearer {secret}"})

    assert refused.status == 401
    assert answered.status == 200, answered.text()
    assert answered.json()["simulated"] is True and answered.json()["object"] == "chat.completion"
