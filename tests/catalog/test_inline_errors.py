"""Bad sizing inputs on a model's page: the htmx swap shows the field's error where the figures
were (never the figures of the last good input), and the browser lets the bad value through to
the server instead of silently keeping the old figures."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}
MODEL = "/catalog/llama-3.1-8b-instruct/"


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ("200000", "At most 131,072 tokens"),
        ("0", "Context (tokens):"),
    ],
)
def test_a_bad_context_swaps_in_its_error_not_stale_figures(web, catalog, big_fleet, context, message):
    response = web.get(f"{MODEL}?dtype=bf16&context={context}&concurrency=8", **HX)

    assert response.status_code == 200  # htmx swaps only 2xx answers
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="sizing"')  # the fragment alone, which replaces the figures
    assert 'role="alert"' in html
    assert message in html
    assert 'id="sizing-total"' not in html
    assert 'id="sizing-fits"' not in html


def test_a_good_context_after_a_bad_one_shows_figures_again(web, catalog, big_fleet):
    web.get(f"{MODEL}?dtype=bf16&context=0&concurrency=8", **HX)
    response = web.get(f"{MODEL}?dtype=bf16&context=8192&concurrency=8", **HX)

    html = response.content.decode()
    assert 'id="sizing-total"' in html
    assert "estimate-errors" not in html


def test_the_sizing_form_lets_the_server_judge_out_of_range_values(web, catalog, big_fleet):
    """The inputs carry min/max hints; htmx would refuse to send a value outside them (and the
    figures would stay as they were) unless the form opts out of the browser's validation."""
    html = web.get(MODEL).content.decode()

    form = re.search(r'<form class="filters"[^>]*hx-target="#sizing"[^>]*>', html)
    assert form is not None
    assert "novalidate" in form.group(0)
    assert 'max="131072"' in html  # the hint is still there for the browser's spinner


def test_the_error_box_names_the_fields_to_mark_invalid(web, catalog, big_fleet):
    bad = web.get(f"{MODEL}?dtype=bf16&context=200000&concurrency=8", **HX).content.decode()
    assert 'data-marks-form="sizing-form"' in bad and 'data-invalid-fields="context "' in bad
    assert 'id="sizing-errors"' in bad
    good = web.get(f"{MODEL}?dtype=bf16&context=8192&concurrency=8", **HX).content.decode()
    assert 'data-invalid-fields=""' in good
    page = web.get(f"{MODEL}?dtype=bf16&context=200000&concurrency=8").content.decode()
    context_input = re.search(r'<input[^>]*name="context"[^>]*>', page).group(0)
    assert 'aria-invalid="true"' in context_input  # a full page marks it as it renders
