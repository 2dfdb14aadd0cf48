"""The CSRF token never travels in a URL (where logs and Referer headers keep it): every htmx GET
of a form that holds the token leaves it out."""

from __future__ import annotations

import re

import pytest

from portal.catalog.demo import catalog_seed

pytestmark = pytest.mark.django_db
TAG = re.compile(r"<(form|fieldset|select|div)\b[^>]*\bhx-get=[^>]*>", re.S)


@pytest.mark.parametrize("path", ["/sandboxes/new/", "/deployments/new/"])
def test_htmx_gets_of_forms_leave_the_csrf_token_out(path, researcher_client, fleet):
    catalog_seed()
    page = researcher_client.get(path).content.decode()
    assert 'name="csrfmiddlewaretoken"' in page
    tags = [m.group(0) for m in TAG.finditer(page)]
    gathering = [
        t for t in tags if t.startswith("<form") or ("hx-include" in t and 'hx-include="this"' not in t)
    ]
    assert gathering, "no htmx GET found on the page"
    for tag in gathering:
        assert 'hx-params="not csrfmiddlewaretoken"' in tag, tag
