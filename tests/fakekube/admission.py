"""Admission the fake runs on every pod, as the API server's plug-ins would: Pod Security
(`restricted` and `baseline`, from the namespace's `pod-security.kubernetes.io/enforce` label),
LimitRange defaults, then ResourceQuota (requests and limits of cpu, memory and extended
resources such as GPUs, and the pod count). A refusal is the 403 the real server answers, so the
StatefulSet and Deployment controllers turn it into a FailedCreate event."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import TYPE_CHECKING

from tests.fakekube.errors import ApiError

if TYPE_CHECKING:
    from tests.fakekube.store import Store

_SUFFIXES = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}  # fmt: skip
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([a-zA-Z]*)$")
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def quantity(value: object) -> Decimal:
    found = _QUANTITY.match(str(value))
    if found is None or found.group(2) not in _SUFFIXES:
        raise ValueError(f"not a quantity: {value!r}")
    return Decimal(found.group(1)) * Decimal(_SUFFIXES[found.group(2)])


def _forbidden(pod: str, message: str) -> ApiError:
    return ApiError(403, "Forbidden", f'pods "{pod}" is forbidden: {message}', {"name": pod, "kind": "pods"})


def pod_security(namespace: dict, pod: dict) -> None:
    """Pod Security admission for the namespace's enforced level."""
    labels = namespace.get("metadata", {}).get("labels") or {}
    level = labels.get("pod-security.kubernetes.io/enforce", "privileged")
    if level == "privileged":
        return
    spec, name = pod.get("spec") or {}, pod["metadata"]["name"]
    problems = []
    if any(spec.get(key) for key in ("hostNetwork", "hostPID", "hostIPC")):
        problems.append("host namespaces")
    containers = (spec.get("containers") or []) + (spec.get("initContainers") or [])
    for container in containers:
        context = container.get("securityContext") or {}
        if context.get("privileged"):
            problems.append(f'privileged (container "{container["name"]}")')
    if level == "restricted":
        pod_context = spec.get("securityContext") or {}
        for container in containers:
            context = container.get("securityContext") or {}
            who = f'container "{container["name"]}"'
            if context.get("allowPrivilegeEscalation") is not False:
                problems.append(f"allowPrivilegeEscalation != false ({who})")
            if "ALL" not in ((context.get("capabilities") or {}).get("drop") or []):
                problems.append(f"unrestricted capabilities ({who})")
            if not context.get("runAsNonRoot", pod_context.get("runAsNonRoot")):
                problems.append(f"runAsNonRoot != true ({who})")
            seccomp = (context.get("seccompProfile") or pod_context.get("seccompProfile") or {}).get("type")
            if seccomp not in ("RuntimeDefault", "Localhost"):
                problems.append(f"seccompProfile ({who})")
        for volume in spec.get("volumes") or []:
            kinds = set(volume) - {"name"}
            if not kinds <= RESTRICTED_VOLUMES:
                problems.append(f'restricted volume types (volume "{volume["name"]}")')
    if problems:
        raise _forbidden(name, f'violates PodSecurity "{level}:latest": {", ".join(problems)}')


def limit_range_defaults(store: Store, namespace: str, pod: dict) -> None:
    """Fill in the container defaults of the namespace's LimitRanges, as admission does."""
    for limit_range in store.list("limitranges", namespace):
        for item in limit_range.get("spec", {}).get("limits") or []:
            if item.get("type") != "Container":
                continue
            for container in pod.get("spec", {}).get("containers") or []:
                resources = container.setdefault("resources", {})
                for key, defaults in (
                    ("limits", item.get("default")),
                    ("requests", item.get("defaultRequest")),
                ):
                    for resource, amount in (defaults or {}).items():
                        resources.setdefault(key, {}).setdefault(resource, amount)
                for resource, amount in (resources.get("limits") or {}).items():
                    resources.setdefault("requests", {}).setdefault(
                        resource, amount
                    )  # requests default to limits


def _pod_usage(pod: dict) -> dict[str, Decimal]:
    usage: dict[str, Decimal] = {"pods": Decimal(1)}
    for container in pod.get("spec", {}).get("containers") or []:
        resources = container.get("resources") or {}
        for key in ("requests", "limits"):
            for resource, amount in (resources.get(key) or {}).items():
                name = f"{key}.{resource}"
                usage[name] = usage.get(name, Decimal(0)) + quantity(amount)
                if key == "requests" and resource in ("cpu", "memory"):
                    usage[resource] = usage.get(resource, Decimal(0)) + quantity(amount)
    return usage


def resource_quota(store: Store, namespace: str, pod: dict) -> None:
    """Refuse a pod that would take the namespace past a ResourceQuota, or names no amount of a
    resource the quota caps (cpu and memory: `must specify`)."""
    name = pod["metadata"]["name"]
    new = _pod_usage(pod)
    others = [
        p
        for p in store.list("pods", namespace)
        if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    for quota in store.list("resourcequotas", namespace):
        hard = quota.get("spec", {}).get("hard") or {}
        used: dict[str, Decimal] = {}
        for other in others:
            for key, amount in _pod_usage(other).items():
                used[key] = used.get(key, Decimal(0)) + amount
        for key, limit in hard.items():
            if not (key == "pods" or key.startswith(("requests.", "limits.")) or key in ("cpu", "memory")):
                continue  # storage, services and the like are not the pod's
            if key in ("requests.cpu", "limits.cpu", "requests.memory", "limits.memory") and key not in new:
                raise _forbidden(
                    name, f"failed quota: {quota['metadata']['name']}: must specify {key.split('.')[1]}"
                )
            asked = new.get(key, Decimal(0))
            if asked and used.get(key, Decimal(0)) + asked > quantity(limit):
                raise _forbidden(
                    name,
                    f"exceeded quota: {quota['metadata']['name']}, requested: {key}={asked.normalize()}, "
                    f"used: {key}={used.get(key, Decimal(0)).normalize()}, limited: {key}={limit}",
                )


def admit_pod(store: Store, namespace: dict, pod: dict) -> None:
    pod_security(namespace, pod)
    limit_range_defaults(store, namespace["metadata"]["name"], pod)
    resource_quota(store, namespace["metadata"]["name"], pod)
