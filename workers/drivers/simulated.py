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
    EventLine,
    HomeState,
    KubectlToken,
    ManagedNamespace,
    ManagedVolume,
    MigLayout,
    MigLayoutState,
    PodInsight,
    WorkloadStatus,
)
from workers.drivers.simulated_serving import runtime_metrics_text
from workers.manifests import (
    ROLE_BINDING_NAME,
    access_objects,
    sandbox_access,
    serving_access,
    workload_objects,
)
from workers.manifests.names import KIND_KEY, MANAGED_BY, MANAGED_BY_KEY, POD_NAME, WORKLOAD_NAME, label_value
from workers.manifests.options import ManifestOptions
from workers.manifests.serving import redacted, replica_name
from workers.spec import WorkloadSpec

FAILING_IMAGE_MARK = "does-not-exist"


class ObjectStore(Protocol):
    def upsert(self, *, kind: str, namespace: str, name: str, body: dict) -> datetime:
        """Create or replace; returns when the object was first created."""

    def get(self, *, kind: str, namespace: str, name: str) -> tuple[dict, datetime] | None: ...

    def delete(self, *, kind: str, namespace: str, name: str) -> None: ...

    def delete_namespace(self, namespace: str) -> int:
        """Delete the namespace object and everything in it; returns how many objects went."""

    def list(self, *, kind: str) -> list[tuple[str, str, dict]]:
        """(namespace, name, body) of every object of a kind."""


class SimulatedDriver:
    reports_home_use = True  # a simulated figure; a real cluster's comes from its Prometheus

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
        self._access_applied: dict[str, list[dict]] = {}  # namespace -> its access objects, applied
        self.store = store
        self.pod_start_seconds = pod_start_seconds
        self.mig_reconfig_seconds = mig_reconfig_seconds
        self.clock = clock
        self.fail_next = fail_next

    def _maybe_fail(self) -> None:
        if self.fail_next:
            message, self.fail_next = self.fail_next, None
            raise DriverError(message, retryable=True)

    def workload_manifests(self, spec: WorkloadSpec) -> list[dict]:
        return workload_objects(spec, self.manifest_options)

    def apply_workload(self, spec: WorkloadSpec) -> None:
        self._maybe_fail()
        wanted = redacted(workload_objects(spec, self.manifest_options))  # no token in the database
        for obj in wanted:
            namespace = "" if obj["kind"] == "Namespace" else spec.namespace
            self.store.upsert(kind=obj["kind"], namespace=namespace, name=obj["metadata"]["name"], body=obj)
        # Replicas scaled away: their Deployments go.
        names = {obj["metadata"]["name"] for obj in wanted if obj["kind"] == "Deployment"}
        for namespace, name, _ in self.store.list(kind="Deployment"):
            if namespace == spec.namespace and name not in names:
                self.store.delete(kind="Deployment", namespace=namespace, name=name)

    def refresh_access(self, spec: WorkloadSpec) -> bool:
        """True on every call that does not fail: nothing else writes the simulated cluster's
        objects, so what this process applied is what is there."""
        self._maybe_fail()
        objects = access_objects(spec, self.manifest_options)
        if self._access_applied.get(spec.namespace) == objects:
            return True
        for obj in redacted(objects):
            self.store.upsert(
                kind=obj["kind"], namespace=spec.namespace, name=obj["metadata"]["name"], body=obj
            )
        if not any(obj["kind"] == "RoleBinding" for obj in objects):  # the owner is shut out
            self.store.delete(kind="RoleBinding", namespace=spec.namespace, name=ROLE_BINDING_NAME)
        self._access_applied[spec.namespace] = objects
        return True

    def workload_status(self, spec: WorkloadSpec) -> WorkloadStatus:
        self._maybe_fail()
        workloads = self._workloads(spec)
        if not workloads:
            return WorkloadStatus("absent", "no workload in the cluster")
        if FAILING_IMAGE_MARK in spec.image:
            return WorkloadStatus("failed", f"image pull failed: {spec.image} was not found in the registry")
        now = self.clock()
        ready = [created_at + timedelta(seconds=self.pod_start_seconds) <= now for created_at in workloads]
        access = (
            serving_access(spec) if spec.serving is not None else sandbox_access(spec, self.manifest_options)
        )
        if all(ready):
            return WorkloadStatus("running", "running", access=access, ready_replicas=len(ready))
        left = max((c + timedelta(seconds=self.pod_start_seconds) - now).total_seconds() for c in workloads)
        return WorkloadStatus(
            "pending",
            f"pulling {spec.image} and starting ({left:.0f} s left)",
            access=access,
            ready_replicas=sum(ready),
        )

    def _workloads(self, spec: WorkloadSpec) -> list[datetime]:
        """When each of the spec's workload objects was created (missing ones left out)."""
        created = []
        for obj in workload_objects(spec, self.manifest_options):
            if obj["kind"] in ("StatefulSet", "Deployment"):
                found = self.store.get(
                    kind=obj["kind"], namespace=spec.namespace, name=obj["metadata"]["name"]
                )
                if found is not None:
                    created.append(found[1])
        return created

    def serving_metrics(self, spec: WorkloadSpec) -> dict[str, str | None]:
        """What each replica's runtime says at /metrics, by pod: counters grown since the replica
        started (see simulated_serving), None while it is still starting. A replica whose
        Deployment is made again starts from zero, as a restarted server does."""
        self._maybe_fail()
        if spec.serving is None:
            return {}
        now = self.clock()
        found: dict[str, str | None] = {}
        for index in range(len(spec.serving.replicas)):
            stored = self.store.get(kind="Deployment", namespace=spec.namespace, name=replica_name(index))
            if stored is None:
                continue
            started = stored[1] + timedelta(seconds=self.pod_start_seconds)
            pod = f"{replica_name(index)}-sim"
            found[pod] = (
                runtime_metrics_text(
                    runtime=spec.serving.runtime,
                    model=spec.serving.model,
                    task=spec.serving.task,
                    workload_id=spec.workload_id,
                    started=started.timestamp(),
                    now=now.timestamp(),
                )
                if started <= now
                else None
            )
        return found

    def restart_workload(self, spec: WorkloadSpec) -> None:
        """The pod goes and comes back: its StatefulSet is made again, so it starts anew."""
        self._maybe_fail()
        found = self.store.get(kind="StatefulSet", namespace=spec.namespace, name=WORKLOAD_NAME)
        if found is None:
            raise DriverError(f"{spec.namespace} has no sandbox to restart", retryable=False)
        self.store.delete(kind="StatefulSet", namespace=spec.namespace, name=WORKLOAD_NAME)
        self.store.upsert(kind="StatefulSet", namespace=spec.namespace, name=WORKLOAD_NAME, body=found[0])

    def workload_insight(self, spec: WorkloadSpec, *, log_lines: int = 100) -> PodInsight:
        """What a kubelet would have said of the pod so far, and a log that says it is simulated."""
        self._maybe_fail()
        found = self.store.get(kind="StatefulSet", namespace=spec.namespace, name=WORKLOAD_NAME)
        if found is None:
            return PodInsight()
        created = found[1]
        started = created + timedelta(seconds=self.pod_start_seconds)
        pod = f"Pod/{POD_NAME}"
        events = [
            EventLine(created.isoformat(), "Normal", "SuccessfulCreate", f"create Pod {POD_NAME} success",
                      f"StatefulSet/{WORKLOAD_NAME}"),
            EventLine(created.isoformat(), "Normal", "Scheduled",
                      f"Successfully assigned {spec.namespace}/{POD_NAME} to {spec.gpu.node}", pod),
            EventLine(created.isoformat(), "Normal", "Pulling", f'Pulling image "{spec.image}"', pod),
        ]  # fmt: skip
        log = ["[simulated cluster] no container runs here; a real sandbox's log appears in this place"]
        if started <= self.clock():
            events += [
                EventLine(started.isoformat(), "Normal", "Pulled", f'Successfully pulled image "{spec.image}"', pod),
                EventLine(started.isoformat(), "Normal", "Started", f"Started container {WORKLOAD_NAME}", pod),
            ]  # fmt: skip
            log.append(
                f"[simulated cluster] {spec.image} started on {spec.gpu.node} at {started:%H:%M:%S} UTC"
            )
        return PodInsight(events=tuple(events), log_tail="\n".join(log[-log_lines:]) + "\n")

    def revoke_kubectl(self, spec: WorkloadSpec) -> None:
        """A simulated cluster's tokens open nothing: nothing to void."""
        self._maybe_fail()

    def kubectl_token(self, spec: WorkloadSpec, *, seconds: int) -> KubectlToken:
        """No API server stands behind a simulated cluster: a kubeconfig of the right shape,
        marked as simulated, whose token opens nothing."""
        self._maybe_fail()
        if self.store.get(kind="Namespace", namespace="", name=spec.namespace) is None:
            raise DriverError(f"{spec.namespace} is not in the cluster", retryable=False)
        return KubectlToken(
            token=f"simulated-{spec.namespace}",
            expires_at=self.clock() + timedelta(seconds=seconds),
            server="https://kubernetes.simulated.invalid",
            namespace=spec.namespace,
            simulated=True,
        )

    def home_state(self, spec: WorkloadSpec) -> HomeState:
        """The claim binds at once: to the home's volume, or to a new one named after it. Use
        grows a quarter GB an hour of the sandbox's life (a simulated figure, shown as such)."""
        self._maybe_fail()
        home = spec.home
        found = self.store.get(kind="StatefulSet", namespace=spec.namespace, name=WORKLOAD_NAME)
        if home is None or found is None:
            return HomeState(bound=False)
        volume = home.volume_name or f"pv-home-{label_value(home.owner).lower()}-{spec.workload_id}"
        hours = max(0.0, (self.clock() - found[1]).total_seconds() / 3600)
        used = min(float(home.size_gb), round(0.25 * hours + 0.05, 2))
        return HomeState(bound=True, volume_name=volume, capacity_gb=home.size_gb, used_gb=used)

    def delete_home(self, volume_name: str) -> bool:
        self._maybe_fail()
        return True

    def delete_workload(self, spec: WorkloadSpec) -> bool:
        self._maybe_fail()
        self.store.delete_namespace(spec.namespace)
        return True

    def managed_namespaces(self) -> list[ManagedNamespace]:
        result = []
        for _, name, body in self.store.list(kind="Namespace"):
            labels = body.get("metadata", {}).get("labels", {})
            if labels.get(MANAGED_BY_KEY) != MANAGED_BY:
                continue
            raw_id = labels.get("gpu-portal/sandbox-id")
            result.append(
                ManagedNamespace(
                    name=name,
                    workload_id=int(raw_id) if raw_id and raw_id.isdigit() else None,
                    kind=labels.get(KIND_KEY, "sandbox"),
                )
            )
        return result

    def managed_volumes(self) -> list[ManagedVolume]:
        return []  # the simulated cluster keeps no volume objects (homes bind at once, by name)

    def delete_volume(self, volume_name: str) -> bool:
        self._maybe_fail()
        return True

    def discover_gpu_nodes(self) -> list[DiscoveredGpuNode]:
        return []  # the simulated fleet is the one seeded in the database

    def apply_mig_layout(self, node: str, layout: MigLayout, *, retry: bool = False) -> None:
        wanted = {str(index): [list(item) for item in slices] for index, slices in layout.items()}
        found = self.store.get(kind="MigLayout", namespace="", name=node)
        if found is not None and found[0].get("layout") == wanted:
            return  # already asked for: the reconfiguration clock keeps running
        body = {"layout": wanted, "requested_at": self.clock().isoformat()}
        self.store.upsert(kind="MigLayout", namespace="", name=node, body=body)

    def claimed_mig_starts(self, spec: WorkloadSpec) -> dict[int, int]:
        return {}  # the simulated cluster puts slices where the portal says

    def mig_layout_state(self, node: str, layout: MigLayout | None = None) -> MigLayoutState:
        found = self.store.get(kind="MigLayout", namespace="", name=node)
        if found is None:
            return "success"
        body, _ = found
        requested_at = datetime.fromisoformat(body["requested_at"])
        if self.clock() < requested_at + timedelta(seconds=self.mig_reconfig_seconds):
            return "pending"
        return "success"
