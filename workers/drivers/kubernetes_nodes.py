"""GPU nodes as the GPU Operator describes them, and MIG layouts in mig-parted's format.

Pure functions over API dicts and YAML text, so discovery and MIG requests are testable without
a cluster. Label names follow GPU Feature Discovery and the MIG manager (gpu-reference.md).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from workers.drivers.base import DiscoveredGpuNode, MigLayout, MigLayoutState
from workers.manifests.claims import DRA_DRIVER

GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_COUNT = "nvidia.com/gpu.count"
GPU_MEMORY = "nvidia.com/gpu.memory"
MIG_CAPABLE = "nvidia.com/mig.capable"
MIG_STRATEGY = "nvidia.com/mig.strategy"
MIG_CONFIG = "nvidia.com/mig.config"
MIG_CONFIG_STATE = "nvidia.com/mig.config.state"
WHOLE_GPU = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"

MIG_CONFIG_KEY = "config.yaml"  # the key the MIG manager reads from its ConfigMap
MIG_CONFIG_PREFIX = "gpu-portal-"
BASE_MIG_CONFIGS: dict[str, list[dict]] = {"all-disabled": [{"devices": "all", "mig-enabled": False}]}


def _int(value: Any) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def discovered_node(node: dict) -> DiscoveredGpuNode | None:
    """A node's GPUs from its GFD labels and allocatable GPU resources; None without GPUs."""
    labels = node.get("metadata", {}).get("labels") or {}
    if GPU_PRODUCT not in labels:
        return None
    allocatable = {
        resource: _int(amount)
        for resource, amount in (node.get("status", {}).get("allocatable") or {}).items()
        if resource == WHOLE_GPU or resource.startswith(MIG_RESOURCE_PREFIX)
    }
    return DiscoveredGpuNode(
        name=node["metadata"]["name"],
        product=labels[GPU_PRODUCT],
        gpu_count=_int(labels.get(GPU_COUNT)) or allocatable.get(WHOLE_GPU, 0),
        gpu_memory_mb=_int(labels.get(GPU_MEMORY)),
        mig_capable=labels.get(MIG_CAPABLE, "false").lower() == "true",
        mig_strategy=labels.get(MIG_STRATEGY, "none"),
        mig_config=labels.get(MIG_CONFIG, ""),
        mig_config_state=labels.get(MIG_CONFIG_STATE, ""),
        allocatable=allocatable,
    )


def dra_gpus(resource_slices: Iterable[Mapping]) -> dict[str, tuple[dict[int, str], set[int]]]:
    """Per node, from NVIDIA's DRA driver's ResourceSlices: GPU index -> UUID, and the indexes of
    the GPUs it offers MIG placements on (devices of type `mig` whose `parentUUID` is that GPU)."""
    found: dict[str, tuple[dict[int, str], set[int]]] = {}
    parents: dict[str, set[str]] = {}
    for resource_slice in resource_slices:
        spec = resource_slice.get("spec") or {}
        node = spec.get("nodeName")
        if spec.get("driver") != DRA_DRIVER or not node:
            continue
        uuids, _ = found.setdefault(node, ({}, set()))
        for device in spec.get("devices") or []:
            attributes = device.get("attributes") or {}
            kind = (attributes.get("type") or {}).get("string")
            if kind == "gpu" and "index" in attributes and "uuid" in attributes:
                uuids[int(attributes["index"]["int"])] = attributes["uuid"]["string"]
            elif kind == "mig" and "parentUUID" in attributes:
                parents.setdefault(node, set()).add(attributes["parentUUID"]["string"])
    for node, (uuids, mig) in found.items():
        mig.update(index for index, uuid in uuids.items() if uuid in parents.get(node, set()))
    return found


def mig_device_start(device: str) -> int | None:
    """The start slot a DRA MIG device name carries (`gpu-3-mig-1g10gb-19-5` -> 5)."""
    parts = device.rsplit("-", 2)
    return int(parts[-1]) if len(parts) == 3 and "-mig-" in device and parts[-1].isdigit() else None


def product_slug_table(models: Iterable[Any]) -> dict[str, str]:
    """`{gpu.product: slug}` from GPU models that have `.slug` and `.products`.

    Drivers may not import the portal, so the caller passes the models in:
    `product_slug_table(portal.fleet.geometry.GPU_MODELS.values())`.
    """
    return {product: model.slug for model in models for product in model.products}


def gpu_type_slug(product: str, product_slugs: Mapping[str, str]) -> str | None:
    """The portal GPU type of a GFD product string, or None for a model the portal does not know.

    GFD appends `-MIG-<profile>` under the single strategy and `-SHARED` under time-slicing;
    both still name the same physical model.
    """
    by_lower = {known.lower(): slug for known, slug in product_slugs.items()}
    candidate = product.strip()
    candidate = candidate.removesuffix("-SHARED")
    candidate = candidate.split("-MIG-", 1)[0]
    return by_lower.get(candidate.lower())


def layout_state(labels: Mapping[str, str]) -> MigLayoutState:
    """The MIG manager's progress label as the protocol's three states (rebooting is pending)."""
    state = labels.get(MIG_CONFIG_STATE, "")
    if state in ("success", "failed"):
        return state  # type: ignore[return-value]
    return "pending"


def _node_part(node: str) -> str:
    if len(node) <= 40:
        return node
    return f"{node[:33].rstrip('.-')}-{hashlib.sha256(node.encode()).hexdigest()[:6]}"


def mig_config_name(node: str, layout: MigLayout, gpu_count: int, *, retry: bool = False) -> str:
    """`gpu-portal-<node>-<layout hash>`: a new name for every new layout, so the node label
    changes and the MIG manager acts; at most 63 characters, as a label value must be.

    `retry` gives the layout's second name, of the same length: the MIG manager acts only on a
    change of the label, and does not try a failed config again, so a retry of the same layout
    points the node at its other name.
    """
    canonical = json.dumps(
        {"gpus": gpu_count, "layout": {str(i): sorted(layout[i]) for i in sorted(layout)}}, sort_keys=True
    )
    digest = hashlib.sha256((canonical + ("#retry" if retry else "")).encode()).hexdigest()[:8]
    return f"{MIG_CONFIG_PREFIX}{_node_part(node)}-{digest}"


def written_at_key(name: str) -> str:
    """The ConfigMap annotation that records when config `name` was first written to it."""
    return f"{WRITTEN_AT_PREFIX}{name}"


WRITTEN_AT_PREFIX = "mig.gpu-portal.io/"


def advertised_matches(node: Mapping, layout: MigLayout) -> bool:
    """Whether the node's allocatable MIG resources are what the layout makes under the mixed
    strategy (`nvidia.com/mig-<profile>` per profile). The MIG manager's `success` alone can be
    stale (an earlier change's), and the device plugin restarts after it; this is what pods can
    actually get."""
    allocatable = node.get("status", {}).get("allocatable") or {}
    # the device plugin's resource names write a profile's "+" as "." (1g.10gb+me: mig-1g.10gb.me)
    wanted = Counter(profile.replace("+", ".") for slices in layout.values() for profile, _start in slices)
    found = {
        resource.removeprefix(MIG_RESOURCE_PREFIX): _int(amount)
        for resource, amount in allocatable.items()
        if resource.startswith(MIG_RESOURCE_PREFIX)
    }
    # Whole GPUs are not compared: an unhealthy one lowers `nvidia.com/gpu` for as long as it is.
    return {profile: n for profile, n in found.items() if n} == dict(wanted)


def mig_parted_entries(layout: MigLayout, gpu_count: int) -> list[dict]:
    """One mig-parted entry per GPU: listed GPUs get MIG with their slices, the others MIG off.

    mig-parted takes counts per profile, not start slots: the GPU places the instances itself,
    so the portal's start slots are its own bookkeeping.
    """
    entries = []
    for index in sorted(set(range(gpu_count)) | set(layout)):
        if index in layout:
            counts = Counter(profile for profile, _start in layout[index])
            entries.append(
                {"devices": [index], "mig-enabled": True, "mig-devices": dict(sorted(counts.items()))}
            )
        else:
            entries.append({"devices": [index], "mig-enabled": False})
    return entries


def merge_mig_config(existing: str, node: str, name: str, entries: list[dict], keep: str = "") -> str:
    """The ConfigMap's `config.yaml` with `name` added for `node` and the node's older portal
    configs dropped, except `keep` (the one its label points at until the MIG manager moves on)."""
    document = yaml.safe_load(existing) if existing else None
    if not isinstance(document, dict):
        document = {}
    configs = dict(document.get("mig-configs") or {})
    for config_name, config in BASE_MIG_CONFIGS.items():
        configs.setdefault(config_name, config)
    own_prefix = f"{MIG_CONFIG_PREFIX}{_node_part(node)}-"
    for config_name in list(configs):
        stale = config_name.startswith(own_prefix) and len(config_name) == len(name)
        if stale and config_name not in (name, keep):
            del configs[config_name]
    configs[name] = entries
    return yaml.safe_dump({"version": "v1", "mig-configs": configs}, sort_keys=True)
