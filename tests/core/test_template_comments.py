"""Django's `{# #}` comments end on the line they start: one left open there is printed on the
page, as text (a `{% comment %}` block spans lines)."""

from __future__ import annotations

from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def test_every_short_comment_closes_on_its_own_line():
    open_comments = [
        f"{path.relative_to(TEMPLATES)}:{number}"
        for path in sorted(TEMPLATES.rglob("*.html"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if line.count("{#") > line.count("#}")
    ]
    assert open_comments == []
