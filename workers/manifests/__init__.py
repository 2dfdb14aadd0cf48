"""Manifest builders: pure functions from a WorkloadSpec to Kubernetes objects as plain dicts.

Both cluster drivers call `workload_objects`: the Kubernetes driver applies the result, the
simulated one stores it. Nothing here touches the network, the ORM or the clock.
"""

from __future__ import annotations

from workers.manifests.claims import claim_name, resource_claim_manifest, uses_dra
from workers.manifests.kubectl import kubectl_objects
from workers.manifests.names import (
    MANAGED_BY,
    MANAGED_BY_KEY,
    POD_NAME,
    ROLE_BINDING_NAME,
    SANDBOX_ID_KEY,
    WORKLOAD_NAME,
    label_value,
    mig_resource_name,
    selector_labels,
    workload_labels,
    workload_namespace_name,
)
from workers.manifests.namespace import namespace_manifest, role_binding_manifest
from workers.manifests.options import AccessPath, ManifestOptions
from workers.manifests.policy import (
    check_spec,
    limit_range_manifest,
    network_policy_manifest,
    quota_hard,
    resource_quota_manifest,
)
from workers.manifests.route import route_objects
from workers.manifests.serving import serving_access, serving_workload_objects
from workers.manifests.workload import (
    home_claim_manifest,
    sandbox_access,
    service_manifest,
    ssh_host_key_secret,
    ssh_keys_secret,
    stateful_set_manifest,
)
from workers.spec import WorkloadSpec

__all__ = [
    "MANAGED_BY",
    "MANAGED_BY_KEY",
    "POD_NAME",
    "ROLE_BINDING_NAME",
    "SANDBOX_ID_KEY",
    "WORKLOAD_NAME",
    "AccessPath",
    "ManifestOptions",
    "access_objects",
    "label_value",
    "limit_range_manifest",
    "mig_resource_name",
    "namespace_manifest",
    "network_policy_manifest",
    "quota_hard",
    "resource_quota_manifest",
    "role_binding_manifest",
    "sandbox_access",
    "selector_labels",
    "service_manifest",
    "serving_access",
    "serving_workload_objects",
    "stateful_set_manifest",
    "workload_labels",
    "workload_namespace_name",
    "workload_objects",
]


def access_objects(spec: WorkloadSpec, options: ManifestOptions | None = None) -> list[dict]:
    """What its users reach a running workload through, which may change while it runs without
    touching its pods: its quota (first: a route may need room for the Service of the portal's
    check), its route, the binding of its owner's cluster identity, and an ssh sandbox's
    owner's keys and its host key (last)."""
    options = options or ManifestOptions()
    objects = [resource_quota_manifest(spec), *route_objects(spec, options.route)]
    role_binding = role_binding_manifest(spec, options)
    if role_binding is not None:
        objects.append(role_binding)
    if spec.serving is None and spec.image_kind == "shell":
        objects.extend([ssh_keys_secret(spec), ssh_host_key_secret(spec)])
    return objects


def workload_objects(spec: WorkloadSpec, options: ManifestOptions | None = None) -> list[dict]:
    """Every object a workload needs, in the order they are applied.

    Namespace first (everything lives in it), then the quota and limits (so the pod is admitted
    against them), the network policy and owner binding, and the workload last: a StatefulSet
    (after its Service and route) for a sandbox; for a model serving deployment its Service, one
    Deployment per replica and its endpoint's route.
    Raises ValueError for a spec no cluster could honour.
    """
    options = options or ManifestOptions()
    check_spec(spec)
    objects = [
        namespace_manifest(spec, options),
        resource_quota_manifest(spec),
        limit_range_manifest(spec),
        network_policy_manifest(spec, options.access_path, options.egress),
    ]
    role_binding = role_binding_manifest(spec, options)
    if role_binding is not None:
        objects.append(role_binding)
    if spec.serving is not None:
        objects.extend(serving_workload_objects(spec, options))
        objects.extend(route_objects(spec, options.route))
        return objects
    objects.extend(kubectl_objects(spec, options))
    if spec.image_kind == "shell":
        objects.extend([ssh_keys_secret(spec), ssh_host_key_secret(spec)])
    objects.append(service_manifest(spec))
    objects.extend(route_objects(spec, options.route))
    if uses_dra(spec.gpu):
        objects.append(resource_claim_manifest(spec, spec.gpu, claim_name()))
    if spec.home is not None:
        objects.append(home_claim_manifest(spec, options))
    objects.append(stateful_set_manifest(spec, options))
    return objects
