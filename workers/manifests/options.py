"""Settings the sandbox manifests depend on that are the cluster's, not the sandbox's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class AccessPath:
    """Where users' traffic into sandboxes comes from: the ingress controller or gateway.

    Sandbox NetworkPolicies admit traffic only from pods in this namespace (and, when
    `pod_labels` is set, only pods carrying those labels).
    """

    namespace: str = "ingress-nginx"
    pod_labels: dict[str, str] = field(default_factory=dict)


# Where sandboxes may not reach even with the internet open: private ranges (the cluster's
# services, the portal's PostgreSQL and Redis, other tenants), link-local (the cloud metadata
# endpoint at 169.254.169.254, fd00:ec2::254 inside fc00::/7) and carrier-grade NAT.
PRIVATE_RANGES = (
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "100.64.0.0/10",
    "169.254.0.0/16",
    "127.0.0.0/8",
)
PRIVATE_RANGES_V6 = ("fc00::/7", "fe80::/10", "::1/128")


@dataclass(frozen=True)
class SandboxEgress:
    """Where sandbox pods may open connections: DNS through the cluster's resolver, and the
    `allow` CIDRs minus the private ones (the internet by default: researchers pull packages,
    data sets and models). Everything else is denied."""

    allow: tuple[str, ...] = ("0.0.0.0/0", "::/0")
    dns_namespace: str = "kube-system"
    dns_pod_labels: dict[str, str] = field(default_factory=lambda: {"k8s-app": "kube-dns"})


@dataclass(frozen=True)
class SandboxRoute:
    """How a running sandbox is reached at its host through the cluster's ingress, behind the
    portal's sign-in check (`auth_url`, asked before every request; `signin_url`, where a
    browser without a gate cookie is sent).

    `kind` "ingress": an Ingress of `ingress_class` with ingress-nginx's forward-auth
    annotations; TLS from the controller's default certificate, or from a copy of `tls_secret`. "httproute": a Gateway API
    HTTPRoute on `gateway` ("namespace/name", whose HTTPS listener holds the certificate), with
    the ExternalAuth filter calling the portal through an ExternalName Service in the sandbox's
    namespace (a backend in its own namespace needs no ReferenceGrant)."""

    kind: Literal["ingress", "httproute"] = "ingress"
    ingress_class: str = "nginx"
    gateway: str = "gpu-portal/sandboxes"
    # namespace/name of the wildcard certificate, copied into each sandbox's namespace as
    # TLS_SECRET for its Ingress; empty: the controller's default certificate
    tls_secret: str = ""
    auth_url: str = "http://gpu-portal-web.gpu-portal.svc.cluster.local:8000/auth/sandbox/check"
    signin_url: str = "https://portal.example.internal/auth/sandbox/signin/"


@dataclass(frozen=True)
class ModelVolume:
    """Where model repositories given as a path live: one Kubernetes volume source (an inline CSI
    volume, or an NFS export), mounted read-only at `mount_path` in every serving container
    whose repository lies below it."""

    source: dict = field(default_factory=dict)  # empty: no such volume
    mount_path: str = "/models"

    def holds(self, path: str) -> bool:
        return bool(self.source) and (path == self.mount_path or path.startswith(f"{self.mount_path}/"))


@dataclass(frozen=True)
class ManifestOptions:
    """Per-cluster knobs for the sandbox manifests; the defaults suit a stock GPU Operator cluster.

    `pod_security_level` is `restricted` by default: sandboxes run people's code next to other
    teams' GPUs, and nothing in them needs root, host access or extra capabilities (the device
    plugin hands GPUs to unprivileged containers). `baseline` is there for images that cannot
    run as non-root; it still forbids privileged pods and host namespaces.
    """

    access_path: AccessPath = field(default_factory=AccessPath)
    egress: SandboxEgress = field(default_factory=SandboxEgress)
    storage_class: str = ""  # empty: the cluster's default StorageClass
    pod_security_level: Literal["restricted", "baseline"] = "restricted"
    shell_user: str = ""  # the ssh login name; empty: the sandbox owner's name
    run_as_user: int = 1000
    run_as_group: int = 100
    # What the owner's cluster identity may do in the namespace: use the sandbox (look at its pod,
    # its logs, exec into it, port-forward), not change it (deploy/kubernetes/rbac.yaml).
    user_cluster_role: str = "gpu-portal-sandbox-user"
    tolerate_gpu_taint: bool = True  # tolerate the common `nvidia.com/gpu:NoSchedule` taint
    model_volume: ModelVolume = field(default_factory=ModelVolume)
    route: SandboxRoute = field(default_factory=SandboxRoute)
    nfs_csi_driver: str = "nfs.csi.k8s.io"  # mounts NFS datasets (inline volumes enabled)
