"""GPU nodes as GPU Feature Discovery and the MIG manager label them, for preloading the fake."""

from __future__ import annotations


def gpu_node(
    name: str,
    *,
    product: str,
    gpu_count: int,
    gpu_memory_mb: int,
    mig_strategy: str = "mixed",
    mig_config: str = "all-disabled",
    mig_state: str = "success",
    allocatable_gpus: dict[str, int] | None = None,
) -> dict:
    """A Ready node with GFD labels; `allocatable_gpus` defaults to every GPU whole."""
    gpus = allocatable_gpus if allocatable_gpus is not None else {"nvidia.com/gpu": gpu_count}
    resources = {"cpu": "128", "memory": "2063Gi", "pods": "110", **{k: str(v) for k, v in gpus.items()}}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": product,
                "nvidia.com/gpu.count": str(gpu_count),
                "nvidia.com/gpu.memory": str(gpu_memory_mb),
                "nvidia.com/gpu.family": "hopper" if "H" in product.split("-")[1] else "ampere",
                "nvidia.com/mig.capable": "true",
                "nvidia.com/mig.strategy": mig_strategy,
                "nvidia.com/mig.config": mig_config,
                "nvidia.com/mig.config.state": mig_state,
            },
        },
        "spec": {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def cpu_node(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
        "spec": {},
        "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
    }


def default_nodes() -> list[dict]:
    """A small mixed fleet: whole H100s, H100s cut by `all-balanced`, a single-strategy A100
    node, and a CPU node GPU discovery must skip."""
    return [
        gpu_node("gpu-h100-a", product="NVIDIA-H100-80GB-HBM3", gpu_count=8, gpu_memory_mb=81559),
        gpu_node(
            "gpu-h100-b",
            product="NVIDIA-H100-80GB-HBM3",
            gpu_count=8,
            gpu_memory_mb=81559,
            mig_config="all-balanced",
            allocatable_gpus={
                "nvidia.com/gpu": 0,
                "nvidia.com/mig-1g.10gb": 16,
                "nvidia.com/mig-2g.20gb": 8,
                "nvidia.com/mig-3g.40gb": 8,
            },
        ),
        gpu_node(
            "gpu-a100-a",
            product="NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
            gpu_count=4,
            gpu_memory_mb=40960,
            mig_strategy="single",
            mig_config="all-1g.5gb",
            allocatable_gpus={"nvidia.com/gpu": 28},
        ),
        cpu_node("cpu-a"),
    ]
