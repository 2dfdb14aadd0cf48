"""The fleet page as data: every node's GPUs as bars of eight memory slots, and capacity per type."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from portal.fleet.geometry import MEMORY_SLOTS
from portal.fleet.models import Allocation, Cluster, Gpu, GpuType, Node
from portal.fleet.selectors import capacity_by_type, current_prices, fleet_gpus


@dataclass(frozen=True)
class Holder:
    """Who holds a GPU or slice: a sandbox and its owner; `ending` once billing stopped."""

    workload_id: int | None
    sandbox_name: str
    owner: str
    ending: bool
    url: str = ""  # the sandbox's or deployment's page


@dataclass(frozen=True)
class SliceCell:
    profile: str
    start: int
    size: int
    state: str
    holder: Holder | None

    @property
    def column(self) -> int:
        return self.start + 1


@dataclass
class GpuBar:
    gpu: Gpu
    whole_holder: Holder | None = None
    slices: list[SliceCell] = field(default_factory=list)

    @property
    def slots(self) -> range:
        return range(1, MEMORY_SLOTS + 1)

    @property
    def free_slots(self) -> int:
        if not self.gpu.mig_enabled:
            return 0 if self.whole_holder else MEMORY_SLOTS
        return MEMORY_SLOTS - sum(cell.size for cell in self.slices)


@dataclass
class NodeBoard:
    node: Node
    gpus: list[GpuBar] = field(default_factory=list)

    @property
    def gpu_type_name(self) -> str:
        """From the node's GPUs, which come with their type (the node's own type is not fetched)."""
        return self.gpus[0].gpu.gpu_type.name if self.gpus else "no GPUs"


def _holder(allocation: Allocation, owners: dict[int, str]) -> Holder:
    sandbox = allocation.workload
    return Holder(
        workload_id=sandbox.pk if sandbox else None,
        sandbox_name=sandbox.name if sandbox else "",
        owner=sandbox.owner.username if sandbox else owners.get(allocation.user_id, ""),
        ending=allocation.ended_at is not None,
        url=sandbox.get_absolute_url() if sandbox else "",
    )


def fleet_board() -> list[NodeBoard]:
    """Nodes in order, each GPU with its whole holder or its slices: a fixed number of queries."""
    gpus = list(fleet_gpus())
    owners: dict[int, str] = {}  # holders' owners come with the selector's select_related
    boards: dict[int, NodeBoard] = {}
    for gpu in gpus:
        board = boards.setdefault(gpu.node_id, NodeBoard(node=gpu.node))
        bar = GpuBar(gpu=gpu)
        whole = next((a for a in gpu.live_holds if not a.mig_profile), None)
        if whole is not None:
            bar.whole_holder = _holder(whole, owners)
        for mig_slice in gpu.mig_slices.all():
            hold = mig_slice.live_holds[0] if mig_slice.live_holds else None
            bar.slices.append(
                SliceCell(
                    profile=mig_slice.profile,
                    start=mig_slice.start,
                    size=mig_slice.size,
                    state=mig_slice.state,
                    holder=_holder(hold, owners) if hold else None,
                )
            )
        board.gpus.append(bar)
    return list(boards.values())


@dataclass(frozen=True)
class TypeSummary:
    gpu_type: GpuType
    price_per_hour: Decimal
    gpus: int
    free_gpus: int
    mig_gpus: int
    free_slices: dict[str, int]


def fleet_capacity() -> list[TypeSummary]:
    """Per GPU type: how many GPUs, how many free whole, and how many GPUs could take each profile."""
    capacity = capacity_by_type()
    prices = current_prices()
    summaries = []
    for gpu_type in GpuType.objects.order_by("name"):
        cap = capacity.get(gpu_type.pk)
        if cap is None or cap.gpus == 0:
            continue
        summaries.append(
            TypeSummary(
                gpu_type=gpu_type,
                price_per_hour=prices.get(gpu_type.pk, Decimal(0)),
                gpus=cap.gpus,
                free_gpus=cap.free_gpus,
                mig_gpus=cap.mig_gpus,
                free_slices={name: n for name, n in cap.free_slices.items() if cap.mig_gpus},
            )
        )
    return summaries


@dataclass(frozen=True)
class ClusterRow:
    cluster: Cluster
    nodes: int
    unknown_nodes: list[Node]


def fleet_clusters() -> list[ClusterRow]:
    """Registered clusters with their node counts, last discovery, and GPU nodes whose product
    the portal does not know (flagged, never placed on): two queries."""
    unknown: dict[int, list[Node]] = {}
    counts: dict[int, int] = {}
    for node in Node.objects.order_by("name"):
        counts[node.cluster_id] = counts.get(node.cluster_id, 0) + 1
        if node.unknown_product:
            unknown.setdefault(node.cluster_id, []).append(node)
    return [
        ClusterRow(
            cluster=cluster, nodes=counts.get(cluster.pk, 0), unknown_nodes=unknown.get(cluster.pk, [])
        )
        for cluster in Cluster.objects.order_by("name")
    ]
