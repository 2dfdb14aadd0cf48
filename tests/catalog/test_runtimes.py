"""Each runtime gets the command line that serves the sizing choice, and refuses what it cannot serve."""

from __future__ import annotations

from decimal import Decimal

import pytest

from portal.catalog.runtimes import (
    RUNTIMES,
    ServingChoice,
    UnsupportedChoice,
    container_command,
    container_spec,
)
from portal.catalog.sizing import ModelShape, cache_gb

VLLM, TGI, TRITON = RUNTIMES["vllm"], RUNTIMES["tgi"], RUNTIMES["triton"]


def test_vllm_serves_a_bf16_model_over_two_gpus_with_the_sized_context():
    choice = ServingChoice("meta-llama/Llama-3.1-70B-Instruct", "bf16", tensor_parallel=2, context=8192)
    assert container_command(VLLM, choice) == [
        "vllm",
        "serve",
        "meta-llama/Llama-3.1-70B-Instruct",
        "--tensor-parallel-size",
        "2",
        "--max-model-len",
        "8192",
        "--dtype",
        "bfloat16",
        "--gpu-memory-utilization",
        "0.90",
        "--port",
        "8000",
    ]


def test_vllm_serves_awq_in_fp16_with_the_quantization_flag():
    choice = ServingChoice("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "awq-int4", 1, 4096)
    command = container_command(VLLM, choice)
    assert command[command.index("--dtype") + 1] == "float16"
    assert command[-2:] == ["--quantization", "awq"]


def test_vllm_fp8_quantizes_the_kv_cache_too_and_computes_in_the_models_dtype():
    choice = ServingChoice("meta-llama/Llama-3.1-8B-Instruct", "fp8", 1, 8192, default_dtype="bf16")
    command = container_command(VLLM, choice)
    assert command[command.index("--dtype") + 1] == "bfloat16"
    assert command[-4:] == ["--quantization", "fp8", "--kv-cache-dtype", "fp8"]


def test_tgi_shards_and_limits_tokens_with_a_dtype_when_not_quantized():
    choice = ServingChoice("mistralai/Mistral-7B-Instruct-v0.3", "fp16", tensor_parallel=2, context=32768)
    assert container_command(TGI, choice) == [
        "text-generation-launcher",
        "--model-id",
        "mistralai/Mistral-7B-Instruct-v0.3",
        "--num-shard",
        "2",
        "--max-input-tokens",
        "32767",
        "--max-total-tokens",
        "32768",
        "--port",
        "8080",
        "--dtype",
        "float16",
    ]


def test_tgi_takes_quantize_instead_of_dtype_for_a_gptq_model():
    command = container_command(
        TGI, ServingChoice("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "gptq-int4", 1, 4096)
    )
    assert command[-2:] == ["--quantize", "gptq"]
    assert "--dtype" not in command


def test_triton_serves_a_model_repository_on_its_http_port():
    spec = container_spec(TRITON, ServingChoice("/models/triton/resnet-50", "fp16", 1, 1))
    assert spec.command == [
        "tritonserver",
        "--model-repository=/models/triton/resnet-50",
        "--http-port",
        "8000",
    ]
    assert (spec.image, spec.port, spec.readiness_path) == (
        "nvcr.io/nvidia/tritonserver:24.10-py3",
        8000,
        "/v2/health/ready",
    )


def test_runtime_probes_and_ports_match_each_servers_defaults():
    assert (VLLM.port, VLLM.health_path, VLLM.api) == (8000, "/health", "openai")
    # TGI's own default, 80, needs root or NET_BIND_SERVICE, which a restricted pod does not have
    assert (TGI.port, TGI.health_path) == (8080, "/health")
    assert all(runtime.port >= 1024 for runtime in (VLLM, TGI, TRITON))
    assert (TRITON.health_path, TRITON.readiness_path, TRITON.api) == (
        "/v2/health/live",
        "/v2/health/ready",
        "kserve-v2",
    )


@pytest.mark.parametrize(
    ("runtime", "choice", "message"),
    [
        (TRITON, ServingChoice("/models/x", "fp16", 2, 1), "1 to 1 GPUs"),
        (TGI, ServingChoice("m", "fp32", 1, 1024), "does not serve fp32"),
        (VLLM, ServingChoice("m", "int8", 1, 1024), "does not serve int8"),
        (VLLM, ServingChoice("m", "bf16", 16, 1024), "1 to 8 GPUs"),
    ],
)
def test_a_runtime_refuses_a_choice_it_cannot_serve(runtime, choice, message):
    with pytest.raises(UnsupportedChoice, match=message):
        container_command(runtime, choice)


def test_the_model_cache_holds_the_largest_checkpoint_it_downloads():
    shape = ModelShape(parameters_b=Decimal(70), layers=80, attention_heads=64, kv_heads=8, head_dim=128)
    # 70B in bf16 is 140 GB of weights: 154 GB with 10 % headroom, plus 10 GB of caches
    assert cache_gb(shape, ("bf16",)) == 164
    # served in fp8 from a bf16 checkpoint: the download is still the bf16 one
    assert cache_gb(shape, ("fp8", "bf16")) == 164
    assert cache_gb(shape, ("awq-int4",)) == 49
