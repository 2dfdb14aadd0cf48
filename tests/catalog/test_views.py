"""The catalog page and a model's page: filters, the sizing table, and its htmx fragment."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.catalog.models import CatalogModel
from tests.factories import GpuTypeFactory, make_node

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def test_the_catalog_page_lists_models_with_their_cheapest_fit(web, catalog, big_fleet):
    response = web.get("/catalog/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html and 'id="catalog-list"' in html
    assert response.context["rows"][0].entry.slug == "bge-large-en-v1.5"
    row = next(r for r in response.context["rows"] if r.entry.slug == "llama-3.1-8b-instruct")
    assert (row.sizing.fits[0].mig_profile, str(row.sizing.fits[0].price_per_hour)) == ("3g.40gb", "2.95")
    assert "3g.40gb slice of h100-80gb" in html


def test_the_catalog_filters_answer_htmx_with_the_list_alone(web, catalog, fleet):
    response = web.get("/catalog/?runtime=triton", **HX)
    html = response.content.decode()
    assert "<html" not in html
    assert html.lstrip().startswith('<section id="catalog-list"')
    assert [row.entry.slug for row in response.context["rows"]] == ["resnet-50"]


def test_the_catalog_filters_by_task_text_and_free_capacity(
    web, catalog, big_fleet, hold_whole_gpus, h100, h200
):
    def listed(query: str) -> list[str]:
        return [row.entry.slug for row in web.get(f"/catalog/?{query}").context["rows"]]

    assert listed("task=embedding") == ["bge-large-en-v1.5"]
    assert listed("q=gemma") == ["gemma-2-9b-it"]
    hold_whole_gpus(h200)
    hold_whole_gpus(h100, count=5)
    fitting = listed("fits=true")
    assert "llama-3.1-70b-instruct" not in fitting
    assert "qwen2.5-0.5b-instruct" in fitting


def test_the_catalog_page_needs_a_sign_in(client, catalog):
    response = client.get("/catalog/")
    assert response.status_code == 302
    assert "/login" in response["Location"] or "next=" in response["Location"]


def test_a_model_page_shows_facts_and_the_default_sizing(web, catalog, big_fleet):
    response = web.get("/catalog/llama-3.1-8b-instruct/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "meta-llama/Llama-3.1-8B-Instruct" in html
    assert "<dd>8.03 billion</dd>" in html
    assert 'hx-trigger="change, keyup delay:400ms"' in html
    assert '<dd id="sizing-total">27.76 GB</dd>' in html
    assert "Fits on one GPU or MIG slice: from $2.95 per hour." in html
    assert "vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 1 --max-model-len 8192" in html


def test_changing_the_inputs_answers_htmx_with_the_sizing_fragment(web, catalog, big_fleet):
    response = web.get("/catalog/llama-3.1-8b-instruct/?dtype=fp8&context=8192&concurrency=8", **HX)
    html = response.content.decode()
    assert "<html" not in html and "Facts" not in html
    assert html.lstrip().startswith('<div id="sizing"')
    assert response.context["sizing"].weights_gb == Decimal("8.03")
    assert "<dd>8.03 GB</dd>" in html
    assert "--quantization fp8 --kv-cache-dtype fp8" in html


def test_a_big_model_page_says_how_many_gpus_it_needs_at_least(web, catalog, big_fleet):
    html = web.get(
        "/catalog/llama-3.1-70b-instruct/?dtype=bf16&context=8192&concurrency=8", **HX
    ).content.decode()
    assert "Needs at least 2 \u00d7 141 GB GPUs (89.84 GB on each)." in html
    fits = html[html.index('id="sizing-fits"') :]
    assert fits.index("h200-141gb") < fits.index("h100-80gb")
    assert "--tensor-parallel-size 2" in html


def test_a_model_that_fits_nothing_says_so(web, catalog, fleet):
    html = web.get(
        "/catalog/llama-3.1-70b-instruct/?dtype=bf16&context=131072&concurrency=64", **HX
    ).content.decode()
    assert "Does not fit any GPU in the fleet" in html
    assert 'id="sizing-fits"' not in html


def test_bad_inputs_show_the_rules_instead_of_a_table(web, catalog, fleet):
    response = web.get("/catalog/gemma-2-9b-it/?dtype=bf16&context=9000&concurrency=0", **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "At most 8,192 tokens for Gemma 2 9B IT." in html
    assert "From 1 to 1024 concurrent sequences." in html
    assert response.context["sizing"] is None


def test_an_unknown_model_page_is_a_404(web, catalog):
    assert web.get("/catalog/gpt-5/").status_code == 404


def _queries(web, path: str, **headers) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert web.get(path, **headers).status_code == 200
    return len(queries)


def test_pages_cost_the_same_queries_for_more_models_and_gpu_types(
    web, catalog, big_fleet, django_assert_max_num_queries
):
    pages = ["/catalog/?fits=true", "/catalog/llama-3.1-8b-instruct/", "/catalog/resnet-50/?context=1"]
    before = [_queries(web, path) for path in pages]
    llama = CatalogModel.objects.get(slug="llama-3.1-8b-instruct")
    for n in range(5):
        llama.pk, llama.slug = None, f"llama-copy-{n}"
        llama.save()
    a100 = GpuTypeFactory(slug="a100-80gb", name="NVIDIA A100 80GB", memory_gb=80)
    make_node(name="gpu-a100-a", gpu_type=a100, gpus=8, mig=True)
    assert [_queries(web, path) for path in pages] == before
    for path in pages:
        with django_assert_max_num_queries(20):
            web.get(path)
        with django_assert_max_num_queries(18):
            web.get(path, **HX)


def test_token_counts_read_with_thousands_separators(web, catalog, big_fleet):
    listed = web.get("/catalog/").content.decode()
    assert ">131,072<" in listed and ">131072<" not in listed
    sizing = {"dtype": "bf16", "context": "32768", "concurrency": "1"}
    page = web.get("/catalog/llama-3.1-8b-instruct/", sizing).content.decode()
    assert "131,072 tokens" in page
    assert "32,768 tokens \u00d7" in page


def test_the_sizing_fields_say_they_are_required(web, catalog, big_fleet):
    page = web.get("/catalog/llama-3.1-8b-instruct/").content.decode()
    context_label = page.split('for="id_context"')[1].split("</label>")[0]
    assert '<span class="required-mark">(required)</span>' in context_label
