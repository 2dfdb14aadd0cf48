"""In the browser: a bad sizing value marks its input invalid (style and aria-invalid) beside the
error the swap shows, and a good one clears the mark."""

from __future__ import annotations

import re

from tests import browser_support
from tests.browser_support import BROWSER, sign_in_as_alice

browser_page = browser_support.browser_page  # the fixture, where pytest looks for it

pytestmark = BROWSER


def test_a_bad_context_marks_its_input_and_a_good_one_clears_it(
    live_server, transactional_db, browser_page, catalog, big_fleet, researcher
):
    from playwright.sync_api import expect

    page = browser_page
    sign_in_as_alice(page, live_server)
    page.goto(f"{live_server.url}/catalog/llama-3.1-8b-instruct/")
    context = page.locator("#id_context")
    context.fill("200000")
    context.press("Tab")
    expect(page.locator("#sizing-errors")).to_contain_text("At most 131,072 tokens")
    expect(context).to_have_attribute("aria-invalid", "true")
    expect(context).to_have_attribute("aria-describedby", "sizing-errors")
    expect(page.locator("#field-context")).to_have_class(re.compile(r"\bhas-error\b"))
    expect(page.locator("#id_concurrency")).not_to_have_attribute("aria-invalid", "true")
    context.fill("8192")
    context.press("Tab")
    expect(page.locator("#sizing-total")).to_be_visible()
    expect(context).not_to_have_attribute("aria-invalid", "true")
    expect(page.locator("#field-context")).not_to_have_class(re.compile(r"\bhas-error\b"))
