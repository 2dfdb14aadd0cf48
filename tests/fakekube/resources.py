"""The kinds the fake API server serves, and how a request path names one of them."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote


@dataclass(frozen=True)
class Resource:
    plural: str
    kind: str
    group: str  # "" for the core group
    version: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified_kind(self) -> str:
        """How the API server names the kind in messages: `StatefulSet.apps`, `Pod`."""
        return f"{self.kind}.{self.group}" if self.group else self.kind


RESOURCES: tuple[Resource, ...] = (
    Resource("namespaces", "Namespace", "", "v1", namespaced=False),
    Resource("nodes", "Node", "", "v1", namespaced=False),
    Resource("pods", "Pod", "", "v1"),
    Resource("services", "Service", "", "v1"),
    Resource("configmaps", "ConfigMap", "", "v1"),
    Resource("secrets", "Secret", "", "v1"),
    Resource("serviceaccounts", "ServiceAccount", "", "v1"),
    Resource("events", "Event", "", "v1"),
    Resource("resourcequotas", "ResourceQuota", "", "v1"),
    Resource("limitranges", "LimitRange", "", "v1"),
    Resource("persistentvolumeclaims", "PersistentVolumeClaim", "", "v1"),
    Resource("persistentvolumes", "PersistentVolume", "", "v1", namespaced=False),
    Resource("statefulsets", "StatefulSet", "apps", "v1"),
    Resource("deployments", "Deployment", "apps", "v1"),
    Resource("networkpolicies", "NetworkPolicy", "networking.k8s.io", "v1"),
    Resource("ingresses", "Ingress", "networking.k8s.io", "v1"),
    Resource("httproutes", "HTTPRoute", "gateway.networking.k8s.io", "v1"),
    Resource("rolebindings", "RoleBinding", "rbac.authorization.k8s.io", "v1"),
    Resource("deviceclasses", "DeviceClass", "resource.k8s.io", "v1", namespaced=False),
    Resource("resourceslices", "ResourceSlice", "resource.k8s.io", "v1", namespaced=False),
    Resource("resourceclaims", "ResourceClaim", "resource.k8s.io", "v1"),
)
BY_GROUP_VERSION_PLURAL = {(r.group, r.version, r.plural): r for r in RESOURCES}
BY_KIND = {r.kind: r for r in RESOURCES}
NAMESPACE = BY_KIND["Namespace"]


@dataclass(frozen=True)
class Route:
    """What a request path addresses: a collection (name empty) or one object."""

    resource: Resource
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    proxy_path: str = ""  # for `<name>/proxy/<path>`: the path the request is proxied to


def parse_path(path: str) -> Route | None:
    """`/api/v1/...` and `/apis/<group>/<version>/...` paths; None for anything else."""
    parts = [part for part in path.split("/") if part]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    # /namespaces/<ns>/<plural>/...: a namespaced resource (but /namespaces/<ns>/status is the
    # namespace's own subresource).
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    proxy_path = ""
    if len(rest) > 3 and rest[2] == "proxy":  # <plural>/<name>[:<port>]/proxy/<path...>
        proxy_path, rest = "/".join(unquote(part) for part in rest[3:]), rest[:3]
    if not rest or len(rest) > 3:
        return None
    resource = BY_GROUP_VERSION_PLURAL.get((group, version, rest[0]))
    if resource is None:
        return None
    name = unquote(rest[1]) if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    return Route(resource, namespace, name, subresource, proxy_path)
