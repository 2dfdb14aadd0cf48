"""A model serving deployment's workload: one Deployment per placed replica, each pinned to its
node with its GPU claim, behind one Service. The namespace, quota, limits, network policy and
owner binding are the sandbox builders' (the quota counts every replica).

Why one single-replica Deployment per replica rather than one Deployment of N: the portal
places each replica itself (whole GPUs on one node, or a MIG slice), so each pod is pinned to a
different node; a controller per replica still brings its pod back after an eviction or a MIG
reconfiguration. `Recreate` keeps a restart from briefly asking for a second GPU the quota and
the placement do not have.
"""

from __future__ import annotations

import base64

from workers.manifests.claims import claim_name, claim_pod_spec, resource_claim_manifest, uses_dra
from workers.manifests.names import NAME_KEY, SANDBOX_ID_KEY, object_meta, workload_labels
from workers.manifests.options import ManifestOptions
from workers.manifests.pods import (
    container_security_context,
    pinned_pod_spec,
    shm_mount,
    shm_volume,
    tolerate_gpu_taint,
)
from workers.manifests.policy import cpu_quantity, gib_quantity
from workers.spec import GpuClaim, ServingSpec, WorkloadSpec

SERVICE_NAME = "model"
REPLICA_KEY = "gpu-portal/replica"
CACHE = "/cache"
# Loading tens of GB of weights takes minutes: the startup probe allows up to 30 of them.
STARTUP_PERIOD_SECONDS = 10
STARTUP_FAILURES = 180


def replica_name(index: int) -> str:
    return f"serve-{index}"


def serving_selector(spec: WorkloadSpec) -> dict[str, str]:
    """Every replica's pods (the Service's selector, status look-ups)."""
    return {NAME_KEY: SERVICE_NAME, SANDBOX_ID_KEY: str(spec.workload_id)}


def serving_access(spec: WorkloadSpec) -> str:
    """The endpoint clients call (through the portal's access path)."""
    return f"https://{spec.access_host.rstrip('/')}"


def serving_service_manifest(spec: WorkloadSpec) -> dict:
    assert spec.serving is not None
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(spec, SERVICE_NAME),
        "spec": {
            "type": "ClusterIP",
            "selector": serving_selector(spec),
            "ports": [{"name": "http", "port": spec.serving.port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def _probe(path: str, **timing: int) -> dict:
    return {"httpGet": {"path": path, "port": "http"}, **timing}


def replica_deployment_manifest(
    spec: WorkloadSpec, index: int, claim: GpuClaim, options: ManifestOptions | None = None
) -> dict:
    """One replica: the runtime's container with its GPU claim, pinned to the placed node."""
    assert spec.serving is not None
    options = options or ManifestOptions()
    serving = spec.serving
    amounts = {
        "cpu": cpu_quantity(spec.cpu),
        "memory": gib_quantity(spec.memory_gb),
        # the model cache is an emptyDir on the node's disk: ask for it, so the pod lands where it fits
        "ephemeral-storage": gib_quantity(spec.storage_gb),
    }
    if not uses_dra(claim):
        amounts[claim.resource] = str(claim.count)
    selector = {**serving_selector(spec), REPLICA_KEY: str(index)}
    pod_spec = pinned_pod_spec(claim.node, options)
    pod_spec.update(
        containers=[
            {
                "name": "server",
                "image": serving.image,
                "imagePullPolicy": "IfNotPresent",
                "command": list(serving.command),
                "env": [
                    {"name": "HOME", "value": CACHE},
                    # The pod's uid has no passwd entry: torch (getpass) and others need a user
                    # name, and a writable cache directory of their own.
                    {"name": "USER", "value": "portal"},
                    {"name": "XDG_CACHE_HOME", "value": f"{CACHE}/.cache"},
                    {"name": "HF_HOME", "value": f"{CACHE}/huggingface"},
                    *hf_token_env(serving),
                    {"name": "GPU_PORTAL_DEPLOYMENT_ID", "value": str(spec.workload_id)},
                ],
                "ports": [{"name": "http", "containerPort": serving.port, "protocol": "TCP"}],
                "startupProbe": _probe(
                    serving.health_path,
                    periodSeconds=STARTUP_PERIOD_SECONDS,
                    failureThreshold=STARTUP_FAILURES,
                ),
                "readinessProbe": _probe(serving.readiness_path, periodSeconds=5, failureThreshold=3),
                "livenessProbe": _probe(serving.health_path, periodSeconds=10, failureThreshold=6),
                "resources": {"requests": dict(amounts), "limits": dict(amounts)},
                "securityContext": container_security_context(),
                "volumeMounts": [{"name": "cache", "mountPath": CACHE}, shm_mount()],
            }
        ],
        volumes=[
            {"name": "cache", "emptyDir": {"sizeLimit": gib_quantity(spec.storage_gb)}},
            shm_volume(spec.memory_gb),
        ],
    )
    if options.model_volume.holds(local_model_repository(spec)):
        mount = {"name": "models", "mountPath": options.model_volume.mount_path, "readOnly": True}
        pod_spec["containers"][0]["volumeMounts"].append(mount)
        pod_spec["volumes"].append({"name": "models", **options.model_volume.source})
    if uses_dra(claim):
        claim_pod_spec(pod_spec, pod_spec["containers"][0], claim_name(index))
    tolerate_gpu_taint(pod_spec, options)
    metadata = object_meta(spec, replica_name(index))
    metadata["annotations"] = {
        "gpu-portal/model": serving.model,
        "gpu-portal/gpu-indices": ",".join(str(i) for i in claim.gpu_indices),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": {**workload_labels(spec), **selector}}, "spec": pod_spec},
        },
    }


def serving_workload_objects(spec: WorkloadSpec, options: ManifestOptions | None = None) -> list[dict]:
    """The Service and one Deployment per replica, each after its slice's ResourceClaim where
    the slice is claimed through DRA."""
    assert spec.serving is not None
    objects = [serving_service_manifest(spec)]
    if spec.serving.hf_token:
        objects.append(hf_token_secret_manifest(spec))
    for index, claim in enumerate(spec.serving.replicas):
        if uses_dra(claim):
            objects.append(resource_claim_manifest(spec, claim, claim_name(index)))
        objects.append(replica_deployment_manifest(spec, index, claim, options))
    return objects


HF_TOKEN_SECRET = "hf-token"  # noqa: S105 (the Secret object's name)


def hf_token_secret_manifest(spec: WorkloadSpec) -> dict:
    """The team's Hugging Face token as a Secret of the deployment's namespace."""
    assert spec.serving is not None
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": object_meta(spec, HF_TOKEN_SECRET),
        "type": "Opaque",
        # `data`, as the API server keeps it, so an unchanged token reads back equal (no patch)
        "data": {"HF_TOKEN": base64.b64encode(spec.serving.hf_token.encode()).decode()},
    }


def hf_token_env(serving: ServingSpec) -> list[dict]:
    """HF_TOKEN from the namespace's Secret, where the team has a token (gated models need it)."""
    if not serving.hf_token:
        return []
    ref = {"name": HF_TOKEN_SECRET, "key": "HF_TOKEN"}
    return [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": ref}}]


def local_model_repository(spec: WorkloadSpec) -> str:
    """A Triton model repository given as a path in the container, or "" (an object store URL)."""
    if spec.serving is None:
        return ""
    for argument in spec.serving.command:
        if argument.startswith("--model-repository=/"):
            return argument.split("=", 1)[1]
    return ""


def redacted(objects: list[dict]) -> list[dict]:
    """The objects with every Secret's values replaced: for printing and storing, never applying."""
    shown = []
    for obj in objects:
        if obj.get("kind") == "Secret":
            obj = {**obj, "data": {key: "<redacted>" for key in obj.get("data") or {}}}
        shown.append(obj)
    return shown


TRITON_METRICS_PORT = 8002  # tritonserver's default --metrics-port
METRICS_PATH = "metrics"


def _flag_value(command: tuple[str, ...], flag: str) -> str | None:
    """The value of `--flag value` or `--flag=value` in a command line, or None."""
    for index, argument in enumerate(command):
        if argument == flag and index + 1 < len(command):
            return command[index + 1]
        if argument.startswith(f"{flag}="):
            return argument.split("=", 1)[1]
    return None


def runtime_metrics_port(serving: ServingSpec) -> int:
    """The container port where the runtime answers `/metrics` (Prometheus text): vLLM and TGI on
    their API port, Triton on its metrics port (8002 unless the command names another); a
    `--metrics-port` or `--prometheus-port` in the command wins."""
    for flag in ("--metrics-port", "--prometheus-port"):
        value = _flag_value(serving.command, flag)
        if value and value.isdigit():
            return int(value)
    triton = serving.runtime == "triton" or (serving.command[:1] == ("tritonserver",))
    return TRITON_METRICS_PORT if triton else serving.port
