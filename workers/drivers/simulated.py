"""A simulated cluster for the embedded default, demos and tests.

It keeps Kubernetes-shaped objects in an ObjectStore (the database, in the portal) so the web
process and every worker agree on one cluster; pods take `pod_start_seconds` to start and MIG
layout changes `mig_reconfig_seconds` to settle. An image whose reference contains
"does-not-exist" fails to pull, so the failure path can be shown and tested.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

from workers.drivers.base import (
    DiscoveredGpuNode,
    DriverError,
    ManagedNamespace,
    MigLayout,
    MigLayoutState,
    SandboxSpec,
    WorkloadStatus,
)
from workers.manifests import sandbox_objects
from workers.manifests.options import ManifestOptions

FAILING_IMAGE_MARK = "does-not-exist"
MANAGED_LABEL = "app.kubernetes.io/managed-by"


class ObjectStore(Protocol):
    def upsert(self, *, kind: str, namespace: str, name: str, body: dict) -> datetime:
        """Create or replace; returns when the object was first created."""

    def get(self, *, kind: str, namespace: str, name: str) -> tuple[dict, datetime] | None: ...

    def delete_namespace(self, namespace: str) -> int:
        """Delete the namespace object and everything in it; returns how many objects went."""

    def list(self, *, kind: str) -> list[tuple[str, str, dict]]:
        """(namespace, name, body) of every object of a kind."""


class SimulatedDriver:
    def __init__(
        self,
        *,
        store: ObjectStore,
        pod_start_seconds: float = 3.0,
        mig_reconfig_seconds: float = 2.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        fail_next: str | None = None,
        manifest_options: ManifestOptions | None = None,
    ):
        self.manifest_options = manifest_options
        self.store = store
        self.pod_start_seconds = pod_start_seconds
        self.mig_reconfig_seconds = mig_reconfig_seconds
        self.clock = clock
        self.fail_next = fail_next

    def _maybe_fail(self) -> None:
        if self.fail_next:
            message, self.fail_next = self.fail_next, None
            raise DriverError(message, retryable=True)

    def sandbox_manifests(self, spec: SandboxSpec) -> list[dict]:
        return sandbox_objects(spec, self.manifest_options)

    def apply_sandbox(self, spec: SandboxSpec) -> None:
        self._maybe_fail()
        for obj in sandbox_objects(spec, self.manifest_options):
            namespace = "" if obj["kind"] == "Namespace" else spec.namespace
            self.store.upsert(kind=obj["kind"], namespace=namespace, name=obj["metadata"]["name"], body=obj)

    def sandbox_status(self, spec: SandboxSpec) -> WorkloadStatus:
        self._maybe_fail()
        found = self._workload(spec)
        if found is None:
            return WorkloadStatus("absent", "no workload in the cluster")
        _body, created_at = found
        if FAILING_IMAGE_MARK in spec.image:
            return WorkloadStatus("failed", f"image pull failed: {spec.image} was not found in the registry")
        ready_at = created_at + timedelta(seconds=self.pod_start_seconds)
        now = self.clock()
        if now < ready_at:
            left = (ready_at - now).total_seconds()
            return WorkloadStatus("pending", f"pulling {spec.image} and starting ({left:.0f} s left)")
        return WorkloadStatus("running", "running", access=access_for(spec))

    def _workload(self, spec: SandboxSpec) -> tuple[dict, datetime] | None:
        for kind in ("StatefulSet", "Pod", "Deployment"):
            for obj in sandbox_objects(spec, self.manifest_options):
                if obj["kind"] == kind:
                    return self.store.get(kind=kind, namespace=spec.namespace, name=obj["metadata"]["name"])
        return None

    def delete_sandbox(self, spec: SandboxSpec) -> bool:
        self._maybe_fail()
        self.store.delete_namespace(spec.namespace)
        return True

    def managed_namespaces(self) -> list[ManagedNamespace]:
        result = []
        for _, name, body in self.store.list(kind="Namespace"):
            labels = body.get("metadata", {}).get("labels", {})
            if labels.get(MANAGED_LABEL) != "gpu-portal":
                continue
            raw_id = labels.get("gpu-portal/sandbox-id")
            result.append(
                ManagedNamespace(name=name, sandbox_id=int(raw_id) if raw_id and raw_id.isdigit() else None)
            )
        return result

    def discover_gpu_nodes(self) -> list[DiscoveredGpuNode]:
        return []  # the simulated fleet is the one seeded in the database

    def apply_mig_layout(self, node: str, layout: MigLayout) -> None:
        wanted = {str(index): [list(item) for item in slices] for index, slices in layout.items()}
        found = self.store.get(kind="MigLayout", namespace="", name=node)
        if found is not None and found[0].get("layout") == wanted:
            return  # already asked for: the reconfiguration clock keeps running
        body = {"layout": wanted, "requested_at": self.clock().isoformat()}
        self.store.upsert(kind="MigLayout", namespace="", name=node, body=body)

    def mig_layout_state(self, node: str) -> MigLayoutState:
        found = self.store.get(kind="MigLayout", namespace="", name=node)
        if found is None:
            return "success"
        body, _ = found
        requested_at = datetime.fromisoformat(body["requested_at"])
        if self.clock() < requested_at + timedelta(seconds=self.mig_reconfig_seconds):
            return "pending"
        return "success"


def access_for(spec: SandboxSpec) -> str:
    if spec.image_kind == "shell":
        return f"ssh -p 2222 {spec.owner}@{spec.access_host}"
    return f"https://{spec.access_host}/"
