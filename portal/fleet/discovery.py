"""GPU node discovery: bring the fleet's Node and Gpu rows in line with what a cluster reports.

The cluster is the source of truth for which GPU nodes exist; the database keeps history. So
discovery creates and updates rows, but never deletes one an allocation references: a node that
left the cluster is taken out of placement (`schedulable=False`), not removed. A node whose GPU
product the portal does not know is kept, flagged `unknown_product`, and never placed on.

The portal may not import the workers, so the worker converts its driver's nodes into
`DiscoveredNode`, the plain data this module takes.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction

from portal.audit.services import audit_record
from portal.fleet.geometry import GPU_MODELS, MEMORY_SLOTS, GpuModel, fits
from portal.fleet.models import Allocation, Cluster, Gpu, GpuType, MigSlice, Node, PriceBookEntry

WHOLE_GPU = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
PORTAL_MIG_CONFIG_PREFIX = "gpu-portal-"  # layouts the portal itself asked for (workers' MIG reconciler)
# Node.labels key set while discovery holds a node out of placement, with the reason. A node an
# admin marked unschedulable carries no such key, so discovery never puts it back into placement.
DISCOVERY_HOLD_KEY = "gpu-portal/discovery-hold"

# The Node columns discovery writes; the MIG layout job's columns belong to others.
SYNCED_NODE_FIELDS = (
    "gpu_type_id",
    "product",
    "unknown_product",
    "schedulable",
    "mig_config_state",
    "labels",
)


@dataclass(frozen=True)
class DiscoveredNode:
    """One GPU node as the cluster describes it (mirrors the driver's DiscoveredGpuNode).

    `gpu_type` is the portal GPU type slug the product maps to, or None for a product the portal
    does not know.
    """

    name: str
    product: str
    gpu_count: int
    gpu_memory_mb: int = 0
    mig_capable: bool = False
    mig_strategy: str = "none"  # none | single | mixed
    mig_config: str = ""
    mig_config_state: str = ""
    allocatable: dict[str, int] = field(default_factory=dict)
    gpu_type: str | None = None
    gpu_uuids: dict[int, str] = field(default_factory=dict)  # GPU index -> UUID, where reported
    dra_mig_gpus: tuple[int, ...] | None = None  # GPUs NVIDIA's DRA driver offers MIG slices on


@dataclass
class SyncResult:
    """What one discovery run changed (empty lists when it changed nothing)."""

    cluster: str
    nodes_added: list[str] = field(default_factory=list)
    nodes_updated: list[str] = field(default_factory=list)
    nodes_gone: list[str] = field(default_factory=list)  # taken out of placement this run
    gpus_added: list[str] = field(default_factory=list)  # "node/index"
    gpus_removed: list[str] = field(default_factory=list)
    mig_changed: list[str] = field(default_factory=list)  # "node/index: on|off"
    gpu_types_added: list[str] = field(default_factory=list)
    unknown: dict[str, str] = field(default_factory=dict)  # node -> product, every run
    stale_gpus: list[str] = field(default_factory=list)  # no longer reported, kept for their history
    unmanaged: list[str] = field(default_factory=list)  # added with a MIG layout set outside the portal
    imported: list[str] = field(default_factory=list)  # "node: 16 x 1g.10gb, ..." taken in as free slices
    dra_nodes: list[str] = field(default_factory=list)  # nodes NVIDIA's DRA driver offers MIG on, every run

    @property
    def changed(self) -> bool:
        return bool(
            self.nodes_added
            or self.nodes_updated
            or self.nodes_gone
            or self.gpus_added
            or self.gpus_removed
            or self.mig_changed
            or self.gpu_types_added
            or self.imported
        )

    def summary(self) -> str:
        parts = []
        for label, items in (
            ("GPU types added", self.gpu_types_added),
            ("nodes added", self.nodes_added),
            ("nodes updated", self.nodes_updated),
            ("nodes gone (unschedulable)", self.nodes_gone),
            ("GPUs added", _by_node(self.gpus_added)),
            ("GPUs removed", _by_node(self.gpus_removed)),
            ("MIG mode changed", self.mig_changed),
            ("GPUs no longer reported but kept", _by_node(self.stale_gpus)),
            ("nodes whose MIG layout was set outside the portal (left alone)", self.unmanaged),
            ("existing MIG slices taken in as free", self.imported),
        ):
            if items:
                parts.append(f"{label}: {', '.join(items)}")
        if self.unknown:
            unknown = ", ".join(f"{node} ({product})" for node, product in sorted(self.unknown.items()))
            parts.append(f"unknown GPU products: {unknown}")
        if self.dra_nodes:
            parts.append(f"NVIDIA's DRA driver offers MIG on: {', '.join(self.dra_nodes)}")
        return "; ".join(parts) or "no change"


def _by_node(gpus: list[str]) -> list[str]:
    """["n/0", "n/1", "m/3"] as ["n/0-1", "m/3"]: one entry per node, indices as ranges."""
    indices: dict[str, list[int]] = {}
    for item in gpus:
        node, _, index = item.rpartition("/")
        indices.setdefault(node, []).append(int(index))
    entries = []
    for node, found in indices.items():
        found.sort()
        spans = []
        start = previous = found[0]
        for index in found[1:]:
            if index != previous + 1:
                spans.append(f"{start}-{previous}" if previous != start else str(start))
                start = index
            previous = index
        spans.append(f"{start}-{previous}" if previous != start else str(start))
        entries.append(f"{node}/{','.join(spans)}")
    return entries


def gpu_uuid(*, cluster: str, node: str, index: int) -> str:
    """A stable stand-in for a GPU's UUID when the cluster does not report one."""
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{index}.{node}.{cluster}.gpu-portal')}"


def mig_gpu_count(node: DiscoveredNode) -> int | None:
    """How many of the node's GPUs run MIG, or None when the cluster does not tell for sure.

    None while a layout change is in progress, when no GPU resource is advertised yet, and on a
    layout the portal asked for itself (there the database is the intent; see mig_layout_of).
    Single strategy: GFD appends `-MIG-<profile>` to the product of a MIG node. Mixed strategy:
    GPUs that are not offered whole while MIG resources are offered are in MIG mode.
    """
    if node.dra_mig_gpus is not None:  # NVIDIA's DRA driver says which GPUs it cuts slices on
        return len(node.dra_mig_gpus)
    if node.gpu_count <= 0 or not node.mig_capable or node.mig_strategy not in ("single", "mixed"):
        return 0
    if node.mig_config_state == "pending" or node.mig_config.startswith(PORTAL_MIG_CONFIG_PREFIX):
        return None
    if node.mig_strategy == "single":
        return node.gpu_count if "-MIG-" in node.product.upper() else 0
    if not node.allocatable:
        return None
    if not any(
        amount > 0
        for resource, amount in node.allocatable.items()
        if resource.startswith(MIG_RESOURCE_PREFIX)
    ):
        return 0
    return max(0, node.gpu_count - node.allocatable.get(WHOLE_GPU, 0))


def has_foreign_layout(node: DiscoveredNode) -> bool:
    """Whether the node runs MIG GPUs under a layout the portal did not write (a MIG manager
    config such as `all-balanced`, or a single-strategy profile)."""
    if node.mig_config.startswith(PORTAL_MIG_CONFIG_PREFIX) or node.dra_mig_gpus is not None:
        return False  # the portal's own, or NVIDIA's DRA driver's GPUs (slices made per claim)
    return (mig_gpu_count(node) or 0) > 0


def node_labels(node: DiscoveredNode) -> dict[str, str]:
    """The GPU Feature Discovery labels the portal keeps on its Node row."""
    return {
        "nvidia.com/gpu.product": node.product,
        "nvidia.com/gpu.count": str(node.gpu_count),
        "nvidia.com/gpu.memory": str(node.gpu_memory_mb),
        "nvidia.com/mig.capable": "true" if node.mig_capable else "false",
        "nvidia.com/mig.strategy": node.mig_strategy,
        "nvidia.com/mig.config": node.mig_config,
    }


@transaction.atomic
def fleet_sync_nodes(*, cluster: Cluster, discovered: list[DiscoveredNode], now: datetime) -> SyncResult:
    """Create and update the cluster's Node and Gpu rows from `discovered`; idempotent.

    Nodes missing from `discovered` leave placement. Records the run on the cluster row and, when
    anything changed, one audit event that says what.
    """
    cluster = Cluster.objects.select_for_update().get(pk=cluster.pk)
    dra_nodes = sorted(node.name for node in discovered if node.dra_mig_gpus)
    if cluster.dra_found != bool(dra_nodes):
        Cluster.objects.filter(pk=cluster.pk).update(dra_found=bool(dra_nodes))
        cluster.dra_found = bool(dra_nodes)
    if cluster.effective_mig_mode != Cluster.MigMode.DYNAMIC:
        # MIG through the MIG manager: which GPUs run MIG comes from its labels, not the DRA driver.
        discovered = [dataclasses.replace(node, dra_mig_gpus=None) for node in discovered]
    # Placements lock their GPU type before the nodes they cut slices on, in whatever order they
    # place; taking the cluster's GPU types first (in id order) keeps discovery's node writes
    # out of their way instead of deadlocking with a placement over two nodes.
    list(
        GpuType.objects.select_for_update()
        .filter(pk__in=Node.objects.filter(cluster=cluster).values("gpu_type_id"))
        .order_by("pk")
    )
    result = SyncResult(cluster=cluster.name, dra_nodes=dra_nodes)
    by_name = {node.name: node for node in discovered}
    existing = {node.name: node for node in Node.objects.filter(cluster=cluster)}
    for name in sorted(by_name):
        _sync_node(cluster, existing.get(name), by_name[name], result, now)
    for name in sorted(set(existing) - set(by_name)):
        node = existing[name]
        if _hold(node, f"not in the cluster since {now:%Y-%m-%d %H:%M} UTC"):
            node.save(update_fields=["schedulable", "labels"])
            result.nodes_gone.append(name)
    Cluster.objects.filter(pk=cluster.pk).update(last_discovery_at=now, last_discovery_error="")
    cluster.last_discovery_at, cluster.last_discovery_error = now, ""
    if result.changed:
        audit_record(actor=None, action="cluster.discovered", obj=cluster, detail=result.summary())
    return result


def fleet_discovery_failed(*, cluster: Cluster, error: str) -> bool:
    """Record that the cluster could not be asked; audited once per distinct error. Returns
    whether the recorded error changed."""
    error = error.strip() or "discovery failed"
    changed = (
        Cluster.objects.filter(pk=cluster.pk)
        .exclude(last_discovery_error=error)
        .update(last_discovery_error=error)
    )
    cluster.last_discovery_error = error
    if changed:
        audit_record(actor=None, action="cluster.discovery_failed", obj=cluster, detail=error)
    return bool(changed)


def _gpu_type(slug: str | None, result: SyncResult, now: datetime) -> GpuType | None:
    """The GpuType row of a slug; created (with a price at the model's list price) for a model
    the portal knows but has no row for yet. None for a slug the portal does not know."""
    if not slug:
        return None
    found = GpuType.objects.filter(slug=slug).first()
    if found is not None:
        return found
    model = GPU_MODELS.get(slug)
    if model is None:
        return None
    gpu_type = GpuType.objects.create(
        slug=slug, name=model.name, memory_gb=model.memory_gb, mig_capable=model.mig_capable
    )
    PriceBookEntry.objects.create(
        gpu_type=gpu_type,
        price_per_hour=model.list_price_per_hour,
        effective_from=now,
        note="list price, set when the GPU type was discovered",
    )
    result.gpu_types_added.append(slug)
    return gpu_type


def _hold(node: Node, reason: str) -> bool:
    """Take a node out of placement for `reason`; False when nothing changed. A node an admin
    took out already gets no hold, so discovery never puts it back into placement."""
    labels = dict(node.labels or {})
    current = labels.get(DISCOVERY_HOLD_KEY)
    if not node.schedulable and (current is None or _reason_kind(current) == _reason_kind(reason)):
        return False
    node.schedulable = False
    labels[DISCOVERY_HOLD_KEY] = reason
    node.labels = labels
    return True


def _reason_kind(reason: str) -> str:
    return reason.split(" since ", 1)[0]


def _sync_node(
    cluster: Cluster, node: Node | None, seen: DiscoveredNode, result: SyncResult, now: datetime
) -> None:
    gpu_type = _gpu_type(seen.gpu_type, result, now)
    labels = node_labels(seen)
    if node is None:
        # A node that arrives with a MIG layout of its own keeps it: the portal writes no layout
        # on it (the MIG manager would wipe what is there) until an admin takes it over.
        node = Node(cluster=cluster, name=seen.name, labels={}, mig_managed=not has_foreign_layout(seen))
        result.nodes_added.append(seen.name)
        if not node.mig_managed:
            result.unmanaged.append(seen.name)
        created = True
    else:
        created = False
    before = tuple(getattr(node, field) for field in SYNCED_NODE_FIELDS)
    hold = (node.labels or {}).get(DISCOVERY_HOLD_KEY)
    node.gpu_type = gpu_type
    node.product = seen.product[:100]
    node.unknown_product = gpu_type is None
    node.mig_config_state = seen.mig_config_state[:20]
    node.labels = {**labels, DISCOVERY_HOLD_KEY: hold} if hold else labels
    if gpu_type is None:
        result.unknown[seen.name] = seen.product
        _hold(node, f"unknown GPU product {seen.product}")
    elif hold:
        node.schedulable = True  # back in the cluster, known again: discovery's hold ends
        node.labels = labels
    after = tuple(getattr(node, field) for field in SYNCED_NODE_FIELDS)
    if created:
        node.save()
    elif after != before:
        # Only what discovery owns: the MIG layout job's fields change under it (placements bump
        # the wanted layout meanwhile), and a whole-row save would undo that.
        node.save(update_fields=[*SYNCED_NODE_FIELDS])
        result.nodes_updated.append(seen.name)
    if gpu_type is not None:
        _sync_gpus(cluster, node, gpu_type, seen, result)
        if not node.mig_managed and seen.mig_strategy == "mixed":
            _import_layout(node, gpu_type, seen, result)


def _sync_gpus(
    cluster: Cluster, node: Node, gpu_type: GpuType, seen: DiscoveredNode, result: SyncResult
) -> None:
    """GPU rows 0..count-1 of the discovered type with the MIG mode the cluster reports."""
    gpus = {gpu.index: gpu for gpu in Gpu.objects.filter(node=node)}
    target = mig_gpu_count(seen)
    count = seen.gpu_count
    for index in range(count):
        reported = seen.gpu_uuids.get(index)
        if index not in gpus:
            gpus[index] = Gpu.objects.create(
                node=node,
                index=index,
                gpu_type=gpu_type,
                mig_enabled=target == count and count > 0,
                uuid=reported or gpu_uuid(cluster=cluster.name, node=node.name, index=index),
            )
            result.gpus_added.append(f"{node.name}/{index}")
        elif reported and gpus[index].uuid != reported:
            # The UUID a DRA claim is pinned to: the GPU's own, once the cluster reports it.
            Gpu.objects.filter(pk=gpus[index].pk).update(uuid=reported)
            gpus[index].uuid = reported
            if node.name not in result.nodes_updated:
                result.nodes_updated.append(node.name)
        elif gpus[index].gpu_type_id != gpu_type.pk:
            Gpu.objects.filter(pk=gpus[index].pk).update(gpu_type=gpu_type)
            if node.name not in result.nodes_updated:
                result.nodes_updated.append(node.name)
    if count > 0:  # a node that reports no count tells nothing about which GPUs are gone
        for index in sorted(i for i in gpus if i >= count):
            gpu = gpus.pop(index)
            if Allocation.objects.filter(gpu=gpu).exists():
                result.stale_gpus.append(f"{node.name}/{index}")
            else:
                gpu.delete()
                result.gpus_removed.append(f"{node.name}/{index}")
    if target is not None:
        _sync_mig_modes(node, [gpus[i] for i in sorted(gpus)], target, result)


def _import_layout(node: Node, gpu_type: GpuType, seen: DiscoveredNode, result: SyncResult) -> None:
    """Take the slices a node arrived with in as free slices, so requests can use them without
    anything being re-partitioned; once, while the node has no slices on record.

    Under the mixed strategy the device plugin advertises `nvidia.com/mig-<profile>` per node,
    not per GPU (and mig-parted configs give counts, not places): the counts are shared out over
    the MIG GPUs evenly where they divide (the `all-*` configs), else as they fit, each GPU's
    slices at the first starts the geometry allows. Which GPU holds which slice is the portal's
    bookkeeping; the kubelet picks the device.
    """
    model = gpu_type.model
    gpus = list(Gpu.objects.filter(node=node, mig_enabled=True).order_by("index"))
    if model is None or not gpus or MigSlice.objects.filter(gpu__in=gpus).exists():
        return
    counts: dict[str, int] = {}
    for resource, amount in seen.allocatable.items():
        if resource.startswith(MIG_RESOURCE_PREFIX) and amount > 0:
            name = resource.removeprefix(MIG_RESOURCE_PREFIX)
            name = f"{name.removesuffix('.me')}+me" if name.endswith(".me") else name
            if model.profile(name) is not None:
                counts[name] = amount
    layouts = split_layouts(model, counts, len(gpus))
    for gpu, layout in zip(gpus, layouts, strict=True):
        for profile, start in layout:
            shape = model.profile(profile)
            assert shape is not None
            MigSlice.objects.create(
                gpu=gpu, profile=profile, start=start, size=shape.size, compute_slices=shape.compute_slices
            )
    taken = {}
    for layout in layouts:
        for profile, _ in layout:
            taken[profile] = taken.get(profile, 0) + 1
    if taken:
        result.imported.append(f"{node.name}: " + ", ".join(f"{n} x {p}" for p, n in sorted(taken.items())))


def split_layouts(model: GpuModel, counts: dict[str, int], gpus: int) -> list[list[tuple[str, int]]]:
    """Per GPU, (profile, start) slices that together hold `counts` (as many as fit)."""
    if gpus and all(n % gpus == 0 for n in counts.values()):
        share = {profile: n // gpus for profile, n in counts.items()}
        one = _pack(
            model, [], [p for p, n in sorted(share.items(), key=_biggest_first(model)) for _ in range(n)]
        )
        return [list(one) for _ in range(gpus)]
    layouts: list[list[tuple[str, int]]] = [[] for _ in range(gpus)]
    for profile, n in sorted(counts.items(), key=_biggest_first(model)):
        for _ in range(n):
            for layout in layouts:
                packed = _pack(model, layout, [profile])
                if len(packed) > len(layout):
                    layout[:] = packed
                    break
    return layouts


def _biggest_first(model: GpuModel):
    return lambda item: (-model.profile(item[0]).size, item[0])  # type: ignore[union-attr]


def _pack(model: GpuModel, layout: list[tuple[str, int]], profiles: list[str]) -> list[tuple[str, int]]:
    """`layout` plus as many of `profiles` (in order) as fit beside it: a search over the legal
    starts, so `2g, 1g, 1g, 3g` find the one arrangement that holds them all."""

    def fits_beside(placed: list[tuple[str, int]], profile: str, start: int) -> bool:
        shape = model.profile(profile)
        assert shape is not None
        names = [name for name, _ in placed]
        if names.count(profile) >= shape.max_count or (shape.media and any(n.endswith("+me") for n in names)):
            return False
        ranges = [(at, model.profile(name).size) for name, at in placed]  # type: ignore[union-attr]
        return start + shape.size <= MEMORY_SLOTS and fits(ranges, shape, start)

    def search(placed: list[tuple[str, int]], rest: list[str]) -> list[tuple[str, int]] | None:
        if not rest:
            return placed
        shape = model.profile(rest[0])
        for start in shape.starts if shape else ():
            if fits_beside(placed, rest[0], start):
                found = search([*placed, (rest[0], start)], rest[1:])
                if found is not None:
                    return found
        return None

    wanted = [p for p in profiles if model.profile(p) is not None]
    while wanted:
        found = search(list(layout), wanted)
        if found is not None:
            return sorted(found, key=lambda item: item[1])
        wanted = wanted[:-1]  # the smallest last: drop it and try again
    return sorted(layout, key=lambda item: item[1])


def _sync_mig_modes(node: Node, gpus: list[Gpu], target: int, result: SyncResult) -> None:
    """Flip MIG mode on as few GPUs as it takes to have `target` in MIG mode, highest index
    first, never on a GPU that something holds now."""
    held = set(
        Allocation.objects.filter(gpu__in=gpus, released_at__isnull=True).values_list("gpu_id", flat=True)
    )
    in_mig = sum(1 for gpu in gpus if gpu.mig_enabled)
    turn_on = target > in_mig
    for gpu in reversed(gpus):
        if in_mig == target:
            break
        if gpu.mig_enabled == turn_on or gpu.pk in held:
            continue
        Gpu.objects.filter(pk=gpu.pk).update(mig_enabled=turn_on)
        if not turn_on:
            MigSlice.objects.filter(gpu=gpu).delete()  # unheld: its slices are gone with MIG mode
        gpu.mig_enabled = turn_on
        in_mig += 1 if turn_on else -1
        result.mig_changed.append(f"{node.name}/{gpu.index}: {'on' if turn_on else 'off'}")
