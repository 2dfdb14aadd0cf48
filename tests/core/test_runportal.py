"""`runportal`, the embedded portal's server, as a developer uses it."""

from __future__ import annotations

import contextlib

import pytest
from django.core.management import call_command
from django.test import RequestFactory
from whitenoise.middleware import WhiteNoiseMiddleware

from portal.core import embedded
from workers.management.commands import runportal


class _Beat:
    def __init__(self, *args, **kwargs):
        pass

    def start(self):
        pass

    def stop(self):
        pass


def _body(middleware, path):
    response = middleware(RequestFactory().get(path))
    assert response.status_code == 200
    body = b"".join(response.streaming_content)
    # a browser reads as many bytes as the header says
    return body[: int(response.headers["Content-Length"])]


@pytest.fixture
def served(monkeypatch, settings, tmp_path):
    """Run `runportal` with its worker, beat and web server stood in for; yield what the web
    server would have been built with."""
    static = tmp_path / "static"
    static.mkdir()
    (static / "site.css").write_text("a { color: red; }\n")
    settings.STATICFILES_DIRS = [static]
    settings.VAR_DIR = tmp_path / "var"
    settings.STATIC_ROOT = tmp_path / "staticfiles"
    monkeypatch.setattr(embedded, "_serving_on_loopback", False)
    monkeypatch.setattr(runportal, "EmbeddedService", _Beat)
    monkeypatch.setattr(runportal, "start_worker", lambda *a, **k: contextlib.nullcontext())
    built = {}

    def runserver(name, addrport, **options):
        built["middleware"] = WhiteNoiseMiddleware(lambda request: None)

    monkeypatch.setattr(runportal, "call_command", runserver)
    call_command("runportal", "127.0.0.1:8765")
    return static, built["middleware"]


def test_a_static_file_edited_while_the_portal_runs_is_served_whole(served):
    static, middleware = served
    assert _body(middleware, "/static/site.css") == b"a { color: red; }\n"

    longer = "a { color: red; }\n.required-mark { color: crimson; }\n"
    (static / "site.css").write_text(longer)

    assert _body(middleware, "/static/site.css") == longer.encode()
