"""MIG slices claimed through NVIDIA's DRA driver (a "dynamic" cluster): a ResourceClaim per slice,
pinned to the GPU and profile the portal placed it on, and the pod's reference to it.

The claim's CEL selectors pin the parent GPU (`parentUUID`) and the profile; the driver and the
scheduler choose the placement on that GPU (the start slot is not a device attribute), and the
driver creates the MIG device when the claim is prepared, without touching the GPU's other slices.
"""

from __future__ import annotations

from workers.manifests.names import object_meta
from workers.spec import GpuClaim, WorkloadSpec

DRA_DRIVER = "gpu.nvidia.com"
MIG_DEVICE_CLASS = "mig.nvidia.com"
POD_CLAIM = "gpu"  # the name the pod and its container use for the claim
# ResourceQuota's name for DRA devices of a class (Kubernetes 1.34+).
MIG_DEVICE_QUOTA = f"{MIG_DEVICE_CLASS}.deviceclass.resource.k8s.io/devices"


def claim_name(replica: int | None = None) -> str:
    """`gpu-slice` for a sandbox; `gpu-slice-r<N>` for replica N of a deployment."""
    return "gpu-slice" if replica is None else f"gpu-slice-r{replica}"


def uses_dra(claim: GpuClaim) -> bool:
    return bool(claim.dra_parent_uuid and claim.mig_profile)


def pinning_expression(claim: GpuClaim) -> str:
    attributes = f"device.attributes['{DRA_DRIVER}']"
    return f"{attributes}.parentUUID == '{claim.dra_parent_uuid}' && {attributes}.profile == '{claim.mig_profile}'"


def resource_claim_manifest(spec: WorkloadSpec, claim: GpuClaim, name: str) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": object_meta(spec, name),
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "slice",
                        "exactly": {
                            "deviceClassName": MIG_DEVICE_CLASS,
                            "allocationMode": "ExactCount",
                            "count": 1,
                            "selectors": [{"cel": {"expression": pinning_expression(claim)}}],
                        },
                    }
                ]
            }
        },
    }


def claim_pod_spec(pod_spec: dict, container: dict, name: str) -> None:
    """Point the pod and its container at the claim `name` (in place)."""
    pod_spec["resourceClaims"] = [{"name": POD_CLAIM, "resourceClaimName": name}]
    container.setdefault("resources", {})["claims"] = [{"name": POD_CLAIM}]
