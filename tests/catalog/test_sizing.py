"""Sizing is exact arithmetic over published architecture figures (hand-computed below)."""

from __future__ import annotations

from decimal import Decimal

from portal.catalog.sizing import (
    GpuOffer,
    MigOffer,
    ModelShape,
    budget_bytes,
    kv_bytes_per_token,
    per_gpu_bytes,
    size_model,
)

# Architecture figures from each model's config.json (see portal/catalog/demo.py).
LLAMA_8B = ModelShape(Decimal("8.03"), layers=32, attention_heads=32, kv_heads=8, head_dim=128)
LLAMA_70B = ModelShape(Decimal("70.55"), layers=80, attention_heads=64, kv_heads=8, head_dim=128)
QWEN_05B = ModelShape(Decimal("0.494"), layers=24, attention_heads=14, kv_heads=2, head_dim=64)
QWEN_32B = ModelShape(Decimal("32.76"), layers=64, attention_heads=40, kv_heads=8, head_dim=128)
RESNET_50 = ModelShape(Decimal("0.0256"), generative=False, max_tensor_parallel=1)

H100_PROFILES = tuple(
    MigOffer(name, memory, (slices, 7))
    for name, memory, slices in (
        ("1g.10gb", 10, 1),
        ("1g.20gb", 20, 1),
        ("2g.20gb", 20, 2),
        ("3g.40gb", 40, 3),
        ("4g.40gb", 40, 4),
        ("7g.80gb", 80, 7),
    )
)
H100 = GpuOffer("h100-80gb", 80, Decimal("6.88"), max_gpus_per_node=8, mig_profiles=H100_PROFILES)
H200 = GpuOffer("h200-141gb", 141, Decimal("7.91"), max_gpus_per_node=4)


def rows(sizing):
    return [(f.gpu_type, f.mig_profile, f.gpus, f.price_per_hour) for f in sizing.fits]


def test_llama_8b_bf16_at_8192_tokens_by_8_sequences_matches_the_hand_figures():
    # weights 8.03e9 x 2 = 16.06 GB; KV per token 2 x 32 x 8 x 128 x 2 = 131072 B;
    # KV 131072 x 8192 x 8 = 8,589,934,592 B; overhead 1.5 + 1.606; total 27,755,934,592 B.
    assert kv_bytes_per_token(LLAMA_8B, "bf16") == 131072
    sizing = size_model(LLAMA_8B, precision="bf16", context=8192, concurrency=8, offers=[H100, H200])
    assert (sizing.weights_gb, sizing.kv_cache_gb, sizing.total_gb) == (
        Decimal("16.06"),
        Decimal("8.59"),
        Decimal("27.76"),
    )


def test_llama_8b_fits_a_3g_slice_first_and_never_a_2g_slice():
    # 27.76 GB needs more than 2g.20gb's 18 GB budget; 3g.40gb (36 GB) holds it at 3/7 of $6.88.
    sizing = size_model(LLAMA_8B, precision="bf16", context=8192, concurrency=8, offers=[H100, H200])
    assert rows(sizing) == [
        ("h100-80gb", "3g.40gb", 1, Decimal("2.95")),
        ("h100-80gb", "4g.40gb", 1, Decimal("3.93")),
        ("h100-80gb", None, 1, Decimal("6.88")),
        ("h100-80gb", "7g.80gb", 1, Decimal("6.88")),
        ("h200-141gb", None, 1, Decimal("7.91")),
    ]


def test_llama_70b_bf16_needs_two_h200s_or_four_h100s():
    # weights 141.10 GB; KV per token 2 x 80 x 8 x 128 x 2 = 327680 B -> x 65536 = 21.47 GB.
    # tp=2 holds 70.55 + 10.74 + 1.5 + 7.055 = 89.84 GB per GPU: over an H100's 72, under an H200's
    # 126.9. tp=4 holds 45.67 GB per GPU: fits an H100.
    sizing = size_model(LLAMA_70B, precision="bf16", context=8192, concurrency=8, offers=[H100, H200])
    assert (sizing.weights_gb, sizing.kv_cache_gb, sizing.total_gb) == (
        Decimal("141.10"),
        Decimal("21.47"),
        Decimal("178.18"),
    )
    assert rows(sizing) == [
        ("h200-141gb", None, 2, Decimal("15.82")),
        ("h100-80gb", None, 4, Decimal("27.52")),
    ]
    assert [f.needed_per_gpu_gb for f in sizing.fits] == [Decimal("89.84"), Decimal("45.67")]
    assert not sizing.fits_one_gpu
    assert (sizing.fewest_gpus.gpus, sizing.fewest_gpus.memory_gb) == (2, 141)


def test_llama_70b_needs_more_than_one_80gb_gpu_even_for_one_short_sequence():
    sizing = size_model(LLAMA_70B, precision="bf16", context=8192, concurrency=1, offers=[H100])
    assert [f.gpus for f in sizing.fits] == [4]


def test_the_small_model_fits_the_smallest_mig_slice_at_a_seventh_of_the_price():
    # weights 0.494e9 x 2 = 0.99 GB; KV per token 2 x 24 x 2 x 64 x 2 = 12288 B -> x 65536 = 0.81 GB;
    # total 0.988 + 0.805 + 1.5 + 0.0988 = 3.39 GB, under 1g.10gb's 9 GB budget.
    sizing = size_model(QWEN_05B, precision="bf16", context=8192, concurrency=8, offers=[H100])
    assert (sizing.weights_gb, sizing.kv_cache_gb, sizing.total_gb) == (
        Decimal("0.99"),
        Decimal("0.81"),
        Decimal("3.39"),
    )
    assert rows(sizing)[0] == ("h100-80gb", "1g.10gb", 1, Decimal("0.98"))


def test_one_h200_is_listed_before_two_cheaper_h100s_when_it_costs_less_in_all():
    # Qwen2.5 32B: 90.75 GB on one GPU; two H100s ($13.76) cost more than one H200 ($7.91).
    sizing = size_model(QWEN_32B, precision="bf16", context=8192, concurrency=8, offers=[H100, H200])
    assert sizing.total_gb == Decimal("90.75")
    assert rows(sizing) == [
        ("h200-141gb", None, 1, Decimal("7.91")),
        ("h100-80gb", None, 2, Decimal("13.76")),
    ]


def test_fp8_halves_the_weights_and_the_kv_cache():
    sizing = size_model(LLAMA_8B, precision="fp8", context=8192, concurrency=8, offers=[])
    assert (sizing.weights_gb, sizing.kv_cache_gb) == (Decimal("8.03"), Decimal("4.29"))


def test_int4_quarters_the_weights_but_keeps_a_16_bit_kv_cache():
    sizing = size_model(LLAMA_8B, precision="awq-int4", context=8192, concurrency=8, offers=[])
    assert (sizing.weights_gb, sizing.kv_cache_gb) == (Decimal("4.02"), Decimal("8.59"))


def test_a_non_generative_model_needs_weights_and_overhead_only():
    # ResNet-50 fp16: 0.0256e9 x 2 = 0.0512 GB + 1.5 + 0.00512 = 1.56 GB; no KV cache.
    sizing = size_model(RESNET_50, precision="fp16", context=100_000, concurrency=1024, offers=[H100])
    assert (sizing.weights_gb, sizing.kv_cache_gb, sizing.total_gb) == (
        Decimal("0.05"),
        Decimal("0"),
        Decimal("1.56"),
    )
    assert rows(sizing)[0] == ("h100-80gb", "1g.10gb", 1, Decimal("0.98"))


def test_a_gpu_offers_ninety_percent_of_its_nominal_memory():
    assert budget_bytes(80) == Decimal("72e9")
    assert budget_bytes(10) == Decimal("9e9")


def test_tensor_parallel_stops_at_the_gpus_one_node_holds():
    two_per_node = GpuOffer("h100-80gb", 80, Decimal("6.88"), max_gpus_per_node=2)
    sizing = size_model(LLAMA_70B, precision="bf16", context=8192, concurrency=8, offers=[two_per_node])
    assert sizing.fits == ()


def test_only_the_smallest_tensor_parallel_size_per_gpu_type_is_listed():
    sizing = size_model(LLAMA_70B, precision="bf16", context=8192, concurrency=8, offers=[H100])
    whole = [f for f in sizing.fits if f.mig_profile is None]
    assert [f.gpus for f in whole] == [4]


def test_mig_slices_are_offered_only_to_models_that_fit_one_gpu():
    sizing = size_model(LLAMA_70B, precision="bf16", context=8192, concurrency=8, offers=[H100])
    assert all(f.mig_profile is None for f in sizing.fits)


def test_a_type_with_no_whole_gpus_offers_only_its_slices():
    mig_only = GpuOffer("h100-80gb", 80, Decimal("6.88"), max_gpus_per_node=0, mig_profiles=H100_PROFILES)
    sizing = size_model(LLAMA_8B, precision="bf16", context=8192, concurrency=8, offers=[mig_only])
    assert {f.mig_profile for f in sizing.fits} == {"3g.40gb", "4g.40gb", "7g.80gb"}


def test_tensor_parallel_sizes_must_divide_the_attention_heads():
    assert ModelShape(Decimal("7.62"), 28, 28, 4, 128).tensor_parallel_sizes() == (1, 2, 4)
    assert QWEN_05B.tensor_parallel_sizes() == (1, 2)
    assert LLAMA_70B.tensor_parallel_sizes() == (1, 2, 4, 8)
    assert RESNET_50.tensor_parallel_sizes() == (1,)


def test_a_model_too_big_for_the_splits_its_heads_allow_does_not_fit():
    # 300 GB of weights: 75 x 1.1 + 1.5 = 84 GB per GPU at tp=4, 42.75 GB at tp=8. 32 heads split
    # over 8 H100s; 28 heads split over at most 4, so that model fits nowhere.
    splits_8 = ModelShape(Decimal("150"), layers=28, attention_heads=32, kv_heads=4, head_dim=128)
    splits_4 = ModelShape(Decimal("150"), layers=28, attention_heads=28, kv_heads=4, head_dim=128)
    assert [
        f.gpus for f in size_model(splits_8, precision="bf16", context=1, concurrency=1, offers=[H100]).fits
    ] == [8]
    assert size_model(splits_4, precision="bf16", context=1, concurrency=1, offers=[H100]).fits == ()


def test_kv_cache_splits_over_no_more_gpus_than_there_are_kv_heads():
    # 8 GB of KV over 4 GPUs: 2 GB each with 8 KV heads, 4 GB each with 2 (heads are replicated).
    kv = 8_000_000_000
    assert per_gpu_bytes(weights=Decimal(0), kv_cache=kv, tp=4, kv_heads=2) == Decimal("5.5e9")
    assert per_gpu_bytes(weights=Decimal(0), kv_cache=kv, tp=4, kv_heads=8) == Decimal("3.5e9")


def test_a_model_that_fits_nothing_has_no_fits_and_no_fewest():
    sizing = size_model(LLAMA_70B, precision="bf16", context=131072, concurrency=64, offers=[H100, H200])
    assert sizing.fits == ()
    assert sizing.fewest_gpus is None
