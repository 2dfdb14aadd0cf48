"""GET /api/v1/catalog/models (filters, pagination), one model, and its sizing."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from portal.catalog.models import CatalogModel
from tests.factories import GpuTypeFactory, make_node

pytestmark = pytest.mark.django_db
URL = "/api/v1/catalog/models"


def slugs(body) -> list[str]:
    return [entry["slug"] for entry in body["results"]]


def test_the_sizing_endpoint_answers_exactly_gb_numbers_and_priced_fits(api, catalog, big_fleet):
    response = api.get(f"{URL}/llama-3.1-8b-instruct/sizing?dtype=bf16&context=8192&concurrency=8")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"weights_gb", "kv_cache_gb", "total_gb", "fits", "serve_command"}
    assert body["serve_command"] == (  # for the cheapest fit, as the model's page shows it
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 1 --max-model-len 8192 "
        "--dtype bfloat16 --gpu-memory-utilization 0.90 --port 8000"
    )
    assert (body["weights_gb"], body["kv_cache_gb"], body["total_gb"]) == (16.06, 8.59, 27.76)
    assert body["fits"][0] == {
        "gpu_type": "h100-80gb",
        "mig_profile": "3g.40gb",
        "gpus": 1,
        "price_per_hour": "2.95",
    }
    assert body["fits"][2] == {
        "gpu_type": "h100-80gb",
        "mig_profile": None,
        "gpus": 1,
        "price_per_hour": "6.88",
    }
    prices = [float(fit["price_per_hour"]) for fit in body["fits"]]
    assert prices == sorted(prices)


def test_the_sizing_endpoint_shows_tensor_parallel_fits_for_a_big_model(api, catalog, big_fleet):
    body = api.get(f"{URL}/llama-3.1-70b-instruct/sizing").json()
    assert [(f["gpu_type"], f["gpus"], f["price_per_hour"]) for f in body["fits"]] == [
        ("h200-141gb", 2, "15.82"),
        ("h100-80gb", 4, "27.52"),
    ]
    assert "--tensor-parallel-size 2 " in body["serve_command"]


@pytest.mark.parametrize(
    ("query", "fields"),
    [
        ("dtype=fp4", ["dtype"]),
        ("context=0", ["context"]),
        ("context=131073", ["context"]),
        ("concurrency=1025", ["concurrency"]),
        ("context=lots", ["context"]),
        ("dtype=fp4&concurrency=0", ["dtype", "concurrency"]),
    ],
)
def test_bad_sizing_parameters_are_a_400_in_the_error_shape(api, catalog, fleet, query, fields):
    response = api.get(f"{URL}/llama-3.1-8b-instruct/sizing?{query}")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert sorted(error["fields"]) == sorted(fields)
    assert error["message"]


def test_an_unknown_model_is_a_404_for_the_model_and_its_sizing(api, catalog):
    for path in (f"{URL}/gpt-5", f"{URL}/gpt-5/sizing"):
        response = api.get(path)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"


def test_the_catalog_is_open_to_anyone(catalog):
    response = APIClient().get(URL)
    assert response.status_code == 200
    assert response.json()["count"] >= 10


def test_the_list_is_paginated_by_name_with_runtime_and_default_sizing(api, catalog, fleet):
    body = api.get(f"{URL}?page_size=3").json()
    assert body["count"] == 11
    assert slugs(body) == ["bge-large-en-v1.5", "gemma-2-9b-it", "llama-3.1-70b-instruct"]
    assert body["next"]
    page = api.get(URL).json()["results"]
    llama = next(entry for entry in page if entry["slug"] == "llama-3.1-8b-instruct")
    assert llama["runtime"] == {
        "slug": "vllm",
        "name": "vLLM",
        "image": "vllm/vllm-openai:v0.8.5",
        "port": 8000,
        "api": "openai",
    }
    assert llama["parameters"] == "8.0300"
    assert llama["default_sizing"] == {
        "dtype": "bf16",
        "context": 8192,
        "concurrency": 8,
        "weights_gb": 16.06,
        "kv_cache_gb": 8.59,
        "total_gb": 27.76,
        "cheapest": {"gpu_type": "h100-80gb", "mig_profile": "3g.40gb", "gpus": 1, "price_per_hour": "2.95"},
    }


def test_the_list_filters_by_runtime_task_and_text(api, catalog):
    assert slugs(api.get(f"{URL}?runtime=triton").json()) == ["resnet-50"]
    assert slugs(api.get(f"{URL}?runtime=tgi").json()) == ["mistral-7b-instruct-v0.3"]
    assert slugs(api.get(f"{URL}?task=embedding").json()) == ["bge-large-en-v1.5"]
    assert slugs(api.get(f"{URL}?q=qwen").json()) == [
        "qwen2.5-0.5b-instruct",
        "qwen2.5-32b-instruct",
        "qwen2.5-7b-instruct",
    ]
    assert slugs(api.get(f"{URL}?q=mixture-of-experts").json()) == ["mixtral-8x7b-instruct-v0.1"]


def test_an_unknown_filter_value_is_a_400(api, catalog):
    response = api.get(f"{URL}?runtime=ollama")
    assert response.status_code == 400
    assert "runtime" in response.json()["error"]["fields"]


def test_fits_true_keeps_only_models_the_free_capacity_holds_now(
    api, catalog, big_fleet, hold_whole_gpus, h100, h200
):
    hold_whole_gpus(h200)
    hold_whole_gpus(h100, count=5)
    fitting = slugs(api.get(f"{URL}?fits=true&page_size=50").json())
    assert "llama-3.1-70b-instruct" not in fitting
    assert "llama-3.1-8b-instruct" in fitting
    assert len(slugs(api.get(f"{URL}?page_size=50").json())) == 11


def _list_queries(api) -> int:
    api.get(URL)  # the token's first use of the run records itself: not counted
    with CaptureQueriesContext(connection) as queries:
        assert api.get(f"{URL}?fits=true&page_size=50").status_code == 200
    return len(queries)


def test_the_list_costs_the_same_queries_for_more_models_and_gpu_types(api, catalog, big_fleet):
    before = _list_queries(api)
    llama = CatalogModel.objects.get(slug="llama-3.1-8b-instruct")
    for n in range(5):
        llama.pk, llama.slug = None, f"llama-copy-{n}"
        llama.save()
    a100 = GpuTypeFactory(slug="a100-80gb", name="NVIDIA A100 80GB", memory_gb=80)
    make_node(name="gpu-a100-a", gpu_type=a100, gpus=8, mig=True)
    assert _list_queries(api) == before <= 20


def test_one_model_shows_its_facts(api, catalog, fleet):
    body = api.get(f"{URL}/gemma-2-9b-it").json()
    assert (body["head_dim"], body["max_context"], body["dtypes"]) == (256, 8192, ["bf16", "fp8"])
    assert body["default_sizing"]["context"] == 8192


def test_with_nothing_to_serve_it_on_there_is_no_command(api, catalog):
    body = api.get(f"{URL}/llama-3.1-8b-instruct/sizing").json()
    assert (body["fits"], body["serve_command"]) == ([], "")
