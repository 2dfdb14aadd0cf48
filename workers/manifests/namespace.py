"""The sandbox's namespace and the owner's RoleBinding in it."""

from __future__ import annotations

from workers.manifests.names import (
    OWNER_KEY,
    ROLE_BINDING_NAME,
    is_dns_label,
    object_meta,
    workload_labels,
)
from workers.manifests.options import ManifestOptions
from workers.spec import WorkloadSpec

RBAC_GROUP = "rbac.authorization.k8s.io"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


def namespace_manifest(spec: WorkloadSpec, options: ManifestOptions | None = None) -> dict:
    """The namespace, labelled as the portal's and with Pod Security admission enforced.

    The level is `restricted` unless options say otherwise (see ManifestOptions for why).
    Annotations keep what labels had to mangle (the owner as typed) and the expiry for operators.
    """
    options = options or ManifestOptions()
    if not is_dns_label(spec.namespace):
        raise ValueError(
            f"namespace {spec.namespace!r} is not a DNS-1123 label (use workload_namespace_name())"
        )
    level = options.pod_security_level
    labels = workload_labels(spec)
    for mode in ("enforce", "audit", "warn"):
        labels[f"pod-security.kubernetes.io/{mode}"] = level
        labels[f"pod-security.kubernetes.io/{mode}-version"] = "latest"
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": spec.namespace,
            "labels": labels,
            "annotations": {
                OWNER_KEY: spec.owner,
                "gpu-portal/sandbox-name": spec.name,
                "gpu-portal/expires-at": spec.expires_at.isoformat(),
            },
        },
    }


def role_binding_subject(identity: str) -> dict:
    """A RoleBinding subject for a cluster identity: a service account when spelled as one,
    otherwise a user as the cluster's authenticator (OIDC, certificates) names them."""
    if identity.startswith(SERVICE_ACCOUNT_PREFIX):
        namespace, _, name = identity.removeprefix(SERVICE_ACCOUNT_PREFIX).partition(":")
        return {"kind": "ServiceAccount", "name": name, "namespace": namespace}
    return {"apiGroup": RBAC_GROUP, "kind": "User", "name": identity}


def role_binding_manifest(spec: WorkloadSpec, options: ManifestOptions | None = None) -> dict | None:
    """Let the owner's own cluster identity use the sandbox (ClusterRole `gpu-portal-sandbox-user`:
    its pod, logs, exec, port-forward; nothing that changes the namespace); None when the portal
    has no cluster identity for them."""
    if not spec.user_identity:
        return None
    options = options or ManifestOptions()
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "RoleBinding",
        "metadata": object_meta(spec, ROLE_BINDING_NAME),
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": options.user_cluster_role},
        "subjects": [role_binding_subject(spec.user_identity)],
    }
