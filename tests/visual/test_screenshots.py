"""Screenshots of the main pages at desktop and phone widths, compared with the references
committed under tests/visual/references/ with a small tolerance.

After a change to the look on purpose, write new references and review them before committing:
    PORTAL_UPDATE_SCREENSHOTS=1 .venv/bin/pytest tests/visual/test_screenshots.py
Fixed data (the demo seed), no animations or caret, and regions that show times or live figures
masked; the fonts are those of the CI machine image.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.core.management import call_command

from tests import browser_support
from tests.browser_support import BROWSER, PHONE, sign_in_as

browser_page = browser_support.browser_page  # the fixture, where pytest looks for it

pytestmark = BROWSER

REFERENCES = Path(__file__).parent / "references"
UPDATE = os.environ.get("PORTAL_UPDATE_SCREENSHOTS") == "1"
PAGES = {
    "login": "/login/",
    "dashboard": "/",
    "request": "/sandboxes/new/",
    "catalog": "/catalog/",
    "spend": "/spend/",
    "approvals": "/approvals/",
    "fleet": "/fleet/",
    "sandbox": "/sandboxes/1/",  # alice's running sandbox, made below (the seed has none)
}
WIDTHS = {"desktop": {"width": 1280, "height": 900}, "phone": PHONE}
# what changes from run to run: times, countdowns, charts drawn from live series, the CSRF-bound bits
DYNAMIC = (
    "time, [data-countdown-until], .chart, .live-note, .sub, .trail, #notifications, .spend-exports,"
    " #expires, #cost-so-far"
)
# a pixel differs when any channel moves more than this; the page fails above MAX_DIFFERENT_RATIO
CHANNEL_TOLERANCE = 16
MAX_DIFFERENT_RATIO = 0.01


def different_ratio(actual: Path, reference: Path) -> float:
    """The share of pixels that differ beyond CHANNEL_TOLERANCE (1.0 when the sizes differ)."""
    from PIL import Image, ImageChops

    with Image.open(actual) as got, Image.open(reference) as want:
        if got.size != want.size:
            return 1.0
        diff = ImageChops.difference(got.convert("RGB"), want.convert("RGB")).convert("L")
        changed = diff.point(lambda value: 255 if value > CHANNEL_TOLERANCE else 0)
        return changed.histogram()[255] / (got.size[0] * got.size[1])


def running_sandbox() -> None:
    """Sandbox 1: alice's, running on a whole GPU of the demo fleet for two hours."""
    from portal.accounts.models import User
    from portal.fleet.models import Gpu
    from tests.rows import make_sandbox

    alice = User.objects.get(username="alice")
    gpu = Gpu.objects.filter(mig_enabled=False).order_by("node__name", "index").first()
    make_sandbox(
        owner=alice,
        team=alice.memberships.order_by("team__slug").first().team,
        gpu=gpu,
        name="vision-notebook",
    )


@pytest.mark.long
def test_main_pages_look_as_their_references(live_server, transactional_db, browser_page, tmp_path):
    call_command("seed_demo", "--no-history", verbosity=0)
    running_sandbox()
    page = browser_page
    # no motion (portal.css stops animations under reduced motion; the CSP refuses injected styles)
    page.emulate_media(reduced_motion="reduce", color_scheme="light")
    problems = []
    for width_name, viewport in WIDTHS.items():
        page.set_viewport_size(viewport)
        page.context.clear_cookies()
        for name, path in PAGES.items():
            if name == "dashboard":
                sign_in_as(page, live_server, "admin", "portal-demo")
            page.goto(f"{live_server.url}{path}")
            page.wait_for_load_state("networkidle")
            shot = tmp_path / f"{name}-{width_name}.png"
            page.screenshot(
                path=str(shot),
                full_page=True,
                animations="disabled",
                caret="hide",
                mask=[page.locator(DYNAMIC)],
                mask_color="#888888",
            )
            reference = REFERENCES / shot.name
            if UPDATE:
                REFERENCES.mkdir(exist_ok=True)
                reference.write_bytes(shot.read_bytes())
                continue
            if not reference.exists():
                problems.append(f"{shot.name}: no reference (PORTAL_UPDATE_SCREENSHOTS=1 writes one)")
                continue
            ratio = different_ratio(shot, reference)
            if ratio > MAX_DIFFERENT_RATIO:
                kept = Path("/tmp") / f"visual-{shot.name}"
                kept.write_bytes(shot.read_bytes())
                problems.append(f"{shot.name}: {ratio:.1%} of pixels differ (this run's screenshot: {kept})")
    if UPDATE:
        pytest.skip("references written: review and commit tests/visual/references/")
    assert not problems, "\n".join(problems)
