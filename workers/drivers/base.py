"""The small protocol every cluster driver speaks, and the plain data it speaks in.

Drivers know Kubernetes (or the simulation) and nothing of the ORM: reconcilers load rows, turn
them into these specs, and call the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

from workers.spec import WorkloadSpec


class DriverError(Exception):
    """The cluster refused or failed an operation.

    `retryable` is True for what may pass on a later try (5xx, timeouts, a busy API server) and
    False for what will not (forbidden, invalid objects).
    """

    def __init__(self, message: str, *, retryable: bool = True):
        super().__init__(message)
        self.message = message
        self.retryable = retryable


@dataclass(frozen=True)
class ClusterConfig:
    """What a driver needs to reach one registered cluster."""

    name: str
    driver: Literal["simulated", "kubernetes"] = "simulated"
    kubeconfig: str = ""
    context: str = ""
    in_cluster: bool = False
    api_url: str = ""  # optional override of the API server address (used by tests)
    # How MIG slices are cut: "layouts" through the GPU Operator's MIG manager, "dynamic" by
    # NVIDIA's DRA driver when a claim for the slice is allocated.
    mig_mode: Literal["layouts", "dynamic"] = "layouts"
    # How running sandboxes are routed at their hosts (see workers.manifests.options.SandboxRoute).
    sandbox_route: Literal["ingress", "httproute"] = "ingress"
    ingress_class: str = "nginx"
    gateway: str = "gpu-portal/sandboxes"
    sandbox_tls_secret: str = ""  # namespace/name of a wildcard certificate to copy per sandbox
    # Where people reach the API server with kubectl, and the CA that signs it (PEM), where they
    # differ from what the workers use (an in-cluster address, a private CA file).
    user_api_url: str = ""
    user_ca_data: str = ""


WorkloadPhase = Literal["absent", "pending", "running", "failed", "terminating"]
# How a status message begins when the workload's node has left the cluster (never to run there).
NODE_GONE = "node "


@dataclass(frozen=True)
class WorkloadStatus:
    phase: WorkloadPhase
    message: str = ""
    access: str = ""
    ready_replicas: int = 0


@dataclass(frozen=True)
class EventLine:
    at: str  # ISO time as the cluster gave it
    type: str  # Normal | Warning
    reason: str
    message: str
    object: str = ""  # what the event is about: "Pod/sandbox-0"


@dataclass(frozen=True)
class PodInsight:
    """A workload's recent events (oldest first) and the end of its pod's log."""

    events: tuple[EventLine, ...] = ()
    log_tail: str = ""


@dataclass(frozen=True)
class KubectlToken:
    """What a kubeconfig for a sandbox needs: a token of its ServiceAccount, until when it is
    good, the API server's address and the CA (PEM) that signs it."""

    token: str
    expires_at: datetime
    server: str
    ca_pem: str = ""
    namespace: str = ""
    simulated: bool = False


@dataclass(frozen=True)
class HomeState:
    """A sandbox's home as the cluster has it: its volume once bound, and how big it is."""

    bound: bool
    volume_name: str = ""
    capacity_gb: int = 0
    used_gb: float | None = None  # None: the cluster does not say


@dataclass(frozen=True)
class ManagedNamespace:
    name: str
    workload_id: int | None
    kind: str = "sandbox"


@dataclass(frozen=True)
class ManagedVolume:
    """A cluster-wide volume the portal labelled as its own: a user's home (`home_owner`), or a
    read-only copy of a dataset's volume made for one workload (`workload_id`)."""

    name: str
    workload_id: int | None = None
    home_owner: str = ""
    claim: str = ""  # "namespace/name" of the claim it is bound or reserved to, if any


@dataclass(frozen=True)
class DiscoveredGpuNode:
    name: str
    product: str  # nvidia.com/gpu.product
    gpu_count: int
    gpu_memory_mb: int
    mig_capable: bool
    mig_strategy: str  # none | single | mixed
    mig_config: str  # nvidia.com/mig.config
    mig_config_state: str  # nvidia.com/mig.config.state
    allocatable: dict[str, int] = field(default_factory=dict)
    # From NVIDIA's DRA driver's ResourceSlices, where it runs: GPU index -> UUID, and the GPUs
    # it offers MIG placements on (None where no DRA driver publishes the node).
    gpu_uuids: dict[int, str] = field(default_factory=dict)
    dra_mig_gpus: tuple[int, ...] | None = None


# A MIG layout: GPU index -> list of (profile name, start slot).
MigLayout = dict[int, list[tuple[str, int]]]
MigLayoutState = Literal["pending", "success", "failed"]


class ClusterDriver(Protocol):
    def apply_workload(self, spec: WorkloadSpec) -> None:
        """Create what the workload needs, or patch what exists; safe to repeat."""

    def refresh_access(self, spec: WorkloadSpec) -> bool:
        """Apply again, for a running workload, only what its users reach it through (its route,
        an ssh sandbox's keys: `access_objects`), never its pods; skipped while unchanged since
        this process last applied it, within the driver's re-apply period. True when all of it
        was applied or read from the cluster now; False when some was skipped (this process's
        word that it was fine earlier, which another process's failure since may contradict)."""

    def workload_status(self, spec: WorkloadSpec) -> WorkloadStatus:
        """What the cluster says about the workload now."""

    def delete_workload(self, spec: WorkloadSpec) -> bool:
        """Delete the workload's objects; True once nothing of it remains."""

    def restart_workload(self, spec: WorkloadSpec) -> None:
        """Replace a sandbox's pod: its controller makes a new one on the same node, with the
        same home volume."""

    def workload_insight(self, spec: WorkloadSpec, *, log_lines: int = 100) -> PodInsight:
        """The sandbox's recent events and the last `log_lines` lines of its pod's log."""

    def kubectl_token(self, spec: WorkloadSpec, *, seconds: int) -> KubectlToken:
        """A token of the sandbox's ServiceAccount, good for `seconds` at most."""

    def revoke_kubectl(self, spec: WorkloadSpec) -> None:
        """Void every token of the sandbox's ServiceAccount issued so far, at once."""

    def home_state(self, spec: WorkloadSpec) -> HomeState:
        """The sandbox's home claim: bound to which volume, how big; keeps the volume past the
        sandbox (reclaim policy Retain) and grows the claim to the home's size."""

    def delete_home(self, volume_name: str) -> bool:
        """Delete a home volume no claim holds, with its storage; True once it is gone."""

    def workload_manifests(self, spec: WorkloadSpec) -> list[dict]:
        """The objects apply_workload creates, as plain dicts (for dry runs)."""

    def managed_namespaces(self) -> list[ManagedNamespace]:
        """Every namespace the portal labelled as its own."""

    def managed_volumes(self) -> list[ManagedVolume]:
        """Every PersistentVolume the portal labelled as its own (homes, dataset copies)."""

    def delete_volume(self, volume_name: str) -> bool:
        """Delete a volume object, never its storage (its reclaim policy is left as it is);
        True once it is gone."""

    def discover_gpu_nodes(self) -> list[DiscoveredGpuNode]:
        """GPU nodes as the GPU Operator advertises them."""

    def apply_mig_layout(self, node: str, layout: MigLayout, *, retry: bool = False) -> None:
        """Ask for this MIG layout on the node (all its GPUs); `retry` asks again after the
        cluster reported it failed."""

    def claimed_mig_starts(self, spec: WorkloadSpec) -> dict[int, int]:
        """Where the cluster put each replica's MIG slice (replica -> start slot), where it
        chose the place itself (a slice claimed through DRA); empty where the portal's holds."""

    def mig_layout_state(self, node: str, layout: MigLayout) -> MigLayoutState:
        """How far the node has got towards `layout` (as last given to apply_mig_layout)."""

    def serving_metrics(self, spec: WorkloadSpec) -> dict[str, str | None]:
        """A deployment's runtime metrics (Prometheus text) from each of its replicas, by pod
        name: None for a pod that is there but not ready or did not answer."""
