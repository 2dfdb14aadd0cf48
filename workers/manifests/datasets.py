"""Team datasets in a sandbox's pod: each a read-only volume at /data/<slug>.

An NFS export is an inline CSI volume of the NFS CSI driver (Pod Security `restricted` admits CSI
volumes, not `nfs` ones), a bucket an inline CSI volume of its driver (its credentials Secret,
when it has one, copied into the namespace by the driver), an existing claim a claim of the
sandbox's own namespace bound to a read-only copy of the claim's volume (made by the driver)."""

from __future__ import annotations

from workers.manifests.options import ManifestOptions
from workers.spec import DatasetMount, WorkloadSpec

DATA_ROOT = "/data"


def volume_name(mount: DatasetMount) -> str:
    return f"data-{mount.slug}"


def claim_name(mount: DatasetMount) -> str:
    """The sandbox's claim on a claim-backed dataset, and the Secret of a bucket's credentials."""
    return f"dataset-{mount.slug}"


def copied_volume_name(spec: WorkloadSpec, mount: DatasetMount) -> str:
    """The read-only copy of a claim-backed dataset's volume for one sandbox (cluster-scoped)."""
    return f"ds-{mount.slug}-{spec.workload_id}"


def dataset_volume(mount: DatasetMount, options: ManifestOptions) -> dict:
    if mount.kind == "nfs":
        attributes = {"server": mount.nfs_server, "share": mount.nfs_path}
        return {
            "name": volume_name(mount),
            "csi": {"driver": options.nfs_csi_driver, "readOnly": True, "volumeAttributes": attributes},
        }
    if mount.kind == "bucket":
        csi: dict = {
            "driver": mount.csi_driver,
            "readOnly": True,
            "volumeAttributes": {"bucketName": mount.bucket, **dict(mount.volume_attributes)},
        }
        if mount.credentials_secret:
            csi["nodePublishSecretRef"] = {"name": claim_name(mount)}
        return {"name": volume_name(mount), "csi": csi}
    return {
        "name": volume_name(mount),
        "persistentVolumeClaim": {"claimName": claim_name(mount), "readOnly": True},
    }


def add_datasets(pod_spec: dict, spec: WorkloadSpec, options: ManifestOptions) -> None:
    """Mount each of the sandbox's datasets read-only at /data/<slug> in its one container."""
    for mount in spec.datasets:
        pod_spec["volumes"].append(dataset_volume(mount, options))
        pod_spec["containers"][0]["volumeMounts"].append(
            {"name": volume_name(mount), "mountPath": f"{DATA_ROOT}/{mount.slug}", "readOnly": True}
        )
