"""The demo catalog: idempotent, valid against the model's own rules, with the published figures."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from portal.catalog.demo import DEMO_MODELS, catalog_seed
from portal.catalog.models import CatalogModel, Runtime

pytestmark = pytest.mark.django_db


def test_catalog_seed_creates_three_runtimes_and_every_demo_model_once():
    assert catalog_seed() == 3 + len(DEMO_MODELS)
    assert catalog_seed() == 0
    assert Runtime.objects.count() == 3
    assert CatalogModel.objects.count() == len(DEMO_MODELS) >= 10


def test_catalog_seed_leaves_an_admins_edits_alone(catalog):
    CatalogModel.objects.filter(slug="llama-3.1-8b-instruct").update(description="Our house model")
    Runtime.objects.filter(slug="vllm").update(image="registry.internal/vllm:pinned")
    catalog_seed()
    assert CatalogModel.objects.get(slug="llama-3.1-8b-instruct").description == "Our house model"
    assert Runtime.objects.get(slug="vllm").image == "registry.internal/vllm:pinned"


def test_every_demo_model_passes_the_admin_validation(catalog):
    for entry in CatalogModel.objects.select_related("runtime"):
        entry.full_clean()


def test_the_demo_covers_runtimes_tasks_and_a_model_for_the_smallest_slice(catalog):
    entries = {e.slug: e for e in CatalogModel.objects.select_related("runtime")}
    assert {e.runtime.slug for e in entries.values()} == {"vllm", "tgi", "triton"}
    assert {e.task for e in entries.values()} == {"text-generation", "embedding", "image-classification"}
    llama = entries["llama-3.1-8b-instruct"]
    assert (llama.parameters, llama.layers, llama.kv_heads, llama.head_dim, llama.max_context) == (
        Decimal("8.03"),
        32,
        8,
        128,
        131072,
    )
    assert entries["resnet-50"].runtime.slug == "triton"


def test_a_quantization_is_served_from_its_own_checkpoint(catalog):
    llama = CatalogModel.objects.select_related("runtime").get(slug="llama-3.1-8b-instruct")
    assert llama.serving_choice(precision="awq-int4", tensor_parallel=1, context=8192).source == (
        "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"
    )
    assert llama.serving_choice(precision="fp8", tensor_parallel=1, context=8192).source == (
        "meta-llama/Llama-3.1-8B-Instruct"
    )


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"dtypes": ["bf16", "fp64"]}, "dtypes"),
        ({"dtypes": ["bf16", "fp32"]}, "dtypes"),  # TGI does not serve fp32
        ({"default_dtype": "fp8"}, "default_dtype"),
        ({"kv_heads": 0}, "layers"),
        ({"kv_heads": 5}, "kv_heads"),
        ({"tags": "chat"}, "tags"),
        ({"slug": "Mistral 7B"}, "slug"),
    ],
)
def test_the_admin_refuses_an_entry_sizing_or_its_runtime_could_not_use(catalog, changes, field):
    entry = CatalogModel.objects.select_related("runtime").get(slug="mistral-7b-instruct-v0.3")
    for name, value in changes.items():
        setattr(entry, name, value)
    with pytest.raises(ValidationError) as raised:
        entry.full_clean()
    assert field in raised.value.message_dict
