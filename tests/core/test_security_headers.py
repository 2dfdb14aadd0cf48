"""Every answer carries the browser security headers: a strict Content Security Policy (scripts and
styles from the portal's own files only, no framing), X-Frame-Options, Referrer-Policy, nosniff and
Cross-Origin-Opener-Policy: pages, fragments, API answers, error pages and the API docs. The
templates hold nothing the policy refuses (inline script or style, event handler attributes, htmx
attributes that evaluate code), so `test_csp_browser.py` has little to find."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from tests.rows import HTMX

pytestmark = pytest.mark.django_db

TEMPLATES = Path(settings.BASE_DIR) / "templates"
STATIC_JS = Path(settings.BASE_DIR) / "static" / "js"


def policy(answer) -> dict[str, list[str]]:
    """The Content-Security-Policy header as directive -> sources."""
    header = answer["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in header.split(";") if part.strip()}


def assert_secured(answer) -> None:
    directives = policy(answer)
    assert directives["default-src"] == ["'self'"]
    assert directives["script-src"] == ["'self'"]
    assert directives["style-src"] == ["'self'"]
    assert directives["img-src"] == ["'self'", "data:"]
    assert directives["connect-src"] == ["'self'"]
    assert directives["frame-ancestors"] == ["'none'"]
    assert directives["base-uri"] == ["'self'"]
    assert directives["form-action"] == ["'self'"]
    assert directives["object-src"] == ["'none'"]
    assert answer["X-Frame-Options"] == "DENY"
    assert answer["Referrer-Policy"] == "same-origin"
    assert answer["X-Content-Type-Options"] == "nosniff"
    assert answer["Cross-Origin-Opener-Policy"] == "same-origin"


@pytest.mark.parametrize("path", ["/", "/sandboxes/new/", "/spend/", "/catalog/", "/tokens/"])
def test_pages_carry_the_security_headers(path, researcher_client, fleet):
    answer = researcher_client.get(path)

    assert answer.status_code == 200
    assert_secured(answer)


def test_htmx_fragments_carry_them_too(researcher_client, fleet):
    answer = researcher_client.get("/", **HTMX)

    assert answer.status_code == 200
    assert_secured(answer)


@pytest.mark.parametrize("path", ["/login/", "/no-such-page/", "/admin/login/"])
def test_pages_for_anonymous_visitors_and_error_pages_carry_them(path, client):
    assert_secured(client.get(path))


def test_api_answers_and_api_errors_carry_them(alice, fleet):
    assert_secured(alice.get("/api/v1/me"))
    assert_secured(alice.get("/api/v1/sandboxes/999999"))
    assert_secured(APIClient().get("/api/v1/me"))


def test_the_api_docs_keep_the_strict_policy(client):
    page = client.get("/api/docs/")
    script = client.get("/api/docs/", {"script": ""})

    assert_secured(page)
    html = page.content.decode()
    assert "<style" not in html
    assert re.findall(r"<script(?![^>]*\bsrc=)", html) == []  # every script is a file
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")


def test_the_browsable_api_relaxes_style_alone(researcher_client, fleet):
    answer = researcher_client.get("/api/v1/me", HTTP_ACCEPT="text/html")

    assert answer.status_code == 200 and answer["Content-Type"].startswith("text/html")
    directives = policy(answer)
    assert directives["style-src"] == ["'self'", "'unsafe-inline'"]
    assert directives["script-src"] == ["'self'"]
    assert directives["frame-ancestors"] == ["'none'"]


def test_htmx_is_configured_for_the_policy(researcher_client, fleet):
    page = researcher_client.get("/").content.decode()

    config = re.search(r"<meta name=\"htmx-config\" content='([^']*)'>", page)
    assert config, "base.html configures htmx"
    assert '"includeIndicatorStyles":false' in config.group(1)
    assert '"allowEval":false' in config.group(1)
    assert '"allowScriptTags":false' in config.group(1)
    assert ".htmx-indicator" in (Path(settings.BASE_DIR) / "static" / "css" / "portal.css").read_text()


# What the policy refuses, as it would appear in a template: inline script (a script element
# without src, other than JSON data), inline style, event handler attributes, javascript: URLs,
# and htmx attributes whose values are evaluated code (hx-on, hx-vars, js: values, trigger filters).
REFUSED = {
    "inline script": re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")"),
    "style element": re.compile(r"<style\b"),
    "style attribute": re.compile(r"\sstyle=[\"']"),
    "event handler attribute": re.compile(r"\son[a-z]+=[\"']"),
    "javascript: URL": re.compile(r"javascript:", re.IGNORECASE),
    "hx-on": re.compile(r"\bhx-on\b|\bhx-on:|\bhx-on::"),
    "hx-vars": re.compile(r"\bhx-vars="),
    "js: value": re.compile(r"hx-(?:vals|headers)=[\"']js:"),
    # an event name followed by [condition]: hx-trigger="change[target.name!='x']" (not a
    # selector such as from:input[name=q])
    "trigger filter": re.compile(r"hx-trigger=\"(?:[^\"]*,)?\s*[\w.-]+\["),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_no_template_holds_what_the_policy_refuses(name):
    pattern = REFUSED[name]
    found = [
        f"{path.relative_to(TEMPLATES)}:{number}"
        for path in sorted(TEMPLATES.rglob("*.html"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line) and not line.lstrip().startswith("{#")
    ]
    assert found == []


def test_no_script_evaluates_code():
    found = [
        path.name
        for path in sorted(STATIC_JS.glob("*.js"))
        if re.search(r"\beval\(|new Function\(|setTimeout\([\"']", path.read_text())
    ]
    assert found == []
