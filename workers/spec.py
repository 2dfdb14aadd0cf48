"""What a workload should be on a cluster, as plain data: the reconciler builds it from the
portal's rows, the manifest builders turn it into objects, and the drivers apply those."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal


@dataclass(frozen=True)
class GpuClaim:
    """The GPU part of a workload: a resource name and a count, pinned to a node.

    Whole GPUs: resource "nvidia.com/gpu", count N, gpu_indices the placed GPUs.
    A MIG slice: resource "nvidia.com/mig-<profile>", count 1, gpu_indices (gpu,), mig_start set.
    On a "dynamic" cluster `dra_parent_uuid` is the placed GPU's UUID: the slice is claimed
    through NVIDIA's DRA driver (a ResourceClaim pinned to that GPU), not the device plugin.
    """

    resource: str
    count: int
    node: str
    gpu_indices: tuple[int, ...]
    mig_profile: str | None = None
    mig_start: int | None = None
    dra_parent_uuid: str = ""


@dataclass(frozen=True)
class ServingSpec:
    """A model serving deployment: one pinned replica per placement, behind one Service."""

    model: str  # the catalog slug
    image: str
    command: tuple[str, ...]
    port: int
    health_path: str
    readiness_path: str
    api: str  # "openai", "kserve-v2"
    replicas: tuple[GpuClaim, ...]
    # The team's Hugging Face token for gated models ("" for none): a Secret in the namespace, the
    # servers' HF_TOKEN. Never logged: the spec's repr leaves it out.
    hf_token: str = field(default="", repr=False)
    runtime: str = ""  # the catalog runtime's slug: "vllm", "tgi", "triton"
    task: str = ""  # the catalog model's task: "text-generation", "embedding", "image-classification"


@dataclass(frozen=True)
class HomeVolume:
    """The owner's persistent home, mounted at /home through the namespace's claim `home`:
    `volume_name` is its PersistentVolume once one exists (the claim is bound to it), empty for
    a home the cluster has yet to provision; a new claim on an existing volume asks for
    `provisioned_gb` (what the volume has), and is grown to `size_gb` once bound."""

    size_gb: int
    provisioned_gb: int = 0
    volume_name: str = ""
    owner: str = ""  # whose home: a label on the volume


@dataclass(frozen=True)
class DatasetMount:
    """A team dataset the sandbox mounts read-only at /data/<slug>: an NFS export (through the
    NFS CSI driver), a bucket (through its CSI driver, credentials copied from the datasets'
    namespace), or an existing claim (its volume made readable in the sandbox's namespace)."""

    slug: str
    kind: Literal["nfs", "bucket", "pvc"]
    nfs_server: str = ""
    nfs_path: str = ""
    csi_driver: str = ""
    bucket: str = ""
    volume_attributes: tuple[tuple[str, str], ...] = ()
    credentials_secret: str = ""
    claim_namespace: str = ""
    claim_name: str = ""


@dataclass(frozen=True)
class WorkloadSpec:
    """One workload on one cluster: its namespace, container, resources and GPU claim."""

    workload_id: int
    name: str
    team: str
    owner: str
    namespace: str
    image: str  # container image reference
    image_kind: Literal["jupyter", "vscode", "shell"]
    cpu: int
    memory_gb: int
    storage_gb: int
    gpu: GpuClaim
    expires_at: datetime
    access_host: str  # the host users reach it at, from the portal's access path
    user_identity: str = ""  # the user's cluster identity for a RoleBinding, when configured
    labels: dict[str, str] = field(default_factory=dict)
    # Set for a model serving deployment: then `gpu` is the first replica's claim, `image` the
    # runtime's, and the workload is one Deployment per replica instead of a StatefulSet.
    serving: ServingSpec | None = None
    # A sandbox's persistent home; None: a scratch /home that goes with the sandbox.
    home: HomeVolume | None = None
    datasets: tuple[DatasetMount, ...] = ()
    # A shell sandbox's owner's SSH public keys (authorized_keys lines), kept current while it runs.
    ssh_keys: tuple[str, ...] = ()
    # A shell sandbox's ssh server's private host key (OpenSSH's format), the same for its life.
    ssh_host_key: str = field(default="", repr=False)
