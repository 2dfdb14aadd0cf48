"""How much GPU memory a model needs to serve, and which GPUs or MIG slices of the fleet hold it.

Pure: plain dataclasses in, plain dataclasses out, no ORM (the selectors feed it fleet data).

The rules, in bytes (GB in the output is 10^9 bytes):

- weights = parameters x bytes per parameter (fp32 4, bf16/fp16 2, fp8/int8 1, int4 0.5).
- KV cache per token = 2 (K and V) x layers x kv_heads x head_dim x bytes per KV element;
  KV cache = per token x context x concurrent sequences. Only generative (decoder) models keep
  a KV cache; an embedding encoder or an image classifier attends once and keeps nothing.
- overhead per GPU = 1.5 GB + 10% of the weights that GPU holds (see `OVERHEAD_FIXED_BYTES`).
- one GPU of a tensor-parallel group holds weights / tp + KV / tp + its overhead.
- a GPU or MIG slice offers its nominal memory (the `80` of "80 GB", the `10` of "1g.10gb") x
  10^9 bytes, of which a server may use `GPU_MEMORY_UTILIZATION` (vLLM's default, 0.90).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal

GB = Decimal(10**9)
CENT = Decimal("0.01")

GPU_MEMORY_UTILIZATION = Decimal("0.90")
"""The share of a device's memory the server may claim: vLLM's `--gpu-memory-utilization`
default, which we also pass explicitly, so the sizing and the running server agree."""

OVERHEAD_FIXED_BYTES = Decimal("1.5") * GB
"""Per GPU, whatever the model: the CUDA context, cuBLAS/NCCL workspaces and captured CUDA graphs.
vLLM reports this "non-torch" memory at roughly 0.5-1.5 GiB per process; we take the top."""

OVERHEAD_WEIGHT_SHARE = Decimal("0.10")
"""Per GPU, on top: activations of the profiling forward pass and allocator fragmentation,
which grow with the model's width. The common rule of thumb sizes serving as weights x 1.2 with
the KV cache inside those 20%; we count the KV cache exactly, so half that margin remains."""

TENSOR_PARALLEL_SIZES = (1, 2, 4, 8)


@dataclass(frozen=True)
class Precision:
    """How a precision stores weights, and the KV cache it implies."""

    weight_bytes: Decimal
    kv_bytes: int


PRECISIONS: dict[str, Precision] = {
    # The KV cache follows the compute dtype (vLLM's `--kv-cache-dtype auto`): fp32 keeps 4 bytes,
    # bf16/fp16 2. int8 and int4 quantize the weights only as far as the cache is concerned: the
    # KV cache stays in 16 bits, 2 bytes. Choosing fp8 means fp8 weights *and* an fp8 KV cache (the
    # runtimes pass `--kv-cache-dtype fp8`), so its KV is 1 byte.
    "fp32": Precision(Decimal(4), 4),
    "bf16": Precision(Decimal(2), 2),
    "fp16": Precision(Decimal(2), 2),
    "fp8": Precision(Decimal(1), 1),
    "int8": Precision(Decimal(1), 2),
    "gptq-int8": Precision(Decimal(1), 2),
    "awq-int4": Precision(Decimal("0.5"), 2),
    "gptq-int4": Precision(Decimal("0.5"), 2),
}


@dataclass(frozen=True)
class ModelShape:
    """The architecture figures sizing needs (from the model's config.json)."""

    parameters_b: Decimal  # billions
    layers: int = 0
    attention_heads: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    generative: bool = True
    max_tensor_parallel: int = 8  # the runtime's limit (Triton serves on one GPU)

    def tensor_parallel_sizes(self) -> tuple[int, ...]:
        """tp sizes the model splits over: the attention heads must divide evenly (vLLM's rule)."""
        sizes = [tp for tp in TENSOR_PARALLEL_SIZES if tp <= self.max_tensor_parallel]
        if self.attention_heads <= 0:
            return (1,)
        return tuple(tp for tp in sizes if self.attention_heads % tp == 0)


@dataclass(frozen=True)
class MigOffer:
    """A MIG profile of a GPU type, with its share of the GPU's price (numerator, denominator)."""

    name: str
    memory_gb: int
    share: tuple[int, int]


@dataclass(frozen=True)
class GpuOffer:
    """A GPU type of the fleet as sizing sees it."""

    gpu_type: str
    memory_gb: int
    price_per_hour: Decimal
    max_gpus_per_node: int  # whole (non-MIG) GPUs on the biggest node; 0: no whole GPUs
    mig_profiles: tuple[MigOffer, ...] = ()


@dataclass(frozen=True)
class Fit:
    """One way to serve the model: `gpus` whole GPUs of a type, or one MIG slice."""

    gpu_type: str
    mig_profile: str | None
    gpus: int
    price_per_hour: Decimal  # dollars, rounded to cents
    memory_gb: int  # of one GPU or of the slice
    needed_per_gpu_gb: Decimal


@dataclass(frozen=True)
class Sizing:
    weights_gb: Decimal
    kv_cache_gb: Decimal
    total_gb: Decimal  # on one GPU, without tensor parallelism
    fits: tuple[Fit, ...]

    @property
    def fits_one_gpu(self) -> bool:
        return any(fit.gpus == 1 for fit in self.fits)

    @property
    def fewest_gpus(self) -> Fit | None:
        """The fit with the fewest GPUs (then the smallest ones): "needs at least N x M GB"."""
        return min(self.fits, key=lambda fit: (fit.gpus, fit.memory_gb, fit.price_per_hour), default=None)


def gigabytes(size_bytes: Decimal | int) -> Decimal:
    """Bytes as GB (10^9), two decimals."""
    return (Decimal(size_bytes) / GB).quantize(CENT, rounding=ROUND_HALF_UP)


def weights_bytes(shape: ModelShape, precision: str) -> Decimal:
    return shape.parameters_b * GB * PRECISIONS[precision].weight_bytes


def cache_gb(shape: ModelShape, precisions: tuple[str, ...]) -> int:
    """The model cache a replica downloads the checkpoint into, in whole GB: the largest of the
    weights in `precisions` (the checkpoint's own dtype, the one served), plus 10 % and 10 GB for
    tokenizer files, compiled kernels and the runtime's caches."""
    largest = max(weights_bytes(shape, precision) for precision in precisions)
    return int(((largest * Decimal("1.1")) / GB + 10).to_integral_value(rounding=ROUND_CEILING))


def kv_bytes_per_token(shape: ModelShape, precision: str) -> int:
    if not shape.generative:
        return 0
    return 2 * shape.layers * shape.kv_heads * shape.head_dim * PRECISIONS[precision].kv_bytes


def per_gpu_bytes(*, weights: Decimal, kv_cache: int, tp: int, kv_heads: int) -> Decimal:
    """What one GPU of a tp group holds. With more GPUs than KV heads, each GPU keeps whole heads
    (vLLM replicates them), so the KV cache splits over at most `kv_heads` GPUs."""
    weights_share = weights / tp
    kv_split = min(tp, kv_heads) if kv_heads > 0 else tp
    return (
        weights_share
        + Decimal(kv_cache) / kv_split
        + OVERHEAD_FIXED_BYTES
        + OVERHEAD_WEIGHT_SHARE * weights_share
    )


def budget_bytes(memory_gb: int) -> Decimal:
    """What a server may use of a device of nominal `memory_gb`."""
    return Decimal(memory_gb) * GB * GPU_MEMORY_UTILIZATION


def _cents(amount: Decimal) -> Decimal:
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def size_model(
    shape: ModelShape, *, precision: str, context: int, concurrency: int, offers: list[GpuOffer]
) -> Sizing:
    """Memory for `concurrency` sequences of `context` tokens, and every offer that holds it:
    for each GPU type the smallest tp that fits on one node, and each MIG profile that fits
    (MIG only at tp=1), cheapest first."""
    weights = weights_bytes(shape, precision)
    kv_cache = kv_bytes_per_token(shape, precision) * context * concurrency
    one_gpu = per_gpu_bytes(weights=weights, kv_cache=kv_cache, tp=1, kv_heads=shape.kv_heads)
    fits: list[Fit] = []
    for offer in offers:
        for tp in shape.tensor_parallel_sizes():
            if tp > offer.max_gpus_per_node:
                break
            needed = per_gpu_bytes(weights=weights, kv_cache=kv_cache, tp=tp, kv_heads=shape.kv_heads)
            if needed <= budget_bytes(offer.memory_gb):
                fits.append(
                    Fit(
                        gpu_type=offer.gpu_type,
                        mig_profile=None,
                        gpus=tp,
                        price_per_hour=_cents(offer.price_per_hour * tp),
                        memory_gb=offer.memory_gb,
                        needed_per_gpu_gb=gigabytes(needed),
                    )
                )
                break
        for profile in offer.mig_profiles:
            if one_gpu <= budget_bytes(profile.memory_gb):
                numerator, denominator = profile.share
                fits.append(
                    Fit(
                        gpu_type=offer.gpu_type,
                        mig_profile=profile.name,
                        gpus=1,
                        price_per_hour=_cents(offer.price_per_hour * numerator / denominator),
                        memory_gb=profile.memory_gb,
                        needed_per_gpu_gb=gigabytes(one_gpu),
                    )
                )
    fits.sort(
        key=lambda fit: (fit.price_per_hour, fit.gpus, fit.memory_gb, fit.gpu_type, fit.mig_profile or "")
    )
    return Sizing(
        weights_gb=gigabytes(weights),
        kv_cache_gb=gigabytes(kv_cache),
        total_gb=gigabytes(one_gpu),
        fits=tuple(fits),
    )
