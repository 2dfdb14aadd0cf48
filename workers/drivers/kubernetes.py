"""The Kubernetes cluster driver: sandboxes as namespaces, GPU nodes from GPU Feature Discovery,
MIG layouts through the GPU Operator's MIG manager.

Every method is safe to repeat: creates that meet an existing object read it and patch only
when it differs, deletes that meet nothing are fine. Failures are `DriverError`s whose
`retryable` tells the reconciler whether to back off and try again or to give up.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml

from workers.drivers.base import (
    NODE_GONE,
    ClusterConfig,
    DiscoveredGpuNode,
    DriverError,
    ManagedNamespace,
    ManagedVolume,
    MigLayout,
    MigLayoutState,
    WorkloadStatus,
)
from workers.drivers.kubernetes_api import DEFAULT_TIMEOUT, KubeApi, KubernetesApiError
from workers.drivers.kubernetes_nodes import (
    GPU_COUNT,
    GPU_PRODUCT,
    MIG_CONFIG,
    MIG_CONFIG_KEY,
    MIG_CONFIG_STATE,
    WRITTEN_AT_PREFIX,
    advertised_matches,
    discovered_node,
    dra_gpus,
    gpu_type_slug,
    layout_state,
    merge_mig_config,
    mig_config_name,
    mig_device_start,
    mig_parted_entries,
    written_at_key,
)
from workers.drivers.kubernetes_sandbox import SandboxPartsMixin
from workers.drivers.kubernetes_status import serving_status, workload_status
from workers.manifests import (
    MANAGED_BY,
    MANAGED_BY_KEY,
    ROLE_BINDING_NAME,
    SANDBOX_ID_KEY,
    WORKLOAD_NAME,
    ManifestOptions,
    access_objects,
    sandbox_access,
    workload_objects,
)
from workers.manifests.claims import claim_name, uses_dra
from workers.manifests.datasets import copied_volume_name
from workers.manifests.names import HOME_OWNER_KEY, KIND_KEY
from workers.manifests.serving import (
    HF_TOKEN_SECRET,
    METRICS_PATH,
    local_model_repository,
    runtime_metrics_port,
    serving_access,
    serving_selector,
)
from workers.spec import WorkloadSpec

log = logging.getLogger(__name__)

# Every call this driver makes, as RBAC (API group, resource) -> verbs. deploy/kubernetes/rbac.yaml
# grants exactly these; a test holds the two together. `bind` on clusterroles is not a call: the
# API server demands it (or holding every permission of `edit`) before it lets the portal create
# RoleBindings to `edit` for sandbox owners.

REQUIRED_PERMISSIONS: dict[tuple[str, str], frozenset[str]] = {
    ("", "namespaces"): frozenset({"create", "get", "list", "patch", "delete"}),
    ("", "resourcequotas"): frozenset({"create", "get", "patch"}),
    ("", "limitranges"): frozenset({"create", "get", "patch"}),
    ("", "services"): frozenset({"create", "get", "patch"}),
    ("", "serviceaccounts"): frozenset({"create", "get", "patch"}),  # a sandbox's own, for kubectl
    ("", "serviceaccounts/token"): frozenset({"create"}),  # its short-lived tokens, in kubeconfigs
    ("", "persistentvolumeclaims"): frozenset({"create", "get", "patch"}),  # the claim on a home
    # homes: kept, moved, deleted; datasets: a read-only copy of a claim's volume per sandbox
    # list: the orphan reconcile finds the portal's volumes its database does not know
    ("", "persistentvolumes"): frozenset({"create", "get", "list", "patch", "delete"}),
    ("", "pods"): frozenset({"list", "delete"}),  # delete: a sandbox restarted on its owner's request
    ("", "pods/log"): frozenset({"get"}),  # the end of a sandbox's log, on its page
    ("", "pods/proxy"): frozenset({"get"}),  # model servers' runtime metrics, replica by replica
    ("", "events"): frozenset({"list"}),
    ("", "nodes"): frozenset({"get", "list", "patch"}),
    ("", "configmaps"): frozenset({"create", "get", "patch"}),
    # get/patch/delete: hf-token, ssh-keys and ssh-host-key only
    ("", "secrets"): frozenset({"create", "get", "patch", "delete"}),
    ("resource.k8s.io", "resourceclaims"): frozenset({"create", "get", "delete"}),
    ("resource.k8s.io", "resourceslices"): frozenset({"list"}),
    ("apps", "statefulsets"): frozenset({"create", "get", "patch"}),
    ("apps", "deployments"): frozenset({"create", "get", "list", "patch", "delete"}),
    ("networking.k8s.io", "networkpolicies"): frozenset({"create", "get", "patch"}),
    ("networking.k8s.io", "ingresses"): frozenset({"create", "get", "patch"}),
    ("gateway.networking.k8s.io", "httproutes"): frozenset({"create", "get", "patch"}),
    ("rbac.authorization.k8s.io", "rolebindings"): frozenset({"create", "get", "patch", "delete"}),
    ("rbac.authorization.k8s.io", "clusterroles"): frozenset({"bind"}),
}


@dataclass(frozen=True)
class KubernetesOptions:
    """Per-cluster settings beyond how to connect (ClusterConfig).

    `product_slugs` maps `nvidia.com/gpu.product` values to portal GPU type slugs; drivers may
    not import the portal, so the caller builds it with `product_slug_table(GPU_MODELS.values())`.
    """

    manifests: ManifestOptions = field(default_factory=ManifestOptions)
    mig_config_map: str = "gpu-portal-mig-parted-config"
    mig_config_namespace: str = "gpu-operator"
    # The kubelet refreshes a mounted ConfigMap after its sync period plus its cache's TTL (about
    # a minute each by default): a node is pointed at a new config only this long after it was
    # written, or its MIG manager may read the old file and fail.
    mig_config_settle_seconds: float = 120.0
    # A workload's objects are applied when what they should be changes, and again after this
    # long (drift: someone edited them); the passes between read its status only.
    reapply_seconds: float = 120.0
    timeout: tuple[float, float] = DEFAULT_TIMEOUT
    product_slugs: Mapping[str, str] = field(default_factory=dict)
    dataset_namespace: str = "gpu-portal-datasets"  # where datasets' credentials Secrets live
    prometheus_url: str = ""  # the cluster's Prometheus, for homes' use (kubelet volume stats)
    # Reading a model server's /metrics through the API server: short, as a minute's job reads
    # every replica of every deployment.
    metrics_timeout: tuple[float, float] = (3.0, 5.0)


def contains(existing: Any, desired: Any) -> bool:
    """Whether `existing` already holds everything `desired` says (maps may hold more)."""
    if isinstance(desired, dict):
        return isinstance(existing, dict) and all(
            key in existing and contains(existing[key], value) for key, value in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(existing, list)
            and len(existing) == len(desired)
            and all(contains(have, want) for have, want in zip(existing, desired, strict=True))
        )
    return existing == desired


# StatefulSet spec fields the API server refuses to change (everything but replicas, template,
# updateStrategy, persistentVolumeClaimRetentionPolicy, minReadySeconds, ordinals).
STATEFULSET_IMMUTABLE = ("selector", "serviceName", "volumeClaimTemplates", "podManagementPolicy")


def patch_body(existing: dict, desired: dict) -> dict:
    """The merge patch that brings `existing` to `desired`, leaving out fields that may not change.

    A StatefulSet whose immutable fields differ (a bigger home volume) cannot be patched into
    shape; that is a final error naming the field, not a 422 to retry forever.
    """
    if desired["kind"] != "StatefulSet":
        return desired
    spec = dict(desired["spec"])
    for field_name in STATEFULSET_IMMUTABLE:
        wanted = spec.pop(field_name, None)
        if wanted is not None and not contains(existing.get("spec", {}).get(field_name), wanted):
            name = f"{desired['metadata'].get('namespace')}/{desired['metadata']['name']}"
            raise DriverError(
                f"StatefulSet {name} cannot change {field_name} in place; end the sandbox and request a new one",
                retryable=False,
            )
    return {**desired, "spec": spec}


def _terminating(namespace: dict) -> bool:
    return bool(namespace.get("metadata", {}).get("deletionTimestamp")) or (
        namespace.get("status", {}).get("phase") == "Terminating"
    )


class KubernetesDriver(SandboxPartsMixin):
    """ClusterDriver on the official client; `api` may be injected (tests, a shared client)."""

    def __init__(
        self,
        config: ClusterConfig,
        options: KubernetesOptions | None = None,
        *,
        api: KubeApi | None = None,
        clock: Callable[[], datetime] | None = None,
    ):
        self.config = config
        self.options = options or KubernetesOptions()
        self.api = api or KubeApi(config, timeout=self.options.timeout)
        self.clock = clock or (lambda: datetime.now(UTC))
        # namespace -> (digest of the objects last applied there, when): this process's memory,
        # so an unchanged workload is not applied again on every reconcile pass.
        self._applied: dict[str, tuple[str, datetime]] = {}
        # namespace -> digest of its access objects and when this process last applied them
        self._access_applied: dict[str, tuple[str, datetime, bool]] = {}  # digest, when, owner bound

    # --- sandboxes ----------------------------------------------------------------------------

    def workload_manifests(self, spec: WorkloadSpec) -> list[dict]:
        try:
            path = local_model_repository(spec)
            volume = self.options.manifests.model_volume
            if path and not volume.holds(path):
                where = (
                    f"the model volume is mounted at {volume.mount_path}"
                    if volume.source
                    else "PORTAL_MODEL_VOLUME names none"
                )
                raise ValueError(
                    f"Triton's model repository {path} is a path, and no volume in the pod holds it "
                    f"({where}): put the repository on the model volume, or give the catalog entry "
                    "an object-store repository (s3://, gs://, as://)"
                )
            return workload_objects(spec, self.options.manifests)
        except ValueError as exc:
            raise DriverError(f"{spec.name} cannot be built: {exc}", retryable=False) from exc

    def apply_workload(self, spec: WorkloadSpec) -> None:
        """Create each object; where one exists, patch it only when it differs from the manifest.

        Skipped when this process applied exactly these objects within `reapply_seconds`. What
        the spec no longer has is removed: the owner's RoleBinding once it names no cluster
        identity, the team's token Secret once the team has none, and (on every pass, as another
        worker may have applied more replicas since) the Deployments of replicas scaled away.
        The skip is remembered only once all of that succeeded.
        """
        objects = self.workload_manifests(spec)
        digest = hashlib.sha256(json.dumps(objects, sort_keys=True, default=str).encode()).hexdigest()
        last = self._applied.get(spec.namespace)
        now = self.clock()
        fresh = last and last[0] == digest and (now - last[1]).total_seconds() < self.options.reapply_seconds
        if not fresh:
            self._prebind_home(spec)
            for obj in objects:
                self._apply(obj)
            for mount in spec.datasets:
                self._provide_dataset(spec, mount)
            self._copy_tls_secret(spec)
            kinds = {obj["kind"] for obj in objects}
            named = {(obj["kind"], obj["metadata"]["name"]) for obj in objects}
            if ("RoleBinding", ROLE_BINDING_NAME) not in named:
                self.api.delete("RoleBinding", ROLE_BINDING_NAME, spec.namespace)
            if spec.serving is not None and "Secret" not in kinds:
                self.api.delete("Secret", HF_TOKEN_SECRET, spec.namespace)
        if spec.serving is not None:
            wanted = {obj["metadata"]["name"] for obj in objects if obj["kind"] == "Deployment"}
            selector = f"{SANDBOX_ID_KEY}={spec.workload_id}"
            for deployment in self.api.list("Deployment", spec.namespace, label_selector=selector):
                if deployment["metadata"]["name"] not in wanted:
                    self.api.delete("Deployment", deployment["metadata"]["name"], spec.namespace)
        if not fresh:
            self._applied[spec.namespace] = (digest, now)

    def refresh_access(self, spec: WorkloadSpec) -> bool:
        """Its quota, route and the binding of its owner's identity (removed once the spec has
        none): applied when they changed, and again (a read of each, a write only where one
        differs or went missing) after `reapply_seconds`. An ssh sandbox's keys and host key:
        read and compared on every call, so that a key removed is gone from the cluster on the
        next pass of whichever worker process makes it (another process's cache knows nothing
        of a key it did not see)."""
        objects = access_objects(spec, self.options.manifests)
        keys = [obj for obj in objects if obj["kind"] == "Secret"]
        cached = [obj for obj in objects if obj["kind"] != "Secret"]
        bound = any(obj["kind"] == "RoleBinding" for obj in cached)
        digest = hashlib.sha256(json.dumps(cached, sort_keys=True, default=str).encode()).hexdigest()
        last = self._access_applied.get(spec.namespace)
        now = self.clock()
        fresh = last and last[0] == digest and (now - last[1]).total_seconds() < self.options.reapply_seconds
        # First what shuts someone out, so that a route the cluster refuses cannot hold it up: the
        # owner's binding once the spec has none (deactivated, out of the team; asked once per
        # process, and again only after this process saw one), and the keys, read every call.
        if not bound and (last is None or last[2]):
            self.api.delete("RoleBinding", ROLE_BINDING_NAME, spec.namespace)
        for obj in keys:
            self._apply(obj)
        if not fresh:
            for obj in cached:
                self._apply(obj)
            self._copy_tls_secret(spec)
            self._access_applied[spec.namespace] = (digest, now, bound)
        return not fresh

    def _apply(self, obj: dict) -> None:
        """Read; create what is missing, and patch (or, for a new roleRef, replace) only what
        differs. Reading first spares the API server a create answered 409 for every object
        that exists, which is all of them after the first pass."""
        kind, metadata = obj["kind"], obj["metadata"]
        existing = self.api.get(kind, metadata["name"], metadata.get("namespace"))
        if existing is None:
            try:
                self.api.create(obj)
                return
            except KubernetesApiError as exc:
                if exc.status != 409:
                    raise
            existing = self.api.get(kind, metadata["name"], metadata.get("namespace"))  # made meanwhile
            if existing is None:
                raise DriverError(f"{kind} {metadata['name']} kept appearing and vanishing; try again later")
        if kind == "Namespace" and _terminating(existing):
            raise DriverError(f"namespace {metadata['name']} is still being deleted; try again later")
        if kind == "PersistentVolumeClaim":
            return  # fixed once made but for its size, which home_state grows
        if contains(existing, obj):
            return
        namespace = metadata.get("namespace")
        if kind == "RoleBinding" and not contains(existing.get("roleRef"), obj["roleRef"]):
            # roleRef cannot change: replace the binding
            self.api.delete(kind, metadata["name"], namespace)
            self.api.create(obj)
            return
        if kind == "ResourceClaim":
            # A claim's spec cannot change: one pinned elsewhere (the slice was placed again) is
            # replaced; its pod is rescheduled against the new one.
            log.info("replacing ResourceClaim %s/%s", namespace, metadata["name"])
            self.api.delete(kind, metadata["name"], namespace)
            self.api.create(obj)
            return
        log.info("patching %s %s/%s", kind, namespace or "", metadata["name"])
        self.api.patch(kind, metadata["name"], patch_body(existing, obj), namespace)

    def workload_status(self, spec: WorkloadSpec) -> WorkloadStatus:
        status = self._read_status(spec)
        if status.phase == "absent":
            self._applied.pop(spec.namespace, None)  # its objects went: the next pass applies them again
            self._access_applied.pop(spec.namespace, None)
        return status

    def _read_status(self, spec: WorkloadSpec) -> WorkloadStatus:
        if spec.serving is not None:
            return self._serving_status(spec)
        namespace = self.api.get("Namespace", spec.namespace)
        stateful_set = None
        pods: list[dict] = []
        events: list[dict] = []
        if namespace is not None and not _terminating(namespace):
            stateful_set = self.api.get("StatefulSet", WORKLOAD_NAME, spec.namespace)
            if stateful_set is not None:
                pods, events = self._pods_and_events(spec.namespace, f"{SANDBOX_ID_KEY}={spec.workload_id}")
        status = workload_status(
            namespace=namespace,
            stateful_set=stateful_set,
            pods=pods,
            events=events,
            access=sandbox_access(spec, self.options.manifests),
        )
        # One more read, only when the pod cannot be scheduled or has failed: is its node still there?
        stuck = status.phase == "failed" or status.message.startswith(
            ("unschedulable", "waiting to be scheduled")
        )
        if (
            stuck
            and stateful_set is not None
            and spec.gpu.node
            and self.api.get("Node", spec.gpu.node) is None
        ):
            return WorkloadStatus("failed", f"{NODE_GONE}{spec.gpu.node} is gone from the cluster")
        if status.phase == "pending" and stateful_set is not None and uses_dra(spec.gpu):
            return self._waiting_for_claim(spec, status)
        return status

    def claimed_mig_starts(self, spec: WorkloadSpec) -> dict[int, int]:
        """The start slot of the MIG device the scheduler allocated to each replica's claim (the
        DRA driver's device names carry it); replicas not yet allocated are left out."""
        claims = [spec.gpu] if spec.serving is None else list(spec.serving.replicas)
        starts: dict[int, int] = {}
        for replica, claim in enumerate(claims):
            if not uses_dra(claim):
                continue
            name = claim_name() if spec.serving is None else claim_name(replica)
            found = self.api.get("ResourceClaim", name, spec.namespace)
            results = (
                (((found or {}).get("status") or {}).get("allocation") or {})
                .get("devices", {})
                .get("results")
            )
            start = mig_device_start(results[0]["device"]) if results else None
            if start is not None:
                starts[replica] = start
        return starts

    def _waiting_for_claim(self, spec: WorkloadSpec, status: WorkloadStatus) -> WorkloadStatus:
        """A pending sandbox whose slice is claimed through DRA: say so while the claim waits."""
        claim = self.api.get("ResourceClaim", claim_name(), spec.namespace)
        if claim is not None and (claim.get("status") or {}).get("allocation"):
            return status
        gpu = spec.gpu.gpu_indices[0] if spec.gpu.gpu_indices else "?"
        waiting = f"Waiting for NVIDIA's DRA driver to allocate a {spec.gpu.mig_profile} slice on GPU {gpu}"
        return dataclasses.replace(
            status, message=f"{waiting}: {status.message}" if status.message else waiting
        )

    def _serving_status(self, spec: WorkloadSpec) -> WorkloadStatus:
        assert spec.serving is not None
        namespace = self.api.get("Namespace", spec.namespace)
        pods: list[dict] = []
        events: list[dict] = []
        if namespace is not None and not _terminating(namespace):
            selector = ",".join(f"{key}={value}" for key, value in serving_selector(spec).items())
            pods, events = self._pods_and_events(spec.namespace, selector)
        return serving_status(
            namespace=namespace,
            pods=pods,
            events=events,
            replicas=len(spec.serving.replicas),
            access=serving_access(spec),
        )

    def _pods_and_events(self, namespace: str, selector: str) -> tuple[list[dict], list[dict]]:
        """The workload's pods, and the namespace's events only while a pod is missing or not
        ready (they say why; a ready workload spares the call)."""
        pods = self.api.list("Pod", namespace, label_selector=selector)
        if pods and all(_ready(pod) for pod in pods):
            return pods, []
        return pods, self.api.list("Event", namespace)

    def delete_workload(self, spec: WorkloadSpec) -> bool:
        """Delete the namespace (and with it everything in it) and the read-only copies of its
        datasets' volumes (cluster-scoped, so not in it); True once it is gone."""
        self._applied.pop(spec.namespace, None)
        self._access_applied.pop(spec.namespace, None)
        for mount in spec.datasets:
            if mount.kind == "pvc":
                self.api.delete("PersistentVolume", copied_volume_name(spec, mount))
        try:
            self.api.delete("Namespace", spec.namespace)
        except KubernetesApiError as exc:
            if exc.status != 409:  # 409: already terminating, the namespace controller is on it
                raise
        return self.api.get("Namespace", spec.namespace) is None

    def managed_namespaces(self) -> list[ManagedNamespace]:
        found = []
        for namespace in self.api.list("Namespace", label_selector=f"{MANAGED_BY_KEY}={MANAGED_BY}"):
            labels = namespace.get("metadata", {}).get("labels") or {}
            raw_id = labels.get(SANDBOX_ID_KEY, "")
            found.append(
                ManagedNamespace(
                    name=namespace["metadata"]["name"],
                    workload_id=int(raw_id) if raw_id.isdigit() else None,
                    kind=labels.get(KIND_KEY, "sandbox"),
                )
            )
        return found

    def managed_volumes(self) -> list[ManagedVolume]:
        found = []
        for volume in self.api.list("PersistentVolume", label_selector=f"{MANAGED_BY_KEY}={MANAGED_BY}"):
            labels = volume.get("metadata", {}).get("labels") or {}
            raw_id = labels.get(SANDBOX_ID_KEY, "")
            ref = (volume.get("spec") or {}).get("claimRef") or {}
            found.append(
                ManagedVolume(
                    name=volume["metadata"]["name"],
                    workload_id=int(raw_id) if raw_id.isdigit() else None,
                    home_owner=labels.get(HOME_OWNER_KEY, ""),
                    claim=f"{ref['namespace']}/{ref['name']}"
                    if ref.get("namespace") and ref.get("name")
                    else "",
                )
            )
        return found

    def delete_volume(self, volume_name: str) -> bool:
        """Delete the volume object only: a reclaim policy other than Retain is set to Retain
        first, so the storage behind it stays."""
        volume = self.api.get("PersistentVolume", volume_name)
        if volume is None:
            return True
        if volume["spec"].get("persistentVolumeReclaimPolicy") != "Retain":
            self.api.patch(
                "PersistentVolume", volume_name, {"spec": {"persistentVolumeReclaimPolicy": "Retain"}}
            )
        self.api.delete("PersistentVolume", volume_name)
        return self.api.get("PersistentVolume", volume_name) is None

    # --- model serving metrics ------------------------------------------------------------------

    def serving_metrics(self, spec: WorkloadSpec) -> dict[str, str | None]:
        """Each replica's runtime metrics, by pod name: read pod by pod through the API server's
        proxy (`pods/proxy`) on the runtime's metrics port, since the Service would answer from
        any one replica and counters must be followed per server. A pod that is not ready, or
        does not answer, maps to None; one being deleted or finished is left out."""
        if spec.serving is None:
            return {}
        selector = ",".join(f"{key}={value}" for key, value in serving_selector(spec).items())
        port = runtime_metrics_port(spec.serving)
        found: dict[str, str | None] = {}
        for pod in self.api.list("Pod", spec.namespace, label_selector=selector):
            name = pod["metadata"]["name"]
            finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            if pod["metadata"].get("deletionTimestamp") or finished:
                continue
            if not _ready(pod):
                found[name] = None
                continue
            try:
                found[name] = self.api.pod_proxy_get(
                    name, spec.namespace, port=port, path=METRICS_PATH, timeout=self.options.metrics_timeout
                )
            except KubernetesApiError as exc:
                if exc.status in (401, 403):
                    raise  # the portal may not use the proxy: the whole read fails, saying why
                log.info("metrics of %s/%s on port %s: %s", spec.namespace, name, port, exc.message)
                found[name] = None
        return found

    # --- GPU nodes and MIG --------------------------------------------------------------------

    def discover_gpu_nodes(self) -> list[DiscoveredGpuNode]:
        """Nodes GPU Feature Discovery labelled with a GPU product, with their GPUs' UUIDs and MIG
        placements where NVIDIA's DRA driver publishes them in ResourceSlices (a cluster without
        `resource.k8s.io/v1`, before Kubernetes 1.34, has none)."""
        nodes = [
            node for node in map(discovered_node, self.api.list("Node", label_selector=GPU_PRODUCT)) if node
        ]
        try:
            slices = self.api.list("ResourceSlice")
        except KubernetesApiError as exc:
            if exc.status not in (403, 404):
                raise
            slices = []
        published = dra_gpus(slices)
        nodes = [
            dataclasses.replace(
                node, gpu_uuids=published[node.name][0], dra_mig_gpus=tuple(sorted(published[node.name][1]))
            )
            if node.name in published
            else node
            for node in nodes
        ]
        return sorted(nodes, key=lambda node: node.name)

    def gpu_type(self, node: DiscoveredGpuNode) -> str | None:
        """The portal GPU type slug of a discovered node, from `options.product_slugs`."""
        return gpu_type_slug(node.product, self.options.product_slugs)

    def _mig_node(self, node: str, layout: MigLayout) -> tuple[dict, dict[str, str], int, tuple[str, str]]:
        """The Node, its labels, its GPU count, and the layout's two config names (see
        mig_config_name); a final error when the node is not in the cluster."""
        found = self.api.get("Node", node)
        if found is None:
            raise DriverError(f"node {node} not found in cluster {self.config.name}", retryable=False)
        labels = dict(found.get("metadata", {}).get("labels") or {})
        gpu_count = int(labels.get(GPU_COUNT, "0") or 0)
        names = (
            mig_config_name(node, layout, gpu_count),
            mig_config_name(node, layout, gpu_count, retry=True),
        )
        return found, labels, gpu_count, names

    def apply_mig_layout(self, node: str, layout: MigLayout, *, retry: bool = False) -> None:
        """Move the node towards the layout through the MIG manager; call again until
        `mig_layout_state` says it is done (each call does the next safe step, or nothing).

        GPUs in `layout` get MIG with those slices; the node's other GPUs get MIG off, and
        mig-parted leaves every GPU whose config is unchanged alone. In order:

        1. The layout is written as a mig-parted config of its own name into the ConfigMap the
           MIG manager mounts, with the time it was written.
        2. The node's `nvidia.com/mig.config` label is pointed at it only once the kubelet has
           had time to refresh the mounted file (`mig_config_settle_seconds`), and never while
           the MIG manager is still at work on an earlier change (`pending`, `rebooting`): a
           change made then can leave a stale `success` behind. With the label the state label
           is set to `pending`, so an earlier `success` is never read as this layout's.
        3. After `failed` the MIG manager waits for the label to change, and so does this, until
           the caller asks to `retry`: then the node is pointed at the layout's second name
           (written, then settled, the same way).
        """
        if self.config.mig_mode == "dynamic":
            return  # the DRA driver cuts each slice when its claim is allocated: no layout to ask for
        _, labels, gpu_count, names = self._mig_node(node, layout)
        outside = [index for index in layout if index < 0 or (gpu_count and index >= gpu_count)]
        if outside:
            raise DriverError(
                f"node {node} has {gpu_count} GPUs; the layout names GPU {outside}", retryable=False
            )
        current, state = labels.get(MIG_CONFIG, ""), labels.get(MIG_CONFIG_STATE, "")
        if current in names and (state != "failed" or not retry):
            return  # pointed at it already: the MIG manager is at work, done, or failed it
        name = names[1] if current == names[0] else names[0]
        written = self._write_mig_config(node, name, mig_parted_entries(layout, gpu_count), keep=current)
        if state in ("pending", "rebooting"):
            return  # never change the label under the MIG manager's feet
        if (self.clock() - written).total_seconds() < self.options.mig_config_settle_seconds:
            return  # the mounted file may not show the new config yet
        self.api.patch(
            "Node", node, {"metadata": {"labels": {MIG_CONFIG: name, MIG_CONFIG_STATE: "pending"}}}
        )

    def _write_mig_config(self, node: str, name: str, entries: list[dict], keep: str) -> datetime:
        """Add the config to the shared ConfigMap, and an annotation with when it was first
        written; returns that time. resourceVersion guards against lost updates when several
        nodes are reconfigured at once. Configs the node no longer needs are dropped with their
        annotations (not `keep`, the one its label points at)."""
        cm_name, cm_namespace = self.options.mig_config_map, self.options.mig_config_namespace
        for _attempt in range(3):
            config_map = self.api.get("ConfigMap", cm_name, cm_namespace)
            try:
                if config_map is None:
                    self.api.create(
                        {
                            "apiVersion": "v1",
                            "kind": "ConfigMap",
                            "metadata": {
                                "name": cm_name,
                                "namespace": cm_namespace,
                                "labels": {MANAGED_BY_KEY: MANAGED_BY},
                                "annotations": {written_at_key(name): _stamp(self.clock())},
                            },
                            "data": {MIG_CONFIG_KEY: merge_mig_config("", node, name, entries, keep)},
                        }
                    )
                    return self.clock()
                current = (config_map.get("data") or {}).get(MIG_CONFIG_KEY, "")
                wanted = merge_mig_config(current, node, name, entries, keep)
                annotations = config_map["metadata"].get("annotations") or {}
                stamped = annotations.get(written_at_key(name))
                written = _parse_stamp(stamped) if stamped else None  # unreadable: stamped again
                if wanted == current and written is not None:
                    return written
                configs = set((yaml.safe_load(wanted) or {}).get("mig-configs") or {})
                changes: dict[str, str | None] = {
                    key: None
                    for key in annotations
                    if key.startswith(WRITTEN_AT_PREFIX)
                    and key.removeprefix(WRITTEN_AT_PREFIX) not in configs
                }
                now = self.clock()
                if written is None:
                    changes[written_at_key(name)] = _stamp(now)
                version = config_map["metadata"].get("resourceVersion")
                body = {
                    "metadata": {"resourceVersion": version, "annotations": changes},
                    "data": {MIG_CONFIG_KEY: wanted},
                }
                self.api.patch("ConfigMap", cm_name, body, cm_namespace)
                # A config already in the file before it was stamped counts from now: its age is unknown.
                return written or now
            except KubernetesApiError as exc:
                if exc.status != 409:
                    raise
        raise DriverError(f"ConfigMap {cm_namespace}/{cm_name} kept changing while writing {name}")

    def mig_layout_state(self, node: str, layout: MigLayout) -> MigLayoutState:
        """`success` only when the node is pointed at this layout's config, the MIG manager says
        `success`, and the device plugin advertises what the layout makes; `failed` when the MIG
        manager failed this layout; else `pending`. On a "dynamic" cluster there is no layout to
        wait for: the DRA driver creates each slice as its claim is prepared."""
        if self.config.mig_mode == "dynamic":
            return "success"
        found, labels, _, names = self._mig_node(node, layout)
        if labels.get(MIG_CONFIG) not in names:
            return "pending"
        state = layout_state(labels)
        if state == "success" and not advertised_matches(found, layout):
            return "pending"  # a stale success, or the device plugin has not re-registered yet
        return state


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_stamp(value: str) -> datetime | None:
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def _ready(pod: dict) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
