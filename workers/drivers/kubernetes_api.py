"""The Kubernetes API as the driver uses it: one client per cluster, one table of kinds, and the
one place where client exceptions become `DriverError`s.

Calls go through the official client's typed APIs (so bodies are checked client-side too) but
answers are read as plain JSON dicts (`_preload_content=False`): the driver and the manifest
builders speak dicts, and a dict survives fields a newer server adds.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError as ClientValidationError

from workers.drivers.base import ClusterConfig, DriverError

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
DEFAULT_TIMEOUT = (5.0, 30.0)  # seconds: connect, read


@dataclass(frozen=True)
class Kind:
    """One kind of object the driver touches, and where the client keeps its methods."""

    kind: str
    plural: str
    group: str  # "" for the core group
    api: type
    suffix: str  # create_<suffix>, read_<suffix>, list_<suffix>, patch_<suffix>, delete_<suffix>
    namespaced: bool = True


class HttpRouteApi:
    """Gateway API HTTPRoutes (a CRD the typed client does not know) through its custom-objects
    API, under the typed API's method names so `KINDS` can list them like any other kind."""

    GROUP, VERSION, PLURAL = "gateway.networking.k8s.io", "v1", "httproutes"

    def __init__(self, api_client: k8s.ApiClient):
        self._custom = k8s.CustomObjectsApi(api_client)

    def _where(self, namespace: str) -> tuple[str, str, str, str]:
        return self.GROUP, self.VERSION, namespace, self.PLURAL

    def create_namespaced_http_route(self, namespace: str, body: dict, **kwargs: Any) -> Any:
        return self._custom.create_namespaced_custom_object(*self._where(namespace), body, **kwargs)

    def read_namespaced_http_route(self, name: str, namespace: str, **kwargs: Any) -> Any:
        return self._custom.get_namespaced_custom_object(*self._where(namespace), name, **kwargs)

    def patch_namespaced_http_route(self, name: str, namespace: str, body: dict, **kwargs: Any) -> Any:
        return self._custom.patch_namespaced_custom_object(*self._where(namespace), name, body, **kwargs)

    def delete_namespaced_http_route(self, name: str, namespace: str, **kwargs: Any) -> Any:
        return self._custom.delete_namespaced_custom_object(*self._where(namespace), name, **kwargs)

    def list_namespaced_http_route(self, namespace: str, **kwargs: Any) -> Any:
        return self._custom.list_namespaced_custom_object(*self._where(namespace), **kwargs)


KINDS: dict[str, Kind] = {
    kind.kind: kind
    for kind in (
        Kind("Namespace", "namespaces", "", k8s.CoreV1Api, "namespace", namespaced=False),
        Kind("Node", "nodes", "", k8s.CoreV1Api, "node", namespaced=False),
        Kind("ResourceQuota", "resourcequotas", "", k8s.CoreV1Api, "namespaced_resource_quota"),
        Kind("LimitRange", "limitranges", "", k8s.CoreV1Api, "namespaced_limit_range"),
        Kind("Service", "services", "", k8s.CoreV1Api, "namespaced_service"),
        Kind("Pod", "pods", "", k8s.CoreV1Api, "namespaced_pod"),
        Kind("Event", "events", "", k8s.CoreV1Api, "namespaced_event"),
        Kind("ConfigMap", "configmaps", "", k8s.CoreV1Api, "namespaced_config_map"),
        Kind("Secret", "secrets", "", k8s.CoreV1Api, "namespaced_secret"),
        Kind("ServiceAccount", "serviceaccounts", "", k8s.CoreV1Api, "namespaced_service_account"),
        Kind(
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            "",
            k8s.CoreV1Api,
            "namespaced_persistent_volume_claim",
        ),
        Kind(
            "PersistentVolume", "persistentvolumes", "", k8s.CoreV1Api, "persistent_volume", namespaced=False
        ),
        Kind("StatefulSet", "statefulsets", "apps", k8s.AppsV1Api, "namespaced_stateful_set"),
        Kind("Deployment", "deployments", "apps", k8s.AppsV1Api, "namespaced_deployment"),
        Kind(
            "NetworkPolicy",
            "networkpolicies",
            "networking.k8s.io",
            k8s.NetworkingV1Api,
            "namespaced_network_policy",
        ),
        Kind("Ingress", "ingresses", "networking.k8s.io", k8s.NetworkingV1Api, "namespaced_ingress"),
        Kind("HTTPRoute", "httproutes", "gateway.networking.k8s.io", HttpRouteApi, "namespaced_http_route"),
        Kind(
            "RoleBinding",
            "rolebindings",
            "rbac.authorization.k8s.io",
            k8s.RbacAuthorizationV1Api,
            "namespaced_role_binding",
        ),
        Kind(
            "ResourceSlice",
            "resourceslices",
            "resource.k8s.io",
            k8s.ResourceV1Api,
            "resource_slice",
            namespaced=False,
        ),
        Kind(
            "ResourceClaim",
            "resourceclaims",
            "resource.k8s.io",
            k8s.ResourceV1Api,
            "namespaced_resource_claim",
        ),
    )
}


# A pod's log: read as text, from the pod's `log` subresource (RBAC: get on pods/log).
POD_LOG = Kind("PodLog", "pods/log", "", k8s.CoreV1Api, "namespaced_pod_log")
# A pod's HTTP port through the API server's proxy (RBAC: get on pods/proxy): a model server's
# runtime metrics.
POD_PROXY = Kind("PodProxy", "pods/proxy", "", k8s.CoreV1Api, "namespaced_pod_proxy_with_path")
# A ServiceAccount's token (TokenRequest): created at its `token` subresource.
TOKEN_REQUEST = Kind(
    "TokenRequest", "serviceaccounts/token", "", k8s.CoreV1Api, "namespaced_service_account_token"
)


class KubernetesApiError(DriverError):
    """A DriverError that remembers the HTTP status (0 when no answer came back)."""

    def __init__(self, message: str, *, status: int, reason: str = "", retryable: bool = True):
        super().__init__(message, retryable=retryable)
        self.status = status
        self.reason = reason


def _server_message(exc: ApiException) -> str:
    """The `message` of the server's Status body, or whatever text came back."""
    try:
        body = json.loads(exc.body or "")
    except ValueError:
        return (exc.body or exc.reason or "").strip()
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return (exc.reason or "").strip()


def api_error(exc: ApiException, verb: str, plural: str, name: str = "") -> KubernetesApiError:
    """Map an API answer to a DriverError: forbidden and invalid are final, busy and broken retry."""
    status = int(exc.status or 0)
    server = _server_message(exc)
    what = f"{plural}/{name}" if name else plural
    if status in (401, 403):
        if "being terminated" in server:  # creating in a namespace that is still being deleted
            return KubernetesApiError(
                f"cannot {verb} {what} yet: {server}", status=status, reason="NamespaceTerminating"
            )
        return KubernetesApiError(
            f"the portal's service account may not {verb} {plural}: {server}",
            status=status,
            reason="Forbidden",
            retryable=False,
        )
    if status in (400, 422):
        return KubernetesApiError(
            f"the cluster rejected {verb} {what}: {server}", status=status, reason="Invalid", retryable=False
        )
    if status == 404:
        return KubernetesApiError(f"{what} not found", status=status, reason="NotFound", retryable=False)
    if status == 409:
        return KubernetesApiError(f"{what}: {server}", status=status, reason="Conflict")
    if status == 0 or status == 429 or status >= 500:
        return KubernetesApiError(
            f"the Kubernetes API failed to {verb} {what} ({status or 'no answer'}): {server}",
            status=status,
            reason="ServerError",
        )
    return KubernetesApiError(
        f"the Kubernetes API refused to {verb} {what} ({status}): {server}", status=status, retryable=False
    )


def _client_configuration(config: ClusterConfig) -> k8s.Configuration:
    """Where and how to connect: `api_url` (plain URL, tests), in-cluster, or a kubeconfig."""
    configuration = k8s.Configuration()
    try:
        if config.api_url:
            configuration.host = config.api_url.rstrip("/")
        elif config.in_cluster:
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            k8s_config.load_kube_config(
                config_file=config.kubeconfig or None,
                context=config.context or None,
                client_configuration=configuration,
                persist_config=False,
            )
    except (k8s_config.ConfigException, OSError, ValueError) as exc:
        raise DriverError(
            f"cannot load credentials for cluster {config.name}: {exc}", retryable=False
        ) from exc
    # Retry only failed connects (nothing reached the server); everything else is the
    # reconciler's to retry, with its own backoff.
    configuration.retries = urllib3.Retry(total=2, connect=2, read=0, status=0, other=0, backoff_factor=0.2)
    return configuration


# A 429 (API Priority and Fairness) is waited out this many times in one call, each wait the
# server's Retry-After capped at MAX_RETRY_AFTER; then it is the reconciler's, with its back-off.
THROTTLE_ATTEMPTS = 2
MAX_RETRY_AFTER = 5.0  # with about ten calls a pass, a throttled pass stays inside its 60 s lease


def _retry_after(exc: ApiException) -> float | None:
    """Seconds the server asked to wait (its Retry-After header), capped; None without one."""
    headers = exc.headers or {}
    value = headers.get("Retry-After") or headers.get("retry-after")
    try:
        return min(MAX_RETRY_AFTER, max(0.0, float(value))) if value is not None else None
    except ValueError:
        return None


class KubeApi:
    """Typed calls on dicts for the kinds in KINDS; every failure is a KubernetesApiError."""

    def __init__(self, config: ClusterConfig, timeout: tuple[float, float] = DEFAULT_TIMEOUT):
        self.config = config
        self.timeout = timeout
        self._api_client: k8s.ApiClient | None = None
        self._apis: dict[type, Any] = {}
        self.sleep: Callable[[float], None] = time.sleep

    def _api(self, kind: Kind) -> Any:
        # Built on first use, so a cluster with bad credentials fails its jobs, not the import.
        if self._api_client is None:
            self._api_client = k8s.ApiClient(_client_configuration(self.config))
        if kind.api not in self._apis:
            self._apis[kind.api] = kind.api(self._api_client)
        return self._apis[kind.api]

    def _call(
        self,
        verb: str,
        kind: Kind,
        name: str,
        method: str,
        *args: Any,
        text: bool = False,
        timeout: tuple[float, float] | None = None,
        **kwargs: Any,
    ) -> Any:
        call: Callable[..., Any] = getattr(self._api(kind), f"{method}_{kind.suffix}")
        for attempt in range(THROTTLE_ATTEMPTS):
            try:
                response = call(
                    *args, _preload_content=False, _request_timeout=timeout or self.timeout, **kwargs
                )
                data = response.data
                break
            except ApiException as exc:
                wait = _retry_after(exc)
                if exc.status != 429 or wait is None or attempt == THROTTLE_ATTEMPTS - 1:
                    raise api_error(exc, verb, kind.plural, name) from exc
                # API Priority and Fairness (or a proxy) says when to come back: wait, briefly.
                log.info("%s %s/%s throttled; again in %.1f s", verb, kind.plural, name, wait)
                self.sleep(wait)
            except urllib3.exceptions.HTTPError as exc:
                raise KubernetesApiError(
                    f"could not reach the Kubernetes API to {verb} {kind.plural}: {exc}", status=0
                ) from exc
            except ClientValidationError as exc:
                raise KubernetesApiError(
                    f"the client refused {verb} {kind.plural}/{name}: {exc}", status=0, retryable=False
                ) from exc
        log.debug("%s %s/%s on %s", verb, kind.plural, name, self.config.name)
        if text:
            return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else str(data or "")
        return json.loads(data) if data else {}

    @staticmethod
    def _scope(kind: Kind, namespace: str | None) -> tuple[str, ...]:
        if kind.namespaced:
            if not namespace:
                raise ValueError(f"{kind.kind} needs a namespace")
            return (namespace,)
        return ()

    def create(self, obj: dict) -> dict:
        kind = KINDS[obj["kind"]]
        scope = self._scope(kind, obj["metadata"].get("namespace"))
        return self._call("create", kind, obj["metadata"]["name"], "create", *scope, obj)

    def get(self, kind_name: str, name: str, namespace: str | None = None) -> dict | None:
        """The object, or None when it does not exist."""
        kind = KINDS[kind_name]
        try:
            return self._call("get", kind, name, "read", name, *self._scope(kind, namespace))
        except KubernetesApiError as exc:
            if exc.status == 404:
                return None
            raise

    def pod_log(self, name: str, namespace: str, *, tail_lines: int) -> str:
        """The last `tail_lines` lines of the pod's (only) container log; "" where it has none yet."""
        try:
            return self._call("get", POD_LOG, name, "read", name, namespace, text=True, tail_lines=tail_lines)
        except KubernetesApiError as exc:
            if exc.status in (400, 404):  # no pod, or its container has not started
                return ""
            raise

    def pod_proxy_get(
        self, name: str, namespace: str, *, port: int, path: str, timeout: tuple[float, float] | None = None
    ) -> str:
        """GET `path` on the pod's `port` through the API server's proxy, as text."""
        return self._call(
            "get",
            POD_PROXY,
            name,
            "connect_get",
            f"{name}:{port}",
            namespace,
            path,
            text=True,
            timeout=timeout,
        )

    def request_token(self, account: str, namespace: str, *, seconds: int) -> dict:
        """A new token of the ServiceAccount, valid `seconds` (the server may shorten it): the
        TokenRequest as answered, `status.token` and `status.expirationTimestamp` in it."""
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        }
        return self._call("create", TOKEN_REQUEST, account, "create", account, namespace, body)

    def endpoint(self) -> tuple[str, str]:
        """The API server's address as this client reaches it, and the CA it trusts (PEM; "" for none)."""
        if self._api_client is None:
            self._api_client = k8s.ApiClient(_client_configuration(self.config))
        configuration = self._api_client.configuration
        ca = ""
        if configuration.ssl_ca_cert:
            try:
                with open(configuration.ssl_ca_cert, encoding="utf-8") as handle:
                    ca = handle.read()
            except OSError:
                ca = ""
        return str(configuration.host), ca

    def list(self, kind_name: str, namespace: str | None = None, label_selector: str = "") -> list[dict]:
        kind = KINDS[kind_name]
        kwargs = {"label_selector": label_selector} if label_selector else {}
        answer = self._call("list", kind, "", "list", *self._scope(kind, namespace), **kwargs)
        return list(answer.get("items") or [])

    def patch(self, kind_name: str, name: str, body: dict, namespace: str | None = None) -> dict:
        """JSON merge patch: maps merge, lists are replaced, null deletes a key."""
        kind = KINDS[kind_name]
        scope = self._scope(kind, namespace)
        return self._call("patch", kind, name, "patch", name, *scope, body, _content_type=MERGE_PATCH)

    def delete(self, kind_name: str, name: str, namespace: str | None = None) -> bool:
        """Delete in the background; False when there was nothing to delete."""
        kind = KINDS[kind_name]
        try:
            self._call(
                "delete",
                kind,
                name,
                "delete",
                name,
                *self._scope(kind, namespace),
                propagation_policy="Background",
            )
        except KubernetesApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True
