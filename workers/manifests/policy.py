"""What a sandbox namespace may use and who may reach it: ResourceQuota, LimitRange, NetworkPolicy.

The quota is the allocation, exactly: the portal decided what the sandbox holds, and the quota makes
the cluster refuse anything more, whatever the owner later creates in the namespace.
"""

from __future__ import annotations

import ipaddress

from workers.manifests.claims import MIG_DEVICE_QUOTA, uses_dra
from workers.manifests.names import is_qualified_name, object_meta
from workers.manifests.options import PRIVATE_RANGES, PRIVATE_RANGES_V6, AccessPath, SandboxEgress
from workers.spec import WorkloadSpec

WHOLE_GPU_RESOURCE = "nvidia.com/gpu"
QUOTA_NAME = "sandbox-quota"
LIMIT_RANGE_NAME = "sandbox-limits"
NETWORK_POLICY_NAME = "sandbox-access"
JUPYTER_PORT = 8888  # every web app's port (JupyterLab, code-server)
SHELL_PORT = 2222


def check_spec(spec: WorkloadSpec) -> None:
    """Refuse a spec no cluster could honour, before any object is built from it."""
    for field_name in ("cpu", "memory_gb", "storage_gb"):
        if getattr(spec, field_name) < 1:
            raise ValueError(f"{field_name} must be at least 1, got {getattr(spec, field_name)}")
    if spec.gpu.count < 1:
        raise ValueError(f"a GPU claim needs a count of at least 1, got {spec.gpu.count}")
    resource = spec.gpu.resource
    if resource != WHOLE_GPU_RESOURCE and not resource.startswith("nvidia.com/mig-"):
        raise ValueError(f"GPU resource must be nvidia.com/gpu or nvidia.com/mig-<profile>, got {resource!r}")
    if not is_qualified_name(resource):
        raise ValueError(f"{resource!r} is not a valid resource name (use mig_resource_name())")
    if not spec.gpu.node:
        raise ValueError("the GPU claim names no node: place the sandbox first")


def sandbox_port(spec: WorkloadSpec) -> int:
    """The one port users reach: JupyterLab's, the shell server's, or the model server's."""
    if spec.serving is not None:
        return spec.serving.port
    return SHELL_PORT if spec.image_kind == "shell" else JUPYTER_PORT


def cpu_quantity(cores: int) -> str:
    return str(cores)


def gib_quantity(gigabytes: int) -> str:
    return f"{gigabytes}Gi"


def quota_hard(spec: WorkloadSpec) -> dict[str, str]:
    """The namespace's hard limits: CPU, memory, storage, the GPU resource claimed, one pod.

    Extended resources (GPUs, MIG slices) can only be capped on `requests.`; the device plugin
    sets request = limit for them, so that is the whole cap. A MIG sandbox also gets zero whole
    GPUs, so its owner cannot trade the slice for a whole GPU on the side.
    """
    replicas = len(spec.serving.replicas) if spec.serving is not None else 1
    hard = {
        "requests.cpu": cpu_quantity(spec.cpu * replicas),
        "limits.cpu": cpu_quantity(spec.cpu * replicas),
        "requests.memory": gib_quantity(spec.memory_gb * replicas),
        "limits.memory": gib_quantity(spec.memory_gb * replicas),
        "requests.storage": storage_quantity(spec),
        # A serving replica keeps its model cache on an emptyDir: no claims. A sandbox has its
        # /home, and one claim per dataset that is an existing claim's volume.
        "persistentvolumeclaims": "0" if spec.serving is not None else str(1 + len(_claimed_datasets(spec))),
        "pods": str(replicas),
        # the workload's Service, and on a Gateway cluster the ExternalName one of the portal's
        # check in front of its route (a sandbox's sign-in, a deployment's token check)
        "services": "2",
        "services.loadbalancers": "0",
        "services.nodeports": "0",
    }
    if uses_dra(spec.gpu):  # DRA devices are capped by their class, not as an extended resource
        hard[MIG_DEVICE_QUOTA] = str(spec.gpu.count * replicas)
    else:
        hard[f"requests.{spec.gpu.resource}"] = str(spec.gpu.count * replicas)
    if spec.gpu.resource != WHOLE_GPU_RESOURCE:
        hard[f"requests.{WHOLE_GPU_RESOURCE}"] = "0"
    return hard


DATASET_CLAIM_MIB = 1  # what a claim on a dataset's read-only volume asks for: binding, not space


def _claimed_datasets(spec: WorkloadSpec) -> list:
    return [mount for mount in spec.datasets if mount.kind == "pvc"]


def _claim_max_gb(spec: WorkloadSpec) -> int:
    """The largest claim the namespace admits: its /home (the owner's home, however far it has
    grown, or the scratch volume)."""
    return max(spec.storage_gb, spec.home.size_gb if spec.home is not None else 0)


def storage_quantity(spec: WorkloadSpec) -> str:
    """Storage the namespace's claims may ask for: /home (the owner's home at its size, else the
    sandbox's scratch volume) and a token 1 MiB per claimed dataset."""
    home_gib = _claim_max_gb(spec)
    claimed = len(_claimed_datasets(spec))
    return f"{home_gib * 1024 + claimed * DATASET_CLAIM_MIB}Mi" if claimed else gib_quantity(home_gib)


def resource_quota_manifest(spec: WorkloadSpec) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": object_meta(spec, QUOTA_NAME),
        "spec": {"hard": quota_hard(spec)},
    }


def limit_range_manifest(spec: WorkloadSpec) -> dict:
    """Defaults for containers that name no resources (so the quota admits them), capped at the
    allocation; the sandbox's own container names its resources and ignores the defaults."""
    default_cpu = min(spec.cpu, 1)
    default_memory_gb = min(spec.memory_gb, 1)
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": object_meta(spec, LIMIT_RANGE_NAME),
        "spec": {
            "limits": [
                {
                    "type": "Container",
                    "default": {"cpu": cpu_quantity(default_cpu), "memory": gib_quantity(default_memory_gb)},
                    "defaultRequest": {"cpu": "100m", "memory": "256Mi"},
                    "max": {"cpu": cpu_quantity(spec.cpu), "memory": gib_quantity(spec.memory_gb)},
                },
                {"type": "PersistentVolumeClaim", "max": {"storage": gib_quantity(_claim_max_gb(spec))}},
            ]
        },
    }


def network_policy_manifest(
    spec: WorkloadSpec, access_path: AccessPath | None = None, egress: SandboxEgress | None = None
) -> dict:
    """Deny all ingress into the namespace except the access path, and only on the sandbox port;
    deny all egress except DNS to the cluster's resolver and the allowed CIDRs minus the private
    and link-local ranges (no cloud metadata endpoint, no portal database, no other tenants)."""
    access_path = access_path or AccessPath()
    egress = egress or SandboxEgress()
    peer: dict = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": access_path.namespace}}
    }
    if access_path.pod_labels:
        peer["podSelector"] = {"matchLabels": dict(access_path.pod_labels)}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": object_meta(spec, NETWORK_POLICY_NAME),
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [peer], "ports": [{"protocol": "TCP", "port": sandbox_port(spec)}]}],
            "egress": egress_rules(egress),
        },
    }


def egress_rules(egress: SandboxEgress) -> list[dict]:
    dns = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": egress.dns_namespace}},
        "podSelector": {"matchLabels": dict(egress.dns_pod_labels)},
    }
    rules: list[dict] = [
        {"to": [dns], "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}
    ]
    blocks = []
    for cidr in egress.allow:
        private = PRIVATE_RANGES_V6 if ":" in cidr else PRIVATE_RANGES
        inside = [block for block in private if _within(block, cidr)]
        blocks.append({"ipBlock": {"cidr": cidr, **({"except": inside} if inside else {})}})
    if blocks:
        rules.append({"to": blocks})
    return rules


def _within(block: str, cidr: str) -> bool:
    """Whether `block` lies inside `cidr` and is smaller (an `except` must be a strict subset)."""
    inner, outer = ipaddress.ip_network(block), ipaddress.ip_network(cidr)
    return inner.version == outer.version and inner != outer and inner.subnet_of(outer)  # type: ignore[arg-type]
