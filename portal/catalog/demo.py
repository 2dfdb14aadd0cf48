"""The demo catalog: the three runtimes and real open models with their published figures.

Idempotent: `catalog_seed()` creates what is missing and leaves rows an admin has edited alone.
Architecture figures are those of each model's config.json on the Hugging Face Hub
(`num_hidden_layers`, `num_attention_heads`, `num_key_value_heads`, `head_dim` or
hidden_size / heads, `max_position_embeddings`); parameter counts are the safetensors totals the
Hub shows on the model page, in billions.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import transaction

from portal.catalog.models import CatalogModel, Runtime
from portal.catalog.runtimes import RUNTIMES

_LLAMA_31 = "llama3.1 (Llama 3.1 Community License)"

DEMO_MODELS: tuple[dict[str, Any], ...] = (
    # meta-llama/Llama-3.1-8B-Instruct: hidden 4096 / 32 heads = head_dim 128; 8,030,261,248 params.
    {
        "slug": "llama-3.1-8b-instruct",
        "name": "Llama 3.1 8B Instruct",
        "source": "meta-llama/Llama-3.1-8B-Instruct",
        "gated": True,
        "license": _LLAMA_31,
        "task": "text-generation",
        "parameters": Decimal("8.03"),
        "layers": 32,
        "attention_heads": 32,
        "kv_heads": 8,
        "head_dim": 128,
        "max_context": 131072,
        "dtypes": ["bf16", "fp16", "fp8"],
        "quantizations": ["awq-int4", "gptq-int4"],
        "quantized_sources": {
            "awq-int4": "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4",
            "gptq-int4": "hugging-quants/Meta-Llama-3.1-8B-Instruct-GPTQ-INT4",
        },
        "default_dtype": "bf16",
        "runtime": "vllm",
        "tags": ["chat", "tool-use", "multilingual"],
        "description": "Meta's 8B instruction-tuned Llama 3.1: a strong default chat model, 128K context.",
    },
    # meta-llama/Llama-3.1-70B-Instruct: hidden 8192 / 64 heads = head_dim 128; 70,553,706,496 params.
    {
        "slug": "llama-3.1-70b-instruct",
        "name": "Llama 3.1 70B Instruct",
        "source": "meta-llama/Llama-3.1-70B-Instruct",
        "gated": True,
        "license": _LLAMA_31,
        "task": "text-generation",
        "parameters": Decimal("70.55"),
        "layers": 80,
        "attention_heads": 64,
        "kv_heads": 8,
        "head_dim": 128,
        "max_context": 131072,
        "dtypes": ["bf16", "fp16", "fp8"],
        "quantizations": ["awq-int4", "gptq-int4"],
        "quantized_sources": {
            "awq-int4": "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4",
            "gptq-int4": "hugging-quants/Meta-Llama-3.1-70B-Instruct-GPTQ-INT4",
        },
        "default_dtype": "bf16",
        "runtime": "vllm",
        "tags": ["chat", "tool-use", "multilingual"],
        "description": "Meta's 70B Llama 3.1: needs several GPUs at 16 bits; fp8 or int4 shrink it.",
    },
    # mistralai/Mistral-7B-Instruct-v0.3: hidden 4096 / 32 heads = 128; 32768 positions;
    # 7,248,023,552 params.
    {
        "slug": "mistral-7b-instruct-v0.3",
        "name": "Mistral 7B Instruct v0.3",
        "source": "mistralai/Mistral-7B-Instruct-v0.3",
        "gated": True,
        "license": "apache-2.0",
        "task": "text-generation",
        "parameters": Decimal("7.25"),
        "layers": 32,
        "attention_heads": 32,
        "kv_heads": 8,
        "head_dim": 128,
        "max_context": 32768,
        "dtypes": ["bf16", "fp16"],
        "quantizations": [],
        "default_dtype": "bf16",
        "runtime": "tgi",
        "tags": ["chat", "function-calling"],
        "description": "Mistral AI's 7B instruct model, v0.3 (extended vocabulary, function calling).",
    },
    # mistralai/Mixtral-8x7B-Instruct-v0.1: a mixture of experts; every expert stays resident, so
    # the weights are all 46,702,792,704 params although ~12.9B are active per token.
    {
        "slug": "mixtral-8x7b-instruct-v0.1",
        "name": "Mixtral 8x7B Instruct v0.1",
        "source": "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "gated": True,
        "license": "apache-2.0",
        "task": "text-generation",
        "parameters": Decimal("46.70"),
        "layers": 32,
        "attention_heads": 32,
        "kv_heads": 8,
        "head_dim": 128,
        "max_context": 32768,
        "dtypes": ["bf16", "fp16", "fp8"],
        "quantizations": ["awq-int4"],
        "quantized_sources": {"awq-int4": "TheBloke/Mixtral-8x7B-Instruct-v0.1-AWQ"},
        "default_dtype": "bf16",
        "runtime": "vllm",
        "tags": ["chat", "mixture-of-experts"],
        "description": "Sparse mixture of 8 experts, 2 active per token: 7B-class speed, 47B memory.",
    },
    # Qwen/Qwen2.5-7B-Instruct: hidden 3584 / 28 heads = 128; 4 KV heads; 7,615,616,512 params.
    {
        "slug": "qwen2.5-7b-instruct",
        "name": "Qwen2.5 7B Instruct",
        "source": "Qwen/Qwen2.5-7B-Instruct",
        "license": "apache-2.0",
        "task": "text-generation",
        "parameters": Decimal("7.62"),
        "layers": 28,
        "attention_heads": 28,
        "kv_heads": 4,
        "head_dim": 128,
        "max_context": 32768,
        "dtypes": ["bf16", "fp16", "fp8"],
        "quantizations": ["awq-int4", "gptq-int4"],
        "quantized_sources": {
            "awq-int4": "Qwen/Qwen2.5-7B-Instruct-AWQ",
            "gptq-int4": "Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4",
        },
        "default_dtype": "bf16",
        "runtime": "vllm",
        "tags": ["chat", "code", "multilingual"],
        "description": "Alibaba's Qwen2.5 at 7B: good at code, maths and structured output.",
    },
    # Qwen/Qwen2.5-32B-Instruct: hidden 5120 / 40 heads = 128; 32,763,876,352 params.
    {
        "slug": "qwen2.5-32b-instruct",
        "name": "Qwen2.5 32B Instruct",
        "source": "Qwen/Qwen2.5-32B-Instruct",
        "license": "apache-2.0",
        "task": "text-generation",
        "parameters": Decimal("32.76"),
        "layers": 64,
        "attention_heads": 40,
        "kv_heads": 8,
        "head_dim": 128,
        "max_context": 32768,
        "dtypes": ["bf16", "fp16", "fp8"],
        "quantizations": ["awq-int4", "gptq-int4", "gptq-int8"],
        "quantized_sources": {
            "awq-int4": "Qwen/Qwen2.5-32B-Instruct-AWQ",
            "gptq-int4": "Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4",
            "gptq-int8": "Qwen/Qwen2.5-32B-Instruct-GPTQ-Int8",
        },
        "default_dtype": "bf16",
        "runtime": "vllm",
        "tags": ["chat", "code", "multilingual"],
        "description": "Qwen2.5 at 32B: near-70B quality on one 80 GB GPU.",
    },
    # google/gemma-2-9b-it: head_dim 256 (set explicitly in config.json), 8192 positions;
    # 9,241,705,984 params. Gemma 2 overflows in fp16, so bf16 only.
    {
        "slug": "gemma-2-9b-it",
        "name": "Gemma 2 9B IT",
        "source": "google/gemma-2-9b-it",
        "gated": True,
        "license": "gemma (Gemma Terms of Use)",
        "task": "text-generation",
        "parameters": Decimal("9.24"),
        "layers": 42,
        "attention_heads": 16,
        "kv_heads": 8,
        "head_dim": 256,
        "max_context": 8192,
        "dtypes": ["bf16", "fp8"],
        "quantizations": [],
        "default_dtype": "bf16",
        "runtime": "vllm",
        "tags": ["chat"],
        "description": "Google's Gemma 2 at 9B, instruction-tuned; 8K context.",
    },
    # Qwen/Qwen2.5-0.5B-Instruct: hidden 896 / 14 heads = 64; 2 KV heads; 494,032,768 params.
    {
        "slug": "qwen2.5-0.5b-instruct",
        "name": "Qwen2.5 0.5B Instruct",
        "source": "Qwen/Qwen2.5-0.5B-Instruct",
        "license": "apache-2.0",
        "task": "text-generation",
        "parameters": Decimal("0.494"),
        "layers": 24,
        "attention_heads": 14,
        "kv_heads": 2,
        "head_dim": 64,
        "max_context": 32768,
        "dtypes": ["bf16", "fp16"],
        "quantizations": [],
        "default_dtype": "bf16",
        "runtime": "vllm",
        "tags": ["chat", "small"],
        "description": "A tiny chat model: fits the smallest MIG slice; for tests, routing and drafts.",
    },
    # meta-llama/Llama-3.2-1B-Instruct: hidden 2048 / 32 heads = 64; 1,235,814,400 params.
    {
        "slug": "llama-3.2-1b-instruct",
        "name": "Llama 3.2 1B Instruct",
        "source": "meta-llama/Llama-3.2-1B-Instruct",
        "gated": True,
        "license": "llama3.2 (Llama 3.2 Community License)",
        "task": "text-generation",
        "parameters": Decimal("1.24"),
        "layers": 16,
        "attention_heads": 32,
        "kv_heads": 8,
        "head_dim": 64,
        "max_context": 131072,
        "dtypes": ["bf16", "fp16"],
        "quantizations": [],
        "default_dtype": "bf16",
        "runtime": "vllm",
        "tags": ["chat", "small"],
        "description": "Meta's smallest Llama 3.2: on-device class, fits a MIG slice.",
    },
    # BAAI/bge-large-en-v1.5: a BERT-large encoder, hidden 1024 / 16 heads = 64, 512 positions;
    # 335,141,888 params. Served by vLLM's /v1/embeddings; an encoder keeps no KV cache.
    {
        "slug": "bge-large-en-v1.5",
        "name": "BGE Large EN v1.5",
        "source": "BAAI/bge-large-en-v1.5",
        "license": "mit",
        "task": "embedding",
        "parameters": Decimal("0.335"),
        "layers": 24,
        "attention_heads": 16,
        "kv_heads": 16,
        "head_dim": 64,
        "max_context": 512,
        "dtypes": ["fp16", "fp32"],
        "quantizations": [],
        "default_dtype": "fp16",
        "runtime": "vllm",
        "tags": ["embedding", "retrieval"],
        "description": "English text embeddings (1024 dimensions) for search and RAG.",
    },
    # ResNet-50 (torchvision / microsoft/resnet-50): 25,557,032 params; not a transformer.
    # Triton serves it from a model repository the deployment mounts at this path.
    {
        "slug": "resnet-50",
        "name": "ResNet-50",
        "source": "/models/triton/resnet-50",
        "license": "apache-2.0",
        "task": "image-classification",
        "parameters": Decimal("0.0256"),
        "max_context": None,
        "dtypes": ["fp32", "fp16"],
        "quantizations": [],
        "default_dtype": "fp16",
        "runtime": "triton",
        "tags": ["vision", "imagenet"],
        "description": "ImageNet-1k image classifier (224x224), served by Triton over KServe v2.",
    },
)


@transaction.atomic
def catalog_seed() -> int:
    """Create the runtimes and demo models that are missing; return how many objects were created."""
    created = 0
    runtimes: dict[str, Runtime] = {}
    for spec in RUNTIMES.values():
        runtime, was_created = Runtime.objects.get_or_create(
            slug=spec.slug,
            defaults={
                "name": spec.name,
                "image": spec.image,
                "port": spec.port,
                "health_path": spec.health_path,
                "readiness_path": spec.readiness_path,
                "api": spec.api,
            },
        )
        runtimes[spec.slug] = runtime
        created += int(was_created)
    for entry in DEMO_MODELS:
        defaults = {key: value for key, value in entry.items() if key != "slug"}
        defaults["runtime"] = runtimes[entry["runtime"]]
        _, was_created = CatalogModel.objects.get_or_create(slug=entry["slug"], defaults=defaults)
        created += int(was_created)
    return created
