"""What the end-to-end browser tests share: headless Debian Chromium driven by Playwright, signing
in, and the periodic reconcile job run by hand.

A test module sets `pytestmark = BROWSER` and imports the `browser_page` fixture. Tests are skipped
where /usr/bin/chromium (Debian's package) or Playwright is missing, and fail the run instead with
PORTAL_REQUIRE_BROWSER=1 (CI): see `pytest_collection_modifyitems` in tests/conftest.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.db import connections

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

BROWSER = [pytest.mark.browser]


@pytest.fixture
def browser_page(monkeypatch):
    from playwright import sync_api

    # Playwright's sync API keeps an event loop on this thread; the ORM calls the test makes
    # between browser steps are plain synchronous code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        page.set_default_timeout(15_000)
        # The connections the test makes ORM calls on. Django keeps them in context-local storage,
        # and this fixture's teardown runs in another context: closed here, or the one left open
        # keeps the test database from being dropped at the end of the run.
        used = [connections[alias] for alias in connections]
        yield page
        browser.close()
    for wrapper in used:
        wrapper.close()


def slow_pods(settings) -> None:
    """Simulated pods take POD_START_SECONDS to start, so a page has something to watch."""
    from workers.drivers.factory import get_driver

    settings.PORTAL_SIM_POD_START_SECONDS = POD_START_SECONDS
    get_driver.cache_clear()


def sign_in_as_alice(page, live_server) -> None:
    """Sign the researcher of tests/conftest.py in; she lands on her dashboard."""
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "pw-for-tests")
    page.click("button[type=submit]")


PHONE = {"width": 390, "height": 844}


def sign_in_as(page, live_server, username: str, password: str = "pw-for-tests") -> None:  # noqa: S107 (the test users' password)
    """Sign a user in through the sign-in page."""
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")


def reconcile_like_beat() -> None:
    """What the periodic `reconcile_due` job does in production: look at workloads that are due."""
    from workers.tasks.workloads import reconcile_due

    reconcile_due.apply()


def wait_for_pods() -> None:
    """Let the simulated pods start, then reconcile as the periodic job would."""
    time.sleep(POD_START_SECONDS + 0.2)
    reconcile_like_beat()
