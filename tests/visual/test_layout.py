"""Phone width, dark mode, the skip link and the fixed visual glitches, checked in headless Chromium.

Skipped where /usr/bin/chromium or Playwright is missing; PORTAL_REQUIRE_BROWSER=1 (CI) fails instead.
"""

from __future__ import annotations

from decimal import Decimal

from portal.accounts.models import EmailDelivery, Notification
from portal.sandboxes.services.sandbox import sandbox_request
from portal.spend.models import Budget
from portal.workloads.models import Approval, WorkloadState
from tests import browser_support
from tests.browser_support import BROWSER, PHONE, sign_in_as, sign_in_as_alice
from tests.rows import make_sandbox

browser_page = browser_support.browser_page  # the fixture, where pytest looks for it

pytestmark = BROWSER

NO_SIDEWAYS_SCROLL = "document.documentElement.scrollWidth <= window.innerWidth"


def test_the_skip_link_is_the_first_thing_a_keyboard_reaches(
    live_server, transactional_db, browser_page, researcher
):
    page = browser_page
    sign_in_as_alice(page, live_server)
    page.wait_for_load_state("load")
    # Start from the top of the document, as a keyboard user arriving on the page does (the sign-in
    # form's button may still hold the focus the browser gave it).
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.keyboard.press("Tab")
    page.wait_for_function("document.activeElement && document.activeElement.className !== ''", timeout=5000)
    focused = page.evaluate("[document.activeElement.className, document.activeElement.textContent]")
    assert focused == ["skip-link", "Skip to content"]
    assert page.locator(".skip-link").bounding_box()["y"] >= 0  # on screen while focused
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "content"


def test_on_a_phone_the_menu_folds_and_opens_on_tap(
    live_server, transactional_db, browser_page, fleet, researcher
):
    page = browser_page
    page.set_viewport_size(PHONE)
    sign_in_as_alice(page, live_server)
    toggle = page.locator(".nav-toggle")
    links = page.locator("#nav-links")
    assert toggle.is_visible() and not links.is_visible()
    assert toggle.get_attribute("aria-expanded") == "false"
    assert page.locator(".topbar").bounding_box()["height"] < 70  # one row, not four
    toggle.click()
    assert links.is_visible() and toggle.get_attribute("aria-expanded") == "true"
    links.get_by_role("link", name="Catalog").click()
    assert page.locator("h1").text_content() == "Model catalog"


def test_without_javascript_the_menu_stays_in_view(live_server, transactional_db, browser_page, researcher):
    page = browser_page
    sign_in_as_alice(page, live_server)
    page.context.route("**/static/js/portal.js", lambda route: route.abort())
    page.set_viewport_size(PHONE)
    page.reload()
    assert page.locator("#nav-links").is_visible()
    assert not page.locator(".nav-toggle").is_visible()


def test_on_a_phone_the_dashboard_and_request_form_fit_without_sideways_scrolling(
    live_server, transactional_db, browser_page, fleet, researcher, slice_request
):
    sandbox_request(user=researcher, **slice_request)
    page = browser_page
    page.set_viewport_size(PHONE)
    sign_in_as_alice(page, live_server)
    row = page.locator("#sandbox-table tbody tr").first
    cost = row.locator("[data-label='Cost so far']")
    assert cost.is_visible()
    box = cost.bounding_box()
    assert box["x"] + box["width"] <= PHONE["width"]  # the cost is on screen, no scrolling
    assert page.evaluate(NO_SIDEWAYS_SCROLL)

    page.goto(f"{live_server.url}/sandboxes/new/")
    page.locator("#estimate-hourly").wait_for()
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    estimate = page.locator(".estimate-card").bounding_box()
    submit = page.get_by_role("button", name="Request sandbox").bounding_box()
    assert estimate["y"] + estimate["height"] <= submit["y"]  # the price before the button


def test_on_a_phone_the_wide_tables_of_notifications_and_budgets_scroll_in_their_card(
    live_server, transactional_db, browser_page, researcher, lead, team
):
    """The latest e-mails and the user and project budgets have many columns: they scroll inside
    their card, and the page itself does not scroll sideways."""
    EmailDelivery.objects.create(
        user=lead, address="bob@example.com", kind="budget", state="failed", attempts=4,
        subject="Team Vision: 119 % of project detector's monthly budget spent",
        body="x", last_error="SMTP 451: temporary local problem, please try again later",
    )  # fmt: skip
    Budget.objects.create(
        team=team, kind="project", project="detector-long-label", monthly_amount=Decimal(250)
    )
    Budget.objects.create(team=team, kind="user", user=researcher, monthly_amount=Decimal(400))
    page = browser_page
    page.set_viewport_size(PHONE)
    sign_in_as(page, live_server, "bob")
    for path, wide in (
        ("/notifications/", ".email-deliveries"),
        ("/teams/vision/budget/", "#target-budgets table"),
    ):
        page.goto(f"{live_server.url}{path}")
        page.locator(wide).wait_for()
        assert page.evaluate(NO_SIDEWAYS_SCROLL), path


def test_dark_mode_follows_the_system_setting(live_server, transactional_db, browser_page, researcher):
    page = browser_page
    sign_in_as_alice(page, live_server)
    background = "getComputedStyle(document.body).backgroundColor"
    assert page.evaluate(background) == "rgb(245, 246, 248)"
    page.emulate_media(color_scheme="dark")
    red, green, blue = (int(v) for v in page.evaluate(background)[4:-1].split(","))
    assert max(red, green, blue) < 40
    text = page.evaluate("getComputedStyle(document.querySelector('h1')).color")
    assert min(int(v) for v in text[4:-1].split(",")) > 200  # light text on it


def test_the_catalogs_capacity_filter_is_a_small_checkbox(
    live_server, transactional_db, browser_page, researcher
):
    page = browser_page
    sign_in_as_alice(page, live_server)
    page.goto(f"{live_server.url}/catalog/")
    box = page.locator("input[name=fits]").bounding_box()
    assert box["width"] < 24 and box["height"] < 24
    assert page.locator("label.pill:has(input[name=fits])").bounding_box()["height"] < 48


def test_a_disabled_button_looks_disabled(live_server, transactional_db, browser_page, researcher, team):
    """With no presets, *Fill the form* is disabled: it must not look like a button to press."""
    page = browser_page
    sign_in_as_alice(page, live_server)
    page.goto(f"{live_server.url}/sandboxes/new/")
    fill = page.locator("#preset-picker button")
    assert fill.is_disabled()
    assert fill.evaluate("b => getComputedStyle(b).cursor") == "not-allowed"
    assert float(fill.evaluate("b => getComputedStyle(b).opacity")) <= 0.5


def test_the_fleet_page_draws_clusters_and_mig_tiles_whole(
    live_server, transactional_db, browser_page, fleet, researcher, admin_user, slice_request
):
    sandbox_request(user=researcher, **slice_request)
    page = browser_page
    sign_in_as(page, live_server, "admin")
    page.goto(f"{live_server.url}/fleet/")
    heading = page.locator(".clusters h2")
    assert "monospace" not in heading.evaluate("h => getComputedStyle(h).fontFamily")
    discover = page.get_by_role("button", name="Discover GPU nodes now")
    assert discover.evaluate("b => b.classList.contains('button')")
    assert discover.evaluate("b => getComputedStyle(b).borderRadius") == "6px"
    for width in (1280, PHONE["width"]):
        page.set_viewport_size({"width": width, "height": 900})
        profiles = page.locator(".gpu-bar .slice b")
        assert profiles.count() >= 1
        cut = profiles.evaluate_all(
            "bs => bs.filter(b => b.scrollWidth > b.clientWidth || b.closest('.slice').scrollWidth > b.closest('.slice').clientWidth).map(b => b.textContent)"
        )
        assert cut == [], f"cut at {width}px: {cut}"
        assert "1g.10gb" in profiles.all_text_contents()


TABLE_OVERFLOW = "[...document.querySelectorAll('.table-wrap')].filter(w => w.scrollWidth > w.clientWidth).map(w => `${w.id}: ${w.scrollWidth}/${w.clientWidth}`)"


def test_a_leads_workload_lists_fit_a_desktop_page_without_sideways_scrolling(
    live_server, transactional_db, browser_page, fleet, researcher, lead
):
    from portal.catalog.demo import catalog_seed
    from portal.fleet.models import Gpu
    from tests.rows import make_deployment, make_sandbox

    catalog_seed()
    gpus = list(Gpu.objects.filter(node=fleet["whole"]).order_by("index"))
    team = lead.memberships.get().team
    make_sandbox(
        owner=researcher,
        team=team,
        gpu=gpus[0],
        name="vision-notebook-with-a-rather-long-name",
        project="image-segmentation-2026-spring",
    )
    make_sandbox(owner=lead, team=team, gpu_type=gpus[0].gpu_type, state="queued")
    for index, owner in enumerate((researcher, lead), start=1):
        make_deployment(
            owner=owner,
            team=team,
            gpu=gpus[index],
            name=f"llama-8b-serving-for-the-team-{index}",
            access=f"https://llama-8b-serving-for-the-team-{index}-vision.apps.gpu-portal.example.com/",
        )
    page = browser_page
    page.set_viewport_size({"width": 1280, "height": 900})
    sign_in_as(page, live_server, "bob")
    for path in ("/?scope=team", "/deployments/?scope=team"):
        page.goto(f"{live_server.url}{path}")
        page.locator(".table-wrap table").wait_for()
        assert page.evaluate(TABLE_OVERFLOW) == [], path
        per_hour = page.locator("tbody tr [data-label='Per hour']").first.bounding_box()
        assert per_hour["x"] + per_hour["width"] <= 1280, path  # the last column is on screen
    page.set_viewport_size(PHONE)
    page.reload()
    assert page.evaluate(NO_SIDEWAYS_SCROLL)


def test_on_a_desktop_an_admins_menu_search_and_user_menu_keep_to_one_row(
    live_server, transactional_db, browser_page, admin_user, researcher, team, h100
):
    admin_user.first_name, admin_user.last_name = "Platform", "Admin"  # as the demo's admin
    admin_user.save()
    for _ in range(12):  # two-digit badges beside Approvals and on the bell
        waiting = make_sandbox(
            owner=researcher, team=team, state=WorkloadState.PENDING_APPROVAL, gpu_type=h100
        )
        Approval.objects.create(workload=waiting, team=team, requested_by=researcher, why_needed="over quota")
        Notification.objects.create(user=admin_user, message="A sandbox failed.")
    page = browser_page
    sign_in_as(page, live_server, admin_user.username)
    from playwright.sync_api import expect

    for width in (1280, 1920):  # the nav is 1280 px at most, however wide the screen
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/fleet/")
        tops = page.evaluate(
            "[...document.querySelectorAll('.nav-links a, .nav-search input, .user-menu summary')]"
            ".map(el => Math.round(el.getBoundingClientRect().top + el.getBoundingClientRect().height / 2))"
        )
        assert len(tops) >= 11  # nine links, the search box, the user menu
        expect(page.locator("#nav-approvals-badge")).to_have_text("12")
        assert max(tops) - min(tops) <= 4, (width, tops)  # one row
        search, bell = (page.locator(each).bounding_box() for each in (".nav-search input", ".bell"))
        assert search["x"] + search["width"] <= bell["x"], width  # the search box does not run under the bell
        assert page.locator(".topbar").bounding_box()["height"] <= 60, width


CONTRAST = """els => els.map(el => {
  const rgb = s => s.match(/\\d+(\\.\\d+)?/g).slice(0, 3).map(Number).map(v => v / 255)
    .map(c => c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4));
  const lum = s => { const [r, g, b] = rgb(s); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const style = getComputedStyle(el);
  const [hi, lo] = [lum(style.color), lum(style.backgroundColor)].sort((a, b) => b - a);
  return [el.textContent.trim(), (hi + 0.05) / (lo + 0.05)];
})"""


def test_in_dark_mode_the_fleet_tags_are_readable(
    live_server, transactional_db, browser_page, fleet, admin_user
):
    from portal.fleet.models import Node

    Node.objects.filter(pk=fleet["mig"].pk).update(mig_config_state="success")
    page = browser_page
    page.emulate_media(color_scheme="dark")
    sign_in_as(page, live_server, "admin")
    page.goto(f"{live_server.url}/fleet/")
    tags = page.locator(".node-head .tag").evaluate_all(CONTRAST)
    assert any(text == "MIG layout applied" for text, _ in tags)
    low = [(text, round(ratio, 2)) for text, ratio in tags if ratio < 4.5]
    assert low == [], low


def test_on_a_phone_the_sandbox_events_and_the_audit_log_are_cards_not_wide_tables(
    live_server, transactional_db, browser_page, fleet, researcher, lead, slice_request
):
    from portal.audit.services import audit_record
    from portal.workloads.models import WorkloadInsight

    sandbox = sandbox_request(user=researcher, **slice_request)
    WorkloadInsight.objects.create(
        workload=sandbox,
        read_at=sandbox.created_at,
        events=[
            {
                "at": "2026-12-01T13:00:05Z",
                "type": "Warning",
                "reason": "FailedScheduling",
                "object": "pod/sbx-1-mig-small-notebook-0-with-a-long-generated-suffix",
                "message": "0/2 nodes are available: 2 Insufficient nvidia.com/mig-1g.10gb. "
                "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
            }
        ],
    )
    audit_record(
        actor=researcher,
        action="sandbox.extend",
        obj=sandbox,
        team=sandbox.team,
        detail="+30 minutes, expires 2026-12-01 13:30 UTC; a detail long enough to need more than one line",
    )
    page = browser_page
    page.set_viewport_size(PHONE)
    sign_in_as_alice(page, live_server)
    page.goto(f"{live_server.url}/sandboxes/{sandbox.number}/")
    page.locator("#sandbox-events").wait_for()
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    assert page.evaluate(TABLE_OVERFLOW) == []
    assert page.locator("#sandbox-events thead").is_hidden()  # stacked: each event a card
    page.context.clear_cookies()
    sign_in_as(page, live_server, "bob")
    page.goto(f"{live_server.url}/audit/")
    page.locator("table.audit").wait_for()
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    assert page.evaluate(TABLE_OVERFLOW) == []
    assert page.locator("table.audit [data-label='Action']").first.is_visible()


def test_on_a_phone_the_tokens_and_ssh_keys_pages_scroll_only_their_tables(
    live_server, transactional_db, browser_page, researcher
):
    from portal.accounts.services import token_create
    from portal.accounts.ssh_keys import ssh_key_add
    from tests.accounts.test_ssh_keys import ED25519

    token_create(user=researcher, name="ci-pipeline")
    ssh_key_add(user=researcher, name="laptop", public_key=ED25519)
    page = browser_page
    page.set_viewport_size(PHONE)
    sign_in_as_alice(page, live_server)
    for path, row in (("/tokens/", "ci-pipeline"), ("/ssh-keys/", "laptop")):
        page.goto(f"{live_server.url}{path}")
        page.get_by_role("cell", name=row).wait_for()
        # the table's hidden "Actions" header stays inside the table's own scroll box
        assert page.evaluate(NO_SIDEWAYS_SCROLL), path
