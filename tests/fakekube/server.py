"""A stateful fake Kubernetes API server on 127.0.0.1, for testing the real client over HTTP.

`FakeKube` runs a threaded `http.server` on a free port, preloaded with namespaces and GPU nodes,
and offers what a test needs around it: the requests seen (as RBAC verbs), injected failures,
and the hands of the kubelet, scheduler and MIG manager (pod states, events, node labels).
"""

from __future__ import annotations

import copy
import json
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

from tests.fakekube.api import RESET, TEXT, Failure, FakeApi, Recorded
from tests.fakekube.dra import FakeDra
from tests.fakekube.migmanager import FakeMigManager
from tests.fakekube.nodes import default_nodes
from tests.fakekube.resources import BY_KIND
from tests.fakekube.store import Store
from tests.fakekube.validation import object_causes

DEFAULT_NAMESPACES = ("default", "kube-system", "gpu-operator", "ingress-nginx", "gpu-portal-datasets")
SANDBOX_POD = "sandbox-0"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    api: FakeApi


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body leave in two writes; without NODELAY, Nagle and delayed ACKs add 40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw_body = self.rfile.read(length) if length else b""
        status, payload = self.server.api.handle(
            self.command, self.path, self.headers.get("Content-Type", ""), raw_body
        )
        if status == RESET:  # the connection drops before any answer: a reset, as proxies do
            self.close_connection = True
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            return
        text = TEXT in payload
        data = payload[TEXT].encode() if text else json.dumps(payload).encode()
        self.send_response(status)
        retry_after = (payload.get("details") or {}).get("retryAfterSeconds") if status == 429 else None
        if retry_after is not None:
            self.send_header("Retry-After", str(retry_after))
        self.send_header("Content-Type", "text/plain" if text else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: object) -> None:  # quiet test output
        pass


class FakeKube:
    """The fake cluster. Use as a context manager, or through the `fake_kube` fixture."""

    def __init__(
        self,
        *,
        nodes: list[dict] | None = None,
        namespaces: tuple[str, ...] = DEFAULT_NAMESPACES,
        slow_namespace_deletion: bool = False,
    ):
        self.store = Store()
        self.api = FakeApi(self.store, slow_namespace_deletion=slow_namespace_deletion)
        for name in namespaces:
            self.api.create(
                BY_KIND["Namespace"],
                "",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            )
        for node in default_nodes() if nodes is None else nodes:
            self.add_node(node)
        self.mig = FakeMigManager(self)
        self.dra: FakeDra | None = (
            None  # NVIDIA's DRA driver, where a test installs it (tests/fakekube/dra.py)
        )
        if nodes is None:  # the layouts the default MIG nodes arrive with
            self.mig.adopt("gpu-h100-b", {i: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1} for i in range(8)})
            self.mig.adopt("gpu-a100-a", {i: {"1g.5gb": 7} for i in range(4)})
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> FakeKube:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.api = self.api
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-kube", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeKube:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the fake first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # --- looking -------------------------------------------------------------------------------

    @property
    def requests(self) -> list[Recorded]:
        return self.api.requests

    def get(self, kind: str, name: str, namespace: str = "") -> dict | None:
        """The stored object (server view, with status), or None."""
        resource = BY_KIND[kind]
        with self.store.lock:
            return self.store.get((resource.plural, namespace if resource.namespaced else "", name))

    def list(self, kind: str, namespace: str = "") -> list[dict]:
        with self.store.lock:
            return self.store.list(BY_KIND[kind].plural, namespace)

    # --- failures ------------------------------------------------------------------------------

    def fail_next(
        self,
        status: int,
        *,
        times: int = 1,
        method: str | None = None,
        path_contains: str | None = None,
        message: str = "",
        retry_after: int | None = None,
    ) -> None:
        """Answer the next `times` matching requests with `status` and a real Status body (a 429
        with `retry_after` also carries the Retry-After header)."""
        self.api.failures.append(
            Failure(status, times, method, path_contains, message, retry_after=retry_after)
        )

    def reset_next(
        self, *, times: int = 1, method: str | None = None, path_contains: str | None = None
    ) -> None:
        """Drop the connection of the next `times` matching requests without an answer."""
        self.api.failures.append(Failure(RESET, times, method, path_contains))

    def stall_next(
        self, seconds: float, *, method: str | None = None, path_contains: str | None = None
    ) -> None:
        """Hold the next matching request for `seconds` before answering it normally."""
        self.api.failures.append(Failure(0, 1, method, path_contains, delay=seconds))

    # --- acting as kubelet, scheduler and MIG manager ------------------------------------------

    def _put_checked(self, kind: str, obj: dict) -> None:
        resource = BY_KIND[kind]
        causes = object_causes(obj, resource)
        assert not causes, f"the fake built an invalid {kind}: {causes}"
        namespace = obj["metadata"].get("namespace", "") if resource.namespaced else ""
        with self.store.lock:
            obj["metadata"]["resourceVersion"] = self.store.next_version()
            self.store.put((resource.plural, namespace, obj["metadata"]["name"]), obj)

    def add_node(self, node: dict) -> None:
        node = copy.deepcopy(node)
        with self.store.lock:
            self.store.stamp_new(node)
        self._put_checked("Node", node)

    def set_node_labels(self, node: str, labels: dict[str, str | None]) -> None:
        """Set (or, with None, remove) node labels, as GFD and the MIG manager do."""
        found = self.get("Node", node)
        assert found is not None, f"no node {node}"
        current = found["metadata"].setdefault("labels", {})
        for key, value in labels.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value
        self._put_checked("Node", found)

    def set_mig_state(self, node: str, state: str) -> None:
        """What the MIG manager reports in `nvidia.com/mig.config.state`."""
        self.set_node_labels(node, {"nvidia.com/mig.config.state": state})

    def add_event(
        self, namespace: str, kind: str, name: str, reason: str, message: str, event_type: str = "Warning"
    ) -> None:
        with self.store.lock:
            self.api.add_event(namespace, kind, name, reason, message, event_type)

    def set_pod_status(self, namespace: str, status: dict, name: str = SANDBOX_POD) -> None:
        pod = self.get("Pod", name, namespace)
        assert pod is not None, f"no pod {namespace}/{name}"
        pod["status"] = status
        self._put_checked("Pod", pod)

    def _container(
        self, state: dict, *, ready: bool = False, restarts: int = 0, last_state: dict | None = None
    ) -> dict:
        return {
            "name": "sandbox",
            "image": "sandbox-image",
            "imageID": "",
            "ready": ready,
            "restartCount": restarts,
            "state": state,
            "lastState": last_state or {},
        }

    def set_pod_log(self, namespace: str, text: str, name: str = SANDBOX_POD) -> None:
        """What the pod's container has written so far (served at its `log` subresource)."""
        with self.store.lock:
            self.api.pod_logs[(namespace, name)] = text

    def serve_pod_http(self, namespace: str, name: str, *, port: int, path: str, text: str) -> None:
        """What the pod's server answers at `port`/`path` (reached through the API server's proxy,
        and only while the pod is Running)."""
        with self.store.lock:
            self.api.pod_http[(namespace, name, port, path.lstrip("/"))] = text

    def pod_running(self, namespace: str, *, ready: bool = True, name: str = SANDBOX_POD) -> None:
        flag = "True" if ready else "False"
        self.set_pod_status(
            namespace,
            {
                "phase": "Running",
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Initialized", "status": "True"},
                    {"type": "ContainersReady", "status": flag},
                    {"type": "Ready", "status": flag},
                ],
                "containerStatuses": [
                    self._container({"running": {"startedAt": self.store.now()}}, ready=ready)
                ],
            },
            name,
        )

    def pod_image_pull_failed(
        self,
        namespace: str,
        image: str = "registry.local/nope:1",
        name: str = SANDBOX_POD,
        *,
        why: str = "not found",
        times: int = 1,
    ) -> None:
        """The kubelet could not pull the image (`times` tries so far, for `why`): a Failed event
        with that count, then ImagePullBackOff."""
        detail = f'failed to pull and unpack image "{image}": {why}'
        with self.store.lock:
            event = self.api.add_event(
                namespace, "Pod", name, "Failed", f'Failed to pull image "{image}": {detail}', "Warning"
            )
            event["count"] = times
            self.store.put(("events", namespace, event["metadata"]["name"]), event)
        waiting = {"waiting": {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{image}"'}}
        self.set_pod_status(
            namespace,
            {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [self._container(waiting)],
            },
            name,
        )

    def pod_unschedulable(self, namespace: str, message: str = "", name: str = SANDBOX_POD) -> None:
        message = message or (
            "0/4 nodes are available: 1 Insufficient nvidia.com/mig-1g.10gb, "
            "3 node(s) didn't match Pod's node affinity/selector."
        )
        self.add_event(namespace, "Pod", name, "FailedScheduling", message)
        self.set_pod_status(
            namespace,
            {
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
                ],
            },
            name,
        )

    def pod_oom_killed(self, namespace: str, name: str = SANDBOX_POD) -> None:
        """Killed for memory, restarted, killed again: CrashLoopBackOff after OOMKilled."""
        last = {"terminated": {"reason": "OOMKilled", "exitCode": 137, "finishedAt": self.store.now()}}
        waiting = {
            "waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container"}
        }
        self.set_pod_status(
            namespace,
            {
                "phase": "Running",
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": "False"},
                ],
                "containerStatuses": [self._container(waiting, restarts=3, last_state=last)],
            },
            name,
        )

    def pod_evicted(self, namespace: str, name: str = SANDBOX_POD) -> None:
        self.set_pod_status(
            namespace,
            {
                "phase": "Failed",
                "reason": "Evicted",
                "message": "The node was low on resource: memory. Threshold quantity: 100Mi, available: 92Mi.",
            },
            name,
        )

    def finish_namespace_deletions(self) -> None:
        """Let the namespace controller finish: terminating namespaces and their contents go."""
        self.api.finish_namespace_deletions()
