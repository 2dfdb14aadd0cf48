"""MIG geometry and GPU models as data (source: shared docs gpu-reference.md, from NVIDIA's MIG
User Guide and `nvidia-smi mig -lgipp`).

Pure data and pure functions: the placement engine, the seed and the Kubernetes driver all read
from here, so one table decides what fits where.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

MEMORY_SLOTS = 8
COMPUTE_SLICES = 7


@dataclass(frozen=True)
class ProfileShape:
    """One MIG profile of one GPU model: where it may start and how much it takes."""

    name: str
    profile_id: int
    compute_slices: int
    size: int  # memory slots
    starts: tuple[int, ...]
    max_count: int
    memory_gb: int
    media: bool = False

    def gpu_equivalents(self, rule: str = "compute") -> Decimal:
        """The share of a whole GPU this slice stands for, by compute (n/7) or memory (n/8)."""
        if rule == "memory":
            return Decimal(self.size) / Decimal(MEMORY_SLOTS)
        return Decimal(self.compute_slices) / Decimal(COMPUTE_SLICES)


# profile id -> (class, compute slices, allowed starts, size in memory slots, max per GPU)
_PLACEMENTS: dict[int, tuple[int, tuple[int, ...], int, int]] = {
    19: (1, (0, 1, 2, 3, 4, 5, 6), 1, 7),
    20: (1, (0, 1, 2, 3, 4, 5, 6), 1, 1),
    15: (1, (0, 2, 4, 6), 2, 4),
    14: (2, (0, 2, 4), 2, 3),
    9: (3, (0, 4), 4, 2),
    5: (4, (0,), 4, 1),
    0: (7, (0,), 8, 1),
}
_PROFILE_ORDER = (19, 20, 15, 14, 9, 5, 0)


@dataclass(frozen=True)
class GpuModel:
    slug: str
    name: str
    memory_gb: int
    mig_capable: bool
    products: tuple[str, ...]  # nvidia.com/gpu.product values (GPU Feature Discovery)
    profile_names: tuple[str, ...] = ()  # in _PROFILE_ORDER
    list_price_per_hour: Decimal = Decimal("0")

    @property
    def profiles(self) -> tuple[ProfileShape, ...]:
        shapes = []
        for profile_id, name in zip(_PROFILE_ORDER, self.profile_names, strict=True):
            compute, starts, size, max_count = _PLACEMENTS[profile_id]
            memory_gb = int(name.split(".")[1].removesuffix("+me").removesuffix("gb"))
            shapes.append(
                ProfileShape(
                    name=name,
                    profile_id=profile_id,
                    compute_slices=compute,
                    size=size,
                    starts=starts,
                    max_count=max_count,
                    memory_gb=memory_gb,
                    media=name.endswith("+me"),
                )
            )
        return tuple(shapes)

    def profile(self, name: str) -> ProfileShape | None:
        return next((p for p in self.profiles if p.name == name), None)


def _names(small: int, double: int, half: int, whole: int) -> tuple[str, ...]:
    return (
        f"1g.{small}gb",
        f"1g.{small}gb+me",
        f"1g.{double}gb",
        f"2g.{double}gb",
        f"3g.{half}gb",
        f"4g.{half}gb",
        f"7g.{whole}gb",
    )


GPU_MODELS: dict[str, GpuModel] = {
    model.slug: model
    for model in (
        GpuModel(
            "a100-40gb",
            "NVIDIA A100 40GB",
            40,
            True,
            ("NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB"),
            _names(5, 10, 20, 40),
            Decimal("3.43"),
        ),
        GpuModel(
            "a100-80gb",
            "NVIDIA A100 80GB",
            80,
            True,
            ("NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe"),
            _names(10, 20, 40, 80),
            Decimal("3.43"),
        ),
        GpuModel(
            "h100-80gb",
            "NVIDIA H100 80GB",
            80,
            True,
            ("NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-PCIe"),
            _names(10, 20, 40, 80),
            Decimal("6.88"),
        ),
        GpuModel(
            "h100-nvl-94gb",
            "NVIDIA H100 NVL 94GB",
            94,
            True,
            ("NVIDIA-H100-NVL",),
            _names(12, 24, 47, 94),
            Decimal("6.98"),
        ),
        GpuModel(
            "h200-141gb",
            "NVIDIA H200 141GB",
            141,
            True,
            ("NVIDIA-H200", "NVIDIA-H200-NVL"),
            _names(18, 35, 71, 141),
            Decimal("7.91"),
        ),
    )
}


def gpu_model(slug: str) -> GpuModel | None:
    return GPU_MODELS.get(slug)


def fits(slices: list[tuple[int, int]], shape: ProfileShape, start: int) -> bool:
    """Whether `shape` may sit at `start` beside the existing (start, size) ranges."""
    if start not in shape.starts:
        return False
    end = start + shape.size
    return all(end <= s or start >= s + size for s, size in slices)
