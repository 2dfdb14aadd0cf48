"""The fake API server's semantics, apart from HTTP: verbs on a Store, with real Status answers.

Supported: create (POST), get and list (labelSelector with =, ==, !=, in, notin, existence;
fieldSelector equality), replace (PUT, resourceVersion precondition), merge patch and strategic
merge patch (both as RFC 7386 merge: lists are replaced, not merged by key, which is all the
driver relies on), delete (a namespace takes its contents with it, at once or, with
`slow_namespace_deletion`, after `finish_namespace_deletions()`). Every object received is checked
with `validation.object_causes` and refused with 422 as a real server would.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

from tests.fakekube import controllers, volumes
from tests.fakekube.admission import admit_pod
from tests.fakekube.errors import ApiError, status_body
from tests.fakekube.resources import NAMESPACE, Resource, Route, parse_path
from tests.fakekube.store import Key, Store, field_selector_matches, label_selector_matches, merge_patch
from tests.fakekube.validation import Cause, object_causes, update_causes

SERVICE_ACCOUNT = "system:serviceaccount:gpu-portal:gpu-portal"
RESET = -1  # a Failure status: drop the connection without answering
TEXT = "__text__"  # an answer body holding only this key is sent as text/plain (a pod's log)
# Kinds whose status only the status subresource (controllers, kubelets) may change.
STATUS_KINDS = frozenset(
    {
        "Namespace",
        "Node",
        "Pod",
        "Service",
        "StatefulSet",
        "Deployment",
        "PersistentVolumeClaim",
        "PersistentVolume",
        "ResourceClaim",
    }
)
VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass
class Recorded:
    """One request as RBAC sees it (verb, API group, resource) plus what came back."""

    method: str
    path: str
    verb: str
    group: str
    resource: str
    namespace: str
    name: str
    content_type: str
    status: int = 0


@dataclass
class Failure:
    """An injected answer for the next matching requests (or a stall before answering)."""

    status: int
    times: int = 1
    method: str | None = None
    path_contains: str | None = None
    message: str = ""
    delay: float = 0.0
    retry_after: int | None = None  # a 429's Retry-After, as API Priority and Fairness sends it

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and (
            self.path_contains is None or self.path_contains in path
        )


def _plural_ref(resource: Resource) -> str:
    return f"{resource.plural}.{resource.group}" if resource.group else resource.plural


def not_found(resource: Resource, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{_plural_ref(resource)} "{name}" not found',
        {"name": name, "kind": resource.plural},
    )


def invalid(resource: Resource, name: str, causes: list[Cause]) -> ApiError:
    text = ", ".join(f"{field}: {message}" for field, message in causes)
    details = {
        "name": name,
        "group": resource.group,
        "kind": resource.kind,
        "causes": [
            {"reason": "FieldValueInvalid", "message": message, "field": field} for field, message in causes
        ],
    }
    return ApiError(422, "Invalid", f'{resource.qualified_kind} "{name}" is invalid: {text}', details)


def list_body(resource: Resource, items: list[dict], version: str) -> dict:
    for item in items:  # a real server leaves kind and apiVersion off list items
        item.pop("kind", None)
        item.pop("apiVersion", None)
    return {
        "kind": f"{resource.kind}List",
        "apiVersion": resource.api_version,
        "metadata": {"resourceVersion": version},
        "items": items,
    }


class FakeApi:
    def __init__(self, store: Store, *, slow_namespace_deletion: bool = False):
        self.store = store
        self.slow_namespace_deletion = slow_namespace_deletion
        self.requests: list[Recorded] = []
        self.failures: list[Failure] = []
        self.pod_created: list[Callable[[dict], None]] = []  # the scheduler's DRA allocation
        self.pod_logs: dict[tuple[str, str], str] = {}  # (namespace, pod) -> its container's log
        # (namespace, pod, port, path) -> what the pod's server answers there (through the proxy)
        self.pod_http: dict[tuple[str, str, int, str], str] = {}
        self.issued_tokens: list[tuple[str, str, int]] = []  # (namespace, account, seconds)
        self._service_ips = iter(range(10, 65000))

    # --- entry point ----------------------------------------------------------------------------

    def handle(self, method: str, raw_path: str, content_type: str, raw_body: bytes) -> tuple[int, dict]:
        url = urlsplit(raw_path)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        route = parse_path(url.path)
        if route is None:
            return 404, status_body(404, "NotFound", "the server could not find the requested resource")
        verb = VERBS.get(method) or ("list" if not route.name else "get")
        record = Recorded(
            method,
            url.path,
            verb,
            route.resource.group,
            f"{route.resource.plural}/{route.subresource}" if route.subresource else route.resource.plural,
            route.namespace,
            route.name,
            content_type,
        )
        self.requests.append(record)
        status, body = self._answer(method, url.path, route, verb, query, content_type, raw_body)
        record.status = status
        return status, body

    def _take_failure(self, method: str, path: str) -> Failure | None:
        with self.store.lock:
            for failure in self.failures:
                if failure.matches(method, path):
                    failure.times -= 1
                    if failure.times <= 0:
                        self.failures.remove(failure)
                    return failure
        return None

    def _answer(
        self, method: str, path: str, route: Route, verb: str, query: dict, content_type: str, raw_body: bytes
    ) -> tuple[int, dict]:
        failure = self._take_failure(method, path)
        if failure is not None:
            time.sleep(failure.delay)
            if failure.status == RESET:
                return RESET, {}
            if failure.status:
                return failure.status, self._failure_body(failure, route, verb)
        try:
            body = json.loads(raw_body) if raw_body else None
        except ValueError:
            return 400, status_body(400, "BadRequest", "the request body is not valid JSON")
        try:
            with self.store.lock:
                return self._dispatch(method, route, query, content_type, body)
        except ApiError as exc:
            return exc.code, exc.body

    def _failure_body(self, failure: Failure, route: Route, verb: str) -> dict:
        resource = route.resource
        if failure.status == 403:
            scope = f'in the namespace "{route.namespace}"' if route.namespace else "at the cluster scope"
            what = f'{resource.plural} "{route.name}"' if route.name else resource.plural
            message = failure.message or (
                f'{what} is forbidden: User "{SERVICE_ACCOUNT}" cannot {verb} resource "{resource.plural}" '
                f'in API group "{resource.group}" {scope}'
            )
            return status_body(403, "Forbidden", message)
        if failure.status == 422:
            return status_body(
                422, "Invalid", failure.message or f'{resource.kind} "{route.name}" is invalid'
            )
        if failure.status == 401:
            return status_body(401, "Unauthorized", failure.message or "Unauthorized")
        if failure.status == 429:
            body = status_body(
                429, "TooManyRequests", failure.message or "too many requests, please try again later"
            )
            if failure.retry_after is not None:
                body["details"] = {"retryAfterSeconds": failure.retry_after}
            return body
        return status_body(
            failure.status, "InternalError", failure.message or "Internal error occurred: etcd timeout"
        )

    def _dispatch(
        self, method: str, route: Route, query: dict, content_type: str, body: object
    ) -> tuple[int, dict]:
        if (route.resource.plural, route.subresource, method) == ("pods", "log", "GET"):
            return 200, {TEXT: self._pod_log(route, query)}
        if (route.resource.plural, route.subresource, method) == ("pods", "proxy", "GET"):
            return 200, {TEXT: self._pod_proxy(route)}
        if (route.resource.plural, route.subresource, method) == ("serviceaccounts", "token", "POST"):
            return 201, self._token_request(route, body)
        if route.subresource:
            raise ApiError(404, "NotFound", f"subresource {route.subresource} is not served by the fake")
        if method == "GET" and not route.name:
            return 200, self._list(route, query)
        if method == "GET":
            return 200, self._get(route)
        if method == "POST" and not route.name:
            return 201, self.create(route.resource, route.namespace, body)
        if method == "PUT" and route.name:
            return 200, self._replace(route, body)
        if method == "PATCH" and route.name:
            return 200, self._patch(route, content_type, body)
        if method == "DELETE" and route.name:
            return 200, self._delete(route)
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on {route.resource.plural}")

    # --- verbs ------------------------------------------------------------------------------------

    def _token_request(self, route: Route, body: object) -> dict:
        """A TokenRequest answered as the API server does: a token of the ServiceAccount, for
        `expirationSeconds` (10 minutes at least)."""
        self._get(route)  # 404 for a ServiceAccount that is not there
        spec = (body or {}).get("spec") or {} if isinstance(body, dict) else {}
        seconds = int(spec.get("expirationSeconds") or 3600)
        if seconds < 600:
            raise ApiError(
                422,
                "Invalid",
                "spec.expirationSeconds: Invalid value: may not specify a duration less than 10 minutes",
            )
        expires = datetime.now(UTC) + timedelta(seconds=seconds)
        self.issued_tokens.append((route.namespace, route.name, seconds))
        return {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "metadata": {"name": route.name, "namespace": route.namespace},
            "spec": {"expirationSeconds": seconds, "audiences": ["https://kubernetes.default.svc"]},
            "status": {
                "token": f"fake-token.{route.namespace}.{route.name}.{len(self.issued_tokens)}",
                "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
        }

    def _pod_log(self, route: Route, query: dict) -> str:
        """What the kubelet would return of the pod's container log: its last `tailLines` lines."""
        self._get(route)  # 404 for a pod that is not there
        lines = self.pod_logs.get((route.namespace, route.name), "").splitlines(keepends=True)
        tail = int(query.get("tailLines") or 0)
        return "".join(lines[-tail:] if tail else lines)

    def _pod_proxy(self, route: Route) -> str:
        """What the API server's proxy returns from `<pod>:<port>/<path>`: the pod's answer, or a
        503 as the real one gives when the pod is not running or nothing listens there."""
        pod_name, _, port = route.name.partition(":")
        pod = self._get(Route(route.resource, route.namespace, pod_name))  # 404 for a pod that is not there
        answer = self.pod_http.get((route.namespace, pod_name, int(port or 80), route.proxy_path))
        running = (pod.get("status") or {}).get("phase") == "Running"
        if not running or answer is None:
            where = f"{pod_name}:{port or 80}"
            raise ApiError(
                503,
                "ServiceUnavailable",
                f"error trying to reach service: dial tcp {where}: connect: connection refused",
            )
        return answer

    def _key(self, resource: Resource, namespace: str, name: str) -> Key:
        return (resource.plural, namespace if resource.namespaced else "", name)

    def _get(self, route: Route) -> dict:
        found = self.store.get(self._key(route.resource, route.namespace, route.name))
        if found is None:
            raise not_found(route.resource, route.name)
        return found

    def _list(self, route: Route, query: dict) -> dict:
        items = [
            obj
            for obj in self.store.list(route.resource.plural, route.namespace)
            if label_selector_matches(query.get("labelSelector", ""), obj["metadata"].get("labels") or {})
            and field_selector_matches(query.get("fieldSelector", ""), obj)
        ]
        return list_body(route.resource, items, self.store.next_version())

    def _namespace_ready(self, resource: Resource, namespace: str, name: str) -> None:
        found = self.store.get(("namespaces", "", namespace))
        if found is None:
            raise not_found(NAMESPACE, namespace)
        if found["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                "Forbidden",
                f'{resource.plural} "{name}" is forbidden: unable to create new content in namespace '
                f"{namespace} because it is being terminated",
                {"name": name, "kind": resource.plural, "causes": [{"reason": "NamespaceTerminating"}]},
            )

    def _check_scope(self, resource: Resource, namespace: str, obj: dict) -> None:
        metadata = obj.setdefault("metadata", {})
        if resource.namespaced:
            if metadata.get("namespace", namespace) != namespace:
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            metadata["namespace"] = namespace

    def create(self, resource: Resource, namespace: str, body: object) -> dict:
        """POST: validate, refuse duplicates (409 AlreadyExists), stamp, store, run controllers."""
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the request body must be an object")
        obj = copy.deepcopy(body)
        self._check_scope(resource, namespace, obj)
        name = obj["metadata"].get("name", "")
        causes = object_causes(obj, resource)
        if causes:
            raise invalid(resource, name, causes)
        if resource.namespaced:
            self._namespace_ready(resource, namespace, name)
        if resource.kind == "Pod":
            admit_pod(self.store, self.store.get(("namespaces", "", namespace)) or {}, obj)
        key = self._key(resource, namespace, name)
        if self.store.get(key) is not None:
            raise ApiError(
                409,
                "AlreadyExists",
                f'{_plural_ref(resource)} "{name}" already exists',
                {"name": name, "group": resource.group, "kind": resource.plural},
            )
        obj.pop("status", None)
        self.store.stamp_new(obj)
        self._defaults(obj)
        stored = self.store.put(key, obj)
        if resource.kind == "StatefulSet":
            controllers.start_stateful_set(self, stored)
        if resource.kind == "Deployment":
            controllers.start_deployment(self, stored)
        if resource.kind == "Pod":
            for hook in self.pod_created:
                hook(stored)
        if resource.kind == "PersistentVolumeClaim":
            volumes.bind_claim(self, stored)
        return self.store.get(key) or stored

    def _defaults(self, obj: dict) -> None:
        """What a real server fills in on create."""
        kind, metadata = obj["kind"], obj["metadata"]
        if kind == "Namespace":
            metadata.setdefault("labels", {})["kubernetes.io/metadata.name"] = metadata["name"]
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
        elif kind == "Service" and obj["spec"].get("type", "ClusterIP") == "ClusterIP":
            index = next(self._service_ips)
            obj["spec"].setdefault("clusterIP", f"10.96.{index // 250}.{index % 250 + 1}")
            obj["spec"]["clusterIPs"] = [obj["spec"]["clusterIP"]]
        elif kind == "Pod":
            obj["status"] = {"phase": "Pending"}
        elif kind == "StatefulSet":
            obj["status"] = {"replicas": 0}

    def _update(self, route: Route, old: dict, new: dict) -> dict:
        """PUT and PATCH alike: preconditions, immutable fields, status kept, validation."""
        resource = route.resource
        wanted_version = (new.get("metadata") or {}).get("resourceVersion")
        if wanted_version and wanted_version != old["metadata"]["resourceVersion"]:
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {_plural_ref(resource)} "{route.name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
                {"name": route.name, "group": resource.group, "kind": resource.plural},
            )
        self._check_scope(resource, route.namespace, new)
        if new["metadata"].get("name") != route.name:
            raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
        if resource.kind in STATUS_KINDS:
            new.pop("status", None)
            if "status" in old:
                new["status"] = old["status"]
        if resource.kind == "Namespace":
            new["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = route.name
            new["spec"] = old.get("spec", {})
        if resource.kind == "Service":
            for field in ("clusterIP", "clusterIPs"):
                if field in old.get("spec", {}) and field not in new.get("spec", {}):
                    new["spec"][field] = old["spec"][field]
        causes = object_causes(new, resource) + update_causes(old, new, resource)
        if causes:
            raise invalid(resource, route.name, causes)
        if resource.kind == "PersistentVolumeClaim":
            volumes.resize_claim(self, old, new)
        self.store.stamp_update(old, new)
        stored = self.store.put(self._key(resource, route.namespace, route.name), new)
        if resource.kind == "PersistentVolume":
            volumes.volume_changed(self, stored)
            return self.store.get(self._key(resource, route.namespace, route.name)) or stored
        return stored

    def _replace(self, route: Route, body: object) -> dict:
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the request body must be an object")
        return self._update(route, self._get(route), copy.deepcopy(body))

    def _patch(self, route: Route, content_type: str, body: object) -> dict:
        media_type = content_type.split(";")[0].strip()
        if media_type not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            raise ApiError(
                415, "UnsupportedMediaType", f"the fake does not serve {media_type or 'this'} patches"
            )
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "a merge patch must be an object")
        old = self._get(route)
        merged = merge_patch(old, body)
        assert isinstance(merged, dict)
        wanted_version = (body.get("metadata") or {}).get("resourceVersion")
        merged["metadata"]["resourceVersion"] = wanted_version or old["metadata"]["resourceVersion"]
        return self._update(route, old, merged)

    def _delete(self, route: Route) -> dict:
        old = self._get(route)
        key = self._key(route.resource, route.namespace, route.name)
        if route.resource.kind != "Namespace":
            self.store.delete(key)
            if route.resource.kind in ("StatefulSet", "Deployment"):
                controllers.collect_owned(self, route.namespace, old["metadata"]["uid"])
            if route.resource.kind == "Pod":
                self.pod_logs.pop((route.namespace, route.name), None)
                for owner in old["metadata"].get("ownerReferences") or []:
                    owning = self.store.get(("statefulsets", route.namespace, owner.get("name", "")))
                    if owner.get("kind") == "StatefulSet" and owning is not None:
                        controllers.start_stateful_set(self, owning)  # its controller makes it again
            return old
        if old["metadata"].get("deletionTimestamp"):
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on namespaces "{route.name}": The system is ensuring all content '
                "is removed from this namespace.  Upon completion, this namespace will automatically be purged "
                "by the system.",
                {"name": route.name, "kind": "namespaces"},
            )
        old["metadata"]["deletionTimestamp"] = self.store.now()
        old["status"] = {"phase": "Terminating"}
        if self.slow_namespace_deletion:
            self.store.put(key, old)
        else:
            self.store.delete(key)
            volumes.release_volumes(self, route.name)
            self.store.delete_namespace_contents(route.name)
        return old

    def finish_namespace_deletions(self) -> None:
        with self.store.lock:
            for namespace in self.store.list("namespaces"):
                if namespace["metadata"].get("deletionTimestamp"):
                    self.store.delete(("namespaces", "", namespace["metadata"]["name"]))
                    volumes.release_volumes(self, namespace["metadata"]["name"])
                    self.store.delete_namespace_contents(namespace["metadata"]["name"])

    def add_event(
        self, namespace: str, kind: str, name: str, reason: str, message: str, event_type: str = "Normal"
    ) -> dict:
        return controllers.add_event(self, namespace, kind, name, reason, message, event_type)
