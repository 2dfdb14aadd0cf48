"""What the Kubernetes driver does for a sandbox's owner beside running it: restart its pod, read
its events and log, issue kubectl tokens, keep and move their home volume, and give it its team
datasets. A mixin of KubernetesDriver, kept apart so each module stays about one thing."""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from workers.drivers.base import DriverError, EventLine, HomeState, KubectlToken, PodInsight
from workers.drivers.kubernetes_api import KubeApi, KubernetesApiError
from workers.drivers.kubernetes_status import event_time
from workers.drivers.prometheus import volume_used_gb
from workers.manifests import MANAGED_BY, MANAGED_BY_KEY, SANDBOX_ID_KEY
from workers.manifests.datasets import claim_name as dataset_claim_name
from workers.manifests.datasets import copied_volume_name
from workers.manifests.kubectl import KUBECTL_ACCOUNT, kubectl_objects
from workers.manifests.names import HOME_OWNER_KEY, POD_NAME, label_value, object_meta
from workers.manifests.policy import DATASET_CLAIM_MIB, limit_range_manifest, resource_quota_manifest
from workers.manifests.route import TLS_SECRET, has_route
from workers.manifests.workload import HOME_VOLUME
from workers.spec import DatasetMount, WorkloadSpec

if TYPE_CHECKING:
    from workers.drivers.base import ClusterConfig
    from workers.drivers.kubernetes import KubernetesOptions

INSIGHT_EVENTS = 20  # the newest events shown on a sandbox's page
MIN_TOKEN_SECONDS = 600  # the shortest token the TokenRequest API issues


class SandboxPartsMixin:
    """Needs what KubernetesDriver has: its API, its cluster's config and options, its `_apply`."""

    api: KubeApi
    config: ClusterConfig
    options: KubernetesOptions
    if TYPE_CHECKING:

        def _apply(self, obj: dict) -> None: ...

    def restart_workload(self, spec: WorkloadSpec) -> None:
        """Delete the sandbox's pod; its StatefulSet makes a new one on the pinned node, which
        mounts the same home claim."""
        self.api.delete("Pod", POD_NAME, spec.namespace)

    def workload_insight(self, spec: WorkloadSpec, *, log_lines: int = 100) -> PodInsight:
        """The namespace's newest events and the pod's log tail (two reads, asked for by a person)."""
        events = sorted(self.api.list("Event", spec.namespace), key=event_time)[-INSIGHT_EVENTS:]
        return PodInsight(
            events=tuple(
                EventLine(
                    at=event_time(event),
                    type=event.get("type", ""),
                    reason=event.get("reason", ""),
                    message=(event.get("message") or "").strip()[:300],
                    object="/".join(
                        part
                        for part in (
                            event.get("involvedObject", {}).get("kind", ""),
                            event.get("involvedObject", {}).get("name", ""),
                        )
                        if part
                    ),
                )
                for event in events
            ),
            log_tail=self.api.pod_log(POD_NAME, spec.namespace, tail_lines=log_lines),
        )

    def kubectl_token(self, spec: WorkloadSpec, *, seconds: int) -> KubectlToken:
        """A TokenRequest for the sandbox's ServiceAccount. The API server may shorten the
        expiry (never below 10 minutes); deleting the namespace revokes the token at once."""
        answer = self.api.request_token(
            KUBECTL_ACCOUNT, spec.namespace, seconds=max(MIN_TOKEN_SECONDS, seconds)
        )
        status = answer.get("status") or {}
        if not status.get("token"):
            raise DriverError(f"the API server issued no token for {spec.namespace}/{KUBECTL_ACCOUNT}")
        server, ca = self.api.endpoint()
        return KubectlToken(
            token=status["token"],
            expires_at=datetime.fromisoformat(str(status["expirationTimestamp"]).replace("Z", "+00:00")),
            server=self.config.user_api_url or server,
            ca_pem=self.config.user_ca_data or ca,
            namespace=spec.namespace,
        )

    def revoke_kubectl(self, spec: WorkloadSpec) -> None:
        """The sandbox's ServiceAccount made anew: the API server checks the uid of the account a
        token names, so every token issued before is refused from now on (not only at its expiry),
        and a later kubeconfig comes from the new account."""
        self.api.delete("ServiceAccount", KUBECTL_ACCOUNT, spec.namespace)
        account = next(
            obj for obj in kubectl_objects(spec, self.options.manifests) if obj["kind"] == "ServiceAccount"
        )
        self._apply(account)

    def _prebind_home(self, spec: WorkloadSpec) -> None:
        """Point the owner's home volume at this sandbox's claim before the claim is made (the
        volume was Released by the last sandbox's claim, which is gone with its namespace)."""
        home = spec.home
        if home is None or not home.volume_name:
            return
        if self.api.get("PersistentVolumeClaim", HOME_VOLUME, spec.namespace) is not None:
            return
        volume = self.api.get("PersistentVolume", home.volume_name)
        if volume is None:
            raise DriverError(f"the home volume {home.volume_name} is gone from the cluster", retryable=False)
        ref = volume.get("spec", {}).get("claimRef") or {}
        phase = (volume.get("status") or {}).get("phase", "")
        if phase == "Bound" and ref.get("namespace") != spec.namespace:
            raise DriverError(
                f"the home volume {home.volume_name} is still bound to {ref.get('namespace')}/{ref.get('name')}; "
                "waiting for that sandbox's namespace to go"
            )
        wanted = {"namespace": spec.namespace, "name": HOME_VOLUME}
        if (ref.get("namespace"), ref.get("name")) != (spec.namespace, HOME_VOLUME) or ref.get("uid"):
            claim_ref = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                **wanted,
                "uid": None,
                "resourceVersion": None,
            }
            self.api.patch("PersistentVolume", home.volume_name, {"spec": {"claimRef": claim_ref}})

    def _provide_dataset(self, spec: WorkloadSpec, mount: DatasetMount) -> None:
        """What a dataset needs in the sandbox's namespace beside its pod volume: a bucket's
        credentials, or a claim bound to a read-only copy of an existing claim's volume."""
        if mount.kind == "bucket" and mount.credentials_secret:
            source = self.api.get("Secret", mount.credentials_secret, self.options.dataset_namespace)
            if source is None:
                raise DriverError(
                    f"dataset {mount.slug}: no Secret {mount.credentials_secret} in namespace "
                    f"{self.options.dataset_namespace} holds its credentials",
                    retryable=False,
                )
            copy = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": object_meta(spec, dataset_claim_name(mount)),
                "type": source.get("type", "Opaque"),
                "data": source.get("data") or {},
            }
            self._create_once(copy)
        if mount.kind != "pvc":
            return
        volume_name = copied_volume_name(spec, mount)
        if self.api.get("PersistentVolume", volume_name) is None:
            self.api.create(self._read_only_copy(spec, mount, volume_name))
        claim = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": object_meta(spec, dataset_claim_name(mount)),
            "spec": {
                "accessModes": ["ReadOnlyMany"],
                "storageClassName": "",
                "volumeName": volume_name,
                "resources": {"requests": {"storage": f"{DATASET_CLAIM_MIB}Mi"}},
            },
        }
        self._apply(claim)

    def _read_only_copy(self, spec: WorkloadSpec, mount: DatasetMount, name: str) -> dict:
        """A volume on the same storage as the dataset's claim, read-only, kept when the sandbox's
        claim goes (the data is the team's), reserved for the sandbox's claim."""
        source = self.api.get("PersistentVolumeClaim", mount.claim_name, mount.claim_namespace)
        bound = (source or {}).get("spec", {}).get("volumeName")
        volume = self.api.get("PersistentVolume", bound) if bound else None
        if volume is None:
            raise DriverError(
                f"dataset {mount.slug}: claim {mount.claim_namespace}/{mount.claim_name} is missing or not bound",
                retryable=False,
            )
        kept = {
            key: value
            for key, value in volume["spec"].items()
            if key not in ("claimRef", "accessModes", "persistentVolumeReclaimPolicy", "storageClassName")
        }
        if "csi" in kept:
            kept["csi"] = {**kept["csi"], "readOnly": True}
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": name,
                "labels": {MANAGED_BY_KEY: MANAGED_BY, SANDBOX_ID_KEY: str(spec.workload_id)},
            },
            "spec": {
                **kept,
                "accessModes": ["ReadOnlyMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "claimRef": {"namespace": spec.namespace, "name": dataset_claim_name(mount)},
            },
        }

    def _copy_tls_secret(self, spec: WorkloadSpec) -> None:
        """The sandbox domain's wildcard certificate, copied where the sandbox's Ingress names it
        (only when the cluster asks for that rather than the controller's default certificate)."""
        route = self.options.manifests.route
        if not (route.kind == "ingress" and route.tls_secret and has_route(spec)):
            return
        namespace, _, name = route.tls_secret.rpartition("/")
        source = self.api.get("Secret", name, namespace or None) if namespace else None
        if source is None:
            raise DriverError(
                f"the sandbox domain's certificate Secret {route.tls_secret} is missing (the cluster's setting)",
                retryable=False,
            )
        copy = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": object_meta(spec, TLS_SECRET),
            "type": source.get("type", "kubernetes.io/tls"),
            "data": source.get("data") or {},
        }
        self._create_once(copy)

    def _create_once(self, obj: dict) -> None:
        """Create an object the portal may not read back (a copied Secret): one already there stays."""
        try:
            self.api.create(obj)
        except KubernetesApiError as exc:
            if exc.status != 409:
                raise

    def home_state(self, spec: WorkloadSpec) -> HomeState:
        """Read the home claim; once bound, keep its volume past the sandbox (Retain, labelled
        as the owner's home) and grow the claim to the home's size."""
        home = spec.home
        claim = self.api.get("PersistentVolumeClaim", HOME_VOLUME, spec.namespace) if home else None
        if home is None or claim is None or (claim.get("status") or {}).get("phase") != "Bound":
            return HomeState(bound=False)
        volume_name = claim["spec"].get("volumeName", "")
        capacity = _gigabytes((claim.get("status") or {}).get("capacity", {}).get("storage", "0"))
        volume = self.api.get("PersistentVolume", volume_name)
        if volume is not None:
            labels = volume.get("metadata", {}).get("labels") or {}
            wanted_labels = {MANAGED_BY_KEY: MANAGED_BY, HOME_OWNER_KEY: label_value(home.owner)}
            if volume["spec"].get("persistentVolumeReclaimPolicy") != "Retain" or any(
                labels.get(key) != value for key, value in wanted_labels.items()
            ):
                self.api.patch(
                    "PersistentVolume",
                    volume_name,
                    {
                        "metadata": {"labels": wanted_labels},
                        "spec": {"persistentVolumeReclaimPolicy": "Retain"},
                    },
                )
        requested = _gigabytes(claim["spec"]["resources"]["requests"]["storage"])
        if requested < home.size_gb:
            # the namespace's quota and claim limit follow the home's new size first
            self._apply(resource_quota_manifest(spec))
            self._apply(limit_range_manifest(spec))
            self.api.patch(
                "PersistentVolumeClaim",
                HOME_VOLUME,
                {"spec": {"resources": {"requests": {"storage": f"{home.size_gb}Gi"}}}},
                spec.namespace,
            )
        used = volume_used_gb(self.options.prometheus_url, namespace=spec.namespace, claim=HOME_VOLUME)
        return HomeState(bound=True, volume_name=volume_name, capacity_gb=capacity, used_gb=used)

    @property
    def reports_home_use(self) -> bool:
        """Homes' use is read where the cluster's Prometheus is known."""
        return bool(self.options.prometheus_url)

    def delete_home(self, volume_name: str) -> bool:
        """Delete a home volume no sandbox holds; its reclaim policy set to Delete first, so the
        storage goes with it (Kubernetes 1.33 honours the policy when a volume is deleted)."""
        volume = self.api.get("PersistentVolume", volume_name)
        if volume is None:
            return True
        if (volume.get("status") or {}).get("phase") == "Bound":
            ref = volume["spec"].get("claimRef") or {}
            raise DriverError(f"{volume_name} is still bound to {ref.get('namespace')}/{ref.get('name')}")
        if volume["spec"].get("persistentVolumeReclaimPolicy") != "Delete":
            self.api.patch(
                "PersistentVolume", volume_name, {"spec": {"persistentVolumeReclaimPolicy": "Delete"}}
            )
        self.api.delete("PersistentVolume", volume_name)
        return True


_UNITS = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "": 1,
}  # fmt: skip


def _gigabytes(quantity: str) -> int:
    """A storage quantity in whole GiB, rounded down: "100Gi" -> 100, "1Ti" -> 1024, "50G" -> 46."""
    found = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(quantity).strip())
    if found is None or found.group(2) not in _UNITS:
        return 0
    return int(Decimal(found.group(1)) * _UNITS[found.group(2)] // 2**30)
