"""Sizing against the fleet: its GPU types, prices, node sizes and MIG GPUs; input checks; free capacity."""

from __future__ import annotations

from decimal import Decimal

import pytest

from portal.catalog.models import CatalogModel
from portal.catalog.selectors import (
    catalog_entries,
    entries_fitting_free_capacity,
    fleet_offers,
    model_sizing,
)
from portal.core.errors import NotFound, ValidationFailed
from portal.fleet.models import Gpu
from portal.fleet.selectors import max_gpus_per_node
from tests.factories import GpuTypeFactory

pytestmark = pytest.mark.django_db


def rows(sizing):
    return [(f.gpu_type, f.mig_profile, f.gpus, f.price_per_hour) for f in sizing.fits]


def test_fleet_offers_list_types_with_gpus_their_price_node_size_and_mig_profiles(big_fleet):
    GpuTypeFactory(slug="a100-80gb", name="NVIDIA A100 80GB", memory_gb=80)  # no GPUs: not offered
    offers = {offer.gpu_type: offer for offer in fleet_offers()}
    assert set(offers) == {"h100-80gb", "h200-141gb"}
    h100, h200 = offers["h100-80gb"], offers["h200-141gb"]
    assert (h100.price_per_hour, h100.max_gpus_per_node) == (Decimal("6.88"), 8)
    assert [p.name for p in h100.mig_profiles] == [
        "1g.10gb",
        "1g.20gb",
        "2g.20gb",
        "3g.40gb",
        "4g.40gb",
        "7g.80gb",
    ]
    assert h100.mig_profiles[0].share == (1, 7)
    assert (h200.max_gpus_per_node, h200.mig_profiles) == (4, ())


def test_fleet_offers_read_the_whole_gpu_limit_by_the_fleets_own_rule(catalog, big_fleet, h100, h200):
    from tests.factories import make_node

    make_node(name="gpu-h100-c", gpu_type=h100, gpus=3, mig=False)
    offers = {offer.gpu_type: offer.max_gpus_per_node for offer in fleet_offers()}
    assert offers == {
        "h100-80gb": max_gpus_per_node(gpu_type=h100),
        "h200-141gb": max_gpus_per_node(gpu_type=h200),
    }
    assert offers == {"h100-80gb": 8, "h200-141gb": 4}


def test_model_sizing_prices_the_fleets_gpus_and_slices_cheapest_first(catalog, big_fleet):
    sizing = model_sizing(slug="llama-3.1-8b-instruct", dtype="bf16", context=8192, concurrency=8)
    assert sizing.weights_gb == Decimal("16.06")
    assert rows(sizing) == [
        ("h100-80gb", "3g.40gb", 1, Decimal("2.95")),
        ("h100-80gb", "4g.40gb", 1, Decimal("3.93")),
        ("h100-80gb", None, 1, Decimal("6.88")),
        ("h100-80gb", "7g.80gb", 1, Decimal("6.88")),
        ("h200-141gb", None, 1, Decimal("7.91")),
    ]


def test_model_sizing_uses_the_entrys_defaults_for_what_is_left_out(catalog, big_fleet):
    # bf16, 8192 tokens, 8 sequences: the Llama 3.1 8B figures.
    sizing = model_sizing(slug="llama-3.1-8b-instruct")
    assert (sizing.kv_cache_gb, sizing.total_gb) == (Decimal("8.59"), Decimal("27.76"))


def test_slices_are_priced_by_the_configured_share_rule(settings, catalog, fleet):
    settings.PORTAL_MIG_SHARE_RULE = "memory"  # 1g.10gb = 1/8 of $6.88
    sizing = model_sizing(slug="qwen2.5-0.5b-instruct", dtype="bf16", context=8192, concurrency=8)
    assert rows(sizing)[0] == ("h100-80gb", "1g.10gb", 1, Decimal("0.86"))


def test_a_fleet_without_mig_gpus_offers_no_slices(catalog, h200):
    from tests.factories import make_node

    make_node(name="gpu-h200-a", gpu_type=h200, gpus=4, mig=False)
    sizing = model_sizing(slug="qwen2.5-0.5b-instruct")
    assert rows(sizing) == [("h200-141gb", None, 1, Decimal("7.91"))]


def test_tensor_parallel_is_capped_by_the_biggest_node_of_a_type(catalog, h100):
    from tests.factories import make_node

    make_node(name="small-a", gpu_type=h100, gpus=2, mig=False)
    make_node(name="small-b", gpu_type=h100, gpus=2, mig=False)
    # Llama 3.1 70B needs 4 H100s in one node; two nodes of two do not hold it.
    assert model_sizing(slug="llama-3.1-70b-instruct").fits == ()


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"dtype": "int8"}, "dtype", "comes in bf16, fp16, fp8, awq-int4, gptq-int4, not 'int8'"),
        ({"context": 131073}, "context", "At most 131,072 tokens"),
        ({"context": 0}, "context", "At least 1 token"),
        ({"concurrency": 0}, "concurrency", "From 1 to 1024"),
        ({"concurrency": 1025}, "concurrency", "From 1 to 1024"),
    ],
)
def test_model_sizing_refuses_bad_input_naming_the_field(catalog, fleet, params, field, message):
    with pytest.raises(ValidationFailed) as raised:
        model_sizing(slug="llama-3.1-8b-instruct", **params)
    assert list(raised.value.fields) == [field]
    assert message in raised.value.fields[field][0]


def test_model_sizing_names_every_bad_field_at_once(catalog, fleet):
    with pytest.raises(ValidationFailed) as raised:
        model_sizing(slug="gemma-2-9b-it", dtype="fp16", context=8193, concurrency=0)
    assert set(raised.value.fields) == {"dtype", "context", "concurrency"}


def test_an_unknown_or_disabled_model_is_not_found(catalog, fleet):
    CatalogModel.objects.filter(slug="gemma-2-9b-it").update(enabled=False)
    for slug in ("no-such-model", "gemma-2-9b-it"):
        with pytest.raises(NotFound):
            model_sizing(slug=slug)


def test_free_capacity_keeps_models_whose_fit_is_free_now(catalog, big_fleet, hold_whole_gpus, h100, h200):
    slugs = set(entries_fitting_free_capacity(catalog_entries()).values_list("slug", flat=True))
    assert "llama-3.1-70b-instruct" in slugs
    # All 4 H200s and 5 of 8 whole H100s taken: 70B needs 2 H200s or 4 H100s; only 3 H100s are free.
    hold_whole_gpus(h200)
    hold_whole_gpus(h100, count=5)
    slugs = set(entries_fitting_free_capacity(catalog_entries()).values_list("slug", flat=True))
    assert "llama-3.1-70b-instruct" not in slugs
    assert {"llama-3.1-8b-instruct", "qwen2.5-0.5b-instruct", "resnet-50"} <= slugs


def test_free_capacity_counts_slices_a_mig_gpu_could_still_take(catalog, fleet, hold_whole_gpus, h100):
    hold_whole_gpus(h100)
    slugs = set(entries_fitting_free_capacity(catalog_entries()).values_list("slug", flat=True))
    assert "qwen2.5-0.5b-instruct" in slugs  # a 1g.10gb slice of a MIG H100
    # The MIG GPUs back in whole mode and held too: nothing is free.
    Gpu.objects.filter(mig_enabled=True).update(mig_enabled=False)
    hold_whole_gpus(h100)
    assert not entries_fitting_free_capacity(catalog_entries()).exists()
