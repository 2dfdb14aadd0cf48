"""Which pod holds which GPU device, from the kubelet's PodResources API (gRPC over the unix socket
`/var/lib/kubelet/pod-resources/kubelet.sock`, service `v1.PodResourcesLister`, call `List`).

The device plugin's device IDs are what the kubelet handed each container: with NVIDIA's device
plugin (its default `deviceIDStrategy: uuid`) a GPU's UUID (`GPU-...`) or a MIG device's
(`MIG-...`); with time-slicing or MPS sharing a replica suffix `::<n>` follows, dropped here.
Devices given through DRA ResourceClaims are named by their driver's pool and device, not by
UUID; they are listed apart (`claims`), unmapped.

The messages are declared here, at run time, for the fields read (field numbers as the kubelet's
v1 API defines them): no generated code to keep in step with the protobuf runtime."""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
METHOD = "/v1.PodResourcesLister/List"
_STRING, _MESSAGE = (
    descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
)
_ONE, _MANY = (
    descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
)

# message -> [(field, number, type, label, message type)]
_MESSAGES = {
    "ListPodResourcesRequest": [],
    "ListPodResourcesResponse": [("pod_resources", 1, _MESSAGE, _MANY, "PodResources")],
    "PodResources": [
        ("name", 1, _STRING, _ONE, ""),
        ("namespace", 2, _STRING, _ONE, ""),
        ("containers", 3, _MESSAGE, _MANY, "ContainerResources"),
    ],
    "ContainerResources": [
        ("name", 1, _STRING, _ONE, ""),
        ("devices", 2, _MESSAGE, _MANY, "ContainerDevices"),
        ("dynamic_resources", 5, _MESSAGE, _MANY, "DynamicResource"),
    ],
    "ContainerDevices": [("resource_name", 1, _STRING, _ONE, ""), ("device_ids", 2, _STRING, _MANY, "")],
    "DynamicResource": [
        ("claim_name", 2, _STRING, _ONE, ""),
        ("claim_namespace", 3, _STRING, _ONE, ""),
        ("claim_resources", 4, _MESSAGE, _MANY, "ClaimResource"),
    ],
    "ClaimResource": [
        ("driver_name", 2, _STRING, _ONE, ""),
        ("pool_name", 3, _STRING, _ONE, ""),
        ("device_name", 4, _STRING, _ONE, ""),
    ],
}


def _message_classes() -> dict[str, type]:
    proto = descriptor_pb2.FileDescriptorProto(
        name="gpu_portal/podresources_v1.proto", package="v1", syntax="proto3"
    )
    for name, fields in _MESSAGES.items():
        message = proto.message_type.add(name=name)
        for field_name, number, kind, label, type_name in fields:
            added = message.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                added.type_name = f".v1.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"v1.{name}")) for name in _MESSAGES
    }


MESSAGES = _message_classes()


@dataclass(frozen=True)
class Holder:
    namespace: str
    pod: str
    container: str
    resource: str  # "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"


@dataclass
class PodDevices:
    """Device ID (a GPU's or MIG device's UUID) -> the containers the kubelet gave it to."""

    devices: dict[str, list[Holder]] = field(default_factory=dict)
    claims: list[dict] = field(default_factory=list)  # DRA: {namespace, pod, claim, driver, pool, device}
    error: str = ""

    def holders(self, uuid: str) -> list[dict]:
        return [holder.__dict__ for holder in self.devices.get(uuid, [])]


def device_id(raw: str) -> str:
    """The device's UUID from the device plugin's ID: a sharing replica's `::<n>` dropped."""
    return raw.split("::", 1)[0]


def list_pod_devices(
    socket: str = SOCKET, *, timeout: float = 5.0, resource_prefix: str = "nvidia.com/"
) -> PodDevices:
    """Ask the kubelet which containers hold which devices; an unreachable kubelet is reported in
    `error` (the readings still go, without the mapping), never raised."""
    found = PodDevices()
    try:
        with grpc.insecure_channel(f"unix://{socket}") as channel:
            call = channel.unary_unary(
                METHOD,
                request_serializer=MESSAGES["ListPodResourcesRequest"].SerializeToString,
                response_deserializer=MESSAGES["ListPodResourcesResponse"].FromString,
            )
            answer = call(MESSAGES["ListPodResourcesRequest"](), timeout=timeout)
    except grpc.RpcError as error:
        found.error = f"PodResources: {error.code().name}: {error.details()}"
        return found
    for pod in answer.pod_resources:
        for container in pod.containers:
            for devices in container.devices:
                if not devices.resource_name.startswith(resource_prefix):
                    continue
                holder = Holder(pod.namespace, pod.name, container.name, devices.resource_name)
                for raw in devices.device_ids:
                    held = found.devices.setdefault(device_id(raw), [])
                    if holder not in held:
                        held.append(holder)
            for claim in container.dynamic_resources:
                for resource in claim.claim_resources:
                    found.claims.append(
                        {
                            "namespace": pod.namespace,
                            "pod": pod.name,
                            "claim": claim.claim_name,
                            "driver": resource.driver_name,
                            "pool": resource.pool_name,
                            "device": resource.device_name,
                        }
                    )
    return found
