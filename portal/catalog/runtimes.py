"""Serving runtimes as data: their images and probes, and the container command each one needs to
serve a catalog entry with a sizing choice.

Pure: plain dataclasses and lists, no ORM. The seed copies `RUNTIMES` into `Runtime` rows (which
admins may then edit); deployments build their containers with `container_spec`.
"""

from __future__ import annotations

from dataclasses import dataclass

from portal.catalog.sizing import GPU_MEMORY_UTILIZATION


@dataclass(frozen=True)
class RuntimeSpec:
    """A runtime: its image, where it listens, how it is probed and which API it speaks."""

    slug: str
    name: str
    image: str
    port: int
    health_path: str
    readiness_path: str
    api: str
    max_tensor_parallel: int
    precisions: tuple[str, ...]  # what it can serve


RUNTIMES: dict[str, RuntimeSpec] = {
    spec.slug: spec
    for spec in (
        # vLLM's OpenAI-compatible server; it listens only once the weights are loaded, and
        # /v1/models answers once the model is registered.
        RuntimeSpec(
            slug="vllm",
            name="vLLM",
            image="vllm/vllm-openai:v0.8.5",
            port=8000,
            health_path="/health",
            readiness_path="/v1/models",
            api="openai",
            max_tensor_parallel=8,
            precisions=("fp32", "bf16", "fp16", "fp8", "awq-int4", "gptq-int4", "gptq-int8"),
        ),
        # NVIDIA Triton: the model repository's config.pbtxt decides the precision; one GPU.
        RuntimeSpec(
            slug="triton",
            name="NVIDIA Triton Inference Server",
            image="nvcr.io/nvidia/tritonserver:24.10-py3",
            port=8000,
            health_path="/v2/health/live",
            readiness_path="/v2/health/ready",
            api="kserve-v2",
            max_tensor_parallel=1,
            precisions=("fp32", "fp16"),
        ),
        # Hugging Face Text Generation Inference: the container's entrypoint is the launcher; its
        # Messages API is OpenAI-compatible. Its default port 80 needs root or NET_BIND_SERVICE,
        # which a pod under Pod Security `restricted` (non-root, all capabilities dropped) lacks.
        RuntimeSpec(
            slug="tgi",
            name="Text Generation Inference",
            image="ghcr.io/huggingface/text-generation-inference:3.0.1",
            port=8080,
            health_path="/health",
            readiness_path="/health",
            api="openai",
            max_tensor_parallel=8,
            precisions=("bf16", "fp16", "awq-int4", "gptq-int4", "gptq-int8"),
        ),
    )
}

# Precision -> the runtime's spelling of the compute dtype.
_VLLM_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
_TGI_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}
# Quantized precision -> the quantization method flag.
_VLLM_QUANTIZATION = {"fp8": "fp8", "awq-int4": "awq", "gptq-int4": "gptq", "gptq-int8": "gptq"}
_TGI_QUANTIZE = {"awq-int4": "awq", "gptq-int4": "gptq", "gptq-int8": "gptq"}


@dataclass(frozen=True)
class ServingChoice:
    """What to serve and how: the checkpoint, its precision, the GPUs and the context."""

    source: str
    precision: str
    tensor_parallel: int
    context: int
    default_dtype: str = "bf16"  # the entry's own dtype: the compute dtype under fp8


@dataclass(frozen=True)
class ContainerSpec:
    image: str
    command: list[str]
    port: int
    health_path: str
    readiness_path: str


class UnsupportedChoice(ValueError):
    """The runtime cannot serve this choice (a precision it lacks, more GPUs than it splits over)."""


def check_choice(runtime: RuntimeSpec, choice: ServingChoice) -> None:
    if choice.precision not in runtime.precisions:
        raise UnsupportedChoice(f"{runtime.name} does not serve {choice.precision}.")
    if not 1 <= choice.tensor_parallel <= runtime.max_tensor_parallel:
        raise UnsupportedChoice(f"{runtime.name} serves on 1 to {runtime.max_tensor_parallel} GPUs.")
    if choice.context < 1:
        raise UnsupportedChoice("The context must be at least one token.")


def vllm_command(runtime: RuntimeSpec, choice: ServingChoice) -> list[str]:
    """`vllm serve`: AWQ/GPTQ kernels compute in fp16; fp8 weights also get an fp8 KV cache,
    as the sizing assumes."""
    quantization = _VLLM_QUANTIZATION.get(choice.precision)
    if quantization in ("awq", "gptq"):
        dtype = "float16"
    else:
        dtype = _VLLM_DTYPES.get(choice.precision) or _VLLM_DTYPES.get(choice.default_dtype, "auto")
    command = [
        "vllm",
        "serve",
        choice.source,
        "--tensor-parallel-size",
        str(choice.tensor_parallel),
        "--max-model-len",
        str(choice.context),
        "--dtype",
        dtype,
        "--gpu-memory-utilization",
        f"{GPU_MEMORY_UTILIZATION:.2f}",
        "--port",
        str(runtime.port),
    ]
    if quantization:
        command += ["--quantization", quantization]
    if choice.precision == "fp8":
        command += ["--kv-cache-dtype", "fp8"]
    return command


def tgi_command(runtime: RuntimeSpec, choice: ServingChoice) -> list[str]:
    """`text-generation-launcher`: `--dtype` and `--quantize` exclude each other; the input limit
    is set one below the total so the launcher accepts any context."""
    command = [
        "text-generation-launcher",
        "--model-id",
        choice.source,
        "--num-shard",
        str(choice.tensor_parallel),
        "--max-input-tokens",
        str(max(choice.context - 1, 1)),
        "--max-total-tokens",
        str(choice.context),
        "--port",
        str(runtime.port),
    ]
    if choice.precision in _TGI_QUANTIZE:
        return [*command, "--quantize", _TGI_QUANTIZE[choice.precision]]
    return [*command, "--dtype", _TGI_DTYPES[choice.precision]]


def triton_command(runtime: RuntimeSpec, choice: ServingChoice) -> list[str]:
    """`tritonserver` over a model repository (a path or an s3:// URL)."""
    return ["tritonserver", f"--model-repository={choice.source}", "--http-port", str(runtime.port)]


_BUILDERS = {"vllm": vllm_command, "tgi": tgi_command, "triton": triton_command}


def container_command(runtime: RuntimeSpec, choice: ServingChoice) -> list[str]:
    """The full command line (argv) that serves `choice` on `runtime`."""
    check_choice(runtime, choice)
    return _BUILDERS[runtime.slug](runtime, choice)


def container_spec(runtime: RuntimeSpec, choice: ServingChoice) -> ContainerSpec:
    """Image, command, port and probes of the serving container."""
    return ContainerSpec(
        image=runtime.image,
        command=container_command(runtime, choice),
        port=runtime.port,
        health_path=runtime.health_path,
        readiness_path=runtime.readiness_path,
    )
