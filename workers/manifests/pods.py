"""Pod pieces every workload kind shares: pinning to the placed node, Pod Security `restricted`
(non-root, no privilege escalation, no capabilities, seccomp RuntimeDefault), shared memory for
data loaders, and the GPU taint toleration. Sandboxes and serving replicas build on these alike.
"""

from __future__ import annotations

from workers.manifests.options import ManifestOptions
from workers.manifests.policy import gib_quantity

SHM_VOLUME = "dshm"
GPU_TAINT_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _seccomp() -> dict:
    return {"type": "RuntimeDefault"}


def node_pin(node: str) -> dict:
    """Affinity to exactly the node named `node`. By the Node object's name (`matchFields` on
    `metadata.name`), not the `kubernetes.io/hostname` label, which can differ from it (cloud
    node names, renamed hosts)."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def pinned_node(pod_spec: dict) -> str | None:
    """The node a pod spec is pinned to by `node_pin`, or its `nodeName` once scheduled."""
    if pod_spec.get("nodeName"):
        return pod_spec["nodeName"]
    terms = (
        pod_spec.get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms")
        or []
    )
    for term in terms:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return field["values"][0]
    return None


def pinned_pod_spec(node: str, options: ManifestOptions, **pod_security: str) -> dict:
    """The head of a pod spec: pinned to `node`, no service account token or service links, run
    as the configured non-root user; `pod_security` adds keys to the pod's securityContext."""
    return {
        "affinity": node_pin(node),
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": options.run_as_user,
            "runAsGroup": options.run_as_group,
            "fsGroup": options.run_as_group,
            **pod_security,
            "seccompProfile": _seccomp(),
        },
    }


def container_security_context() -> dict:
    """A container's securityContext under Pod Security `restricted`."""
    return {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": _seccomp(),
    }


def shm_mount() -> dict:
    return {"name": SHM_VOLUME, "mountPath": "/dev/shm"}


def shm_volume(memory_gb: int) -> dict:
    """Shared memory for data loaders: memory-backed, a quarter of the container's memory, at
    least 1 GiB."""
    return {
        "name": SHM_VOLUME,
        "emptyDir": {"medium": "Memory", "sizeLimit": gib_quantity(max(memory_gb // 4, 1))},
    }


def tolerate_gpu_taint(pod_spec: dict, options: ManifestOptions) -> None:
    """Add the `nvidia.com/gpu:NoSchedule` toleration to `pod_spec` when the options ask for it."""
    if options.tolerate_gpu_taint:
        pod_spec["tolerations"] = [dict(GPU_TAINT_TOLERATION)]
