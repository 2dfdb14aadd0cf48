"""NVIDIA's DRA driver with dynamic MIG, and the scheduler's allocation of ResourceClaims, on the
fake's DRA nodes (true to dra-driver-nvidia-gpu v25.12 `DynamicMIG`, Kubernetes 1.34):

- DeviceClasses `gpu.nvidia.com` and `mig.nvidia.com` select the driver's devices by the
  `type` attribute.
- One ResourceSlice per node lists, per GPU, the whole GPU (`gpu-<minor>`) and every MIG
  placement the geometry allows (`gpu-<minor>-mig-<profile>-<profile id>-<start>`, attributes
  `type=mig`, `parentUUID`, `profile`, `productName`), and a counter set per GPU
  (`gpu-<minor>-counter-set`) with one counter per memory slice: a device consumes the slices
  its placement covers, so placements that overlap, or a placement and the whole GPU, are never
  allocated at once. (The real driver also counts engines; the fake counts one media extension.)
- When a pod that names ResourceClaims is created, each unallocated claim gets the first device
  on the pod's node that its class and CEL selectors accept and whose counters are free; the
  placement's start slot is the driver's and the scheduler's choice, never the claim's. A claim
  that cannot be met leaves the pod Pending with a FailedScheduling event.

CEL: the fake evaluates the forms the portal writes (terms joined by `&&`:
`device.driver == '...'` and `device.attributes['gpu.nvidia.com'].<name> == '...'`) and fails
loudly on anything else.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

from portal.fleet.geometry import MEMORY_SLOTS, gpu_model
from tests.fakekube import controllers
from tests.fakekube.resources import BY_KIND
from workers.manifests.pods import pinned_node

if TYPE_CHECKING:
    from tests.fakekube.api import FakeApi

DRIVER = "gpu.nvidia.com"
_TERM = re.compile(r"^device\.(driver|attributes\['gpu\.nvidia\.com'\]\.([A-Za-z]+))\s*==\s*'([^']*)'$")


def device_classes() -> list[dict]:
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{kind}'"
                        }
                    }
                ]
            },
        }
        for name, kind in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig"))
    ]


def gpu_uuid(node: str, minor: int) -> str:
    digest = hashlib.sha256(f"{node}/{minor}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _canonical(profile: str) -> str:
    return re.sub(r"[^a-z0-9-]", "-", profile.replace(".", ""))


def resource_slice(node: str, gpu_type: str, gpus: int) -> dict:
    """The driver's ResourceSlice for a node of `gpus` GPUs of `gpu_type`, MIG on."""
    model = gpu_model(gpu_type)
    assert model is not None
    product = model.products[0]
    devices, counter_sets = [], []
    for minor in range(gpus):
        uuid = gpu_uuid(node, minor)
        counter_set = f"gpu-{minor}-counter-set"
        counters = {f"memory-slice-{i}": {"value": "1"} for i in range(MEMORY_SLOTS)}
        counter_sets.append(
            {"name": counter_set, "counters": {**counters, "media-extensions": {"value": "1"}}}
        )
        devices.append(
            {
                "name": f"gpu-{minor}",
                "attributes": {
                    "type": {"string": "gpu"},
                    "uuid": {"string": uuid},
                    "index": {"int": minor},
                    "minor": {"int": minor},
                    "productName": {"string": product},
                },
                "consumesCounters": [{"counterSet": counter_set, "counters": dict(counters)}],
            }
        )
        for shape in model.profiles:
            for start in shape.starts:
                if start + shape.size > MEMORY_SLOTS:
                    continue
                used = {f"memory-slice-{i}": {"value": "1"} for i in range(start, start + shape.size)}
                if shape.media:
                    used["media-extensions"] = {"value": "1"}
                devices.append(
                    {
                        "name": f"gpu-{minor}-mig-{_canonical(shape.name)}-{shape.profile_id}-{start}",
                        "attributes": {
                            "type": {"string": "mig"},
                            "parentUUID": {"string": uuid},
                            "profile": {"string": shape.name},
                            "productName": {"string": product},
                        },
                        "consumesCounters": [{"counterSet": counter_set, "counters": used}],
                    }
                )
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "sharedCounters": counter_sets,
            "devices": devices,
        },
    }


def _matches(expression: str, device: dict) -> bool:
    for term in (part.strip() for part in expression.split("&&")):
        found = _TERM.match(term)
        if found is None:
            raise AssertionError(f"the fake cannot evaluate CEL term {term!r}")
        what, attribute, value = found.groups()
        if what == "driver":
            if value != DRIVER:
                return False
        elif (device["attributes"].get(attribute) or {}).get("string") != value:
            return False
    return True


class FakeDra:
    """Allocates ResourceClaims when pods that name them are created (scheduler + driver)."""

    def __init__(self, api: FakeApi) -> None:
        self.api = api
        api.pod_created.append(self.allocate_for)

    def _consumed(self) -> dict[tuple[str, str, str], int]:
        """(pool, counter set, counter) -> amount held by allocated claims."""
        by_name = {
            (s["spec"]["pool"]["name"], d["name"]): d
            for s in self.api.store.list("resourceslices")
            for d in s["spec"]["devices"]
        }
        used: dict[tuple[str, str, str], int] = {}
        for claim in self.api.store.list("resourceclaims"):
            results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get(
                "results"
            ) or []
            for result in results:
                device = by_name.get((result["pool"], result["device"]))
                for consumption in (device or {}).get("consumesCounters") or []:
                    for counter in consumption["counters"]:
                        key = (result["pool"], consumption["counterSet"], counter)
                        used[key] = used.get(key, 0) + 1
        return used

    def allocate_for(self, pod: dict) -> None:
        spec = pod.get("spec") or {}
        namespace = pod["metadata"].get("namespace", "")
        node = pinned_node(spec)
        for ref in spec.get("resourceClaims") or []:
            key = ("resourceclaims", namespace, ref.get("resourceClaimName", ""))
            claim = self.api.store.get(key)
            if claim is None:
                self._unschedulable(pod, f'resourceclaim "{ref.get("resourceClaimName")}" not found')
                continue
            if (claim.get("status") or {}).get("allocation"):
                continue
            results = []
            for request in claim["spec"]["devices"]["requests"]:
                device = self._pick(node, request["exactly"])
                if device is None:
                    self._unschedulable(pod, "cannot allocate all claims")
                    return
                results.append({"request": request["name"], "driver": DRIVER, **device})
            claim["status"] = {
                "allocation": {"devices": {"results": results}},
                "reservedFor": [
                    {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
                ],
            }
            self.api.store.put(key, claim)

    def _pick(self, node: str | None, request: dict) -> dict | None:
        device_class = self.api.store.get(("deviceclasses", "", request["deviceClassName"]))
        if device_class is None:
            return None
        expressions = [s["cel"]["expression"] for s in device_class["spec"].get("selectors") or []]
        expressions += [s["cel"]["expression"] for s in request.get("selectors") or []]
        used = self._consumed()
        for resource_slice_ in self.api.store.list("resourceslices"):
            if resource_slice_["spec"].get("nodeName") != node:
                continue
            pool = resource_slice_["spec"]["pool"]["name"]
            capacity = {
                (counter_set["name"], name): int(counter["value"])
                for counter_set in resource_slice_["spec"].get("sharedCounters") or []
                for name, counter in counter_set["counters"].items()
            }
            for device in resource_slice_["spec"]["devices"]:
                if not all(_matches(expression, device) for expression in expressions):
                    continue
                needs = [
                    (consumption["counterSet"], name)
                    for consumption in device.get("consumesCounters") or []
                    for name in consumption["counters"]
                ]
                if all(used.get((pool, *need), 0) < capacity.get(need, 0) for need in needs):
                    return {"pool": pool, "device": device["name"]}
        return None

    def _unschedulable(self, pod: dict, why: str) -> None:
        namespace, name = pod["metadata"].get("namespace", ""), pod["metadata"]["name"]
        controllers.add_event(
            self.api,
            namespace,
            "Pod",
            name,
            "FailedScheduling",
            f"0/1 nodes are available: {why}.",
            "Warning",
        )
        stored = self.api.store.get(("pods", namespace, name))
        if stored is not None:
            stored["status"] = {
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": why}
                ],
            }
            self.api.store.put(("pods", namespace, name), stored)


def install(api: FakeApi, nodes: list[tuple[str, str, int]]) -> FakeDra:
    """DeviceClasses, and a ResourceSlice per (node, gpu type, GPUs), then the allocator."""
    for obj in device_classes():
        api.create(BY_KIND["DeviceClass"], "", obj)
    for node, gpu_type, gpus in nodes:
        api.create(BY_KIND["ResourceSlice"], "", resource_slice(node, gpu_type, gpus))
    return FakeDra(api)
