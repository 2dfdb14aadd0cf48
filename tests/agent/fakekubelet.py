"""A fake kubelet PodResources server: gRPC over a unix socket, answering `v1.PodResourcesLister/List`
with the containers and devices a test gives it, in the kubelet's wire format."""

from __future__ import annotations

from concurrent import futures
from dataclasses import dataclass, field

import grpc

from workers.agent.podresources import MESSAGES


@dataclass
class FakePod:
    namespace: str
    name: str
    devices: dict[str, list[str]] = field(default_factory=dict)  # resource name -> device IDs
    claims: list[tuple[str, str, str, str]] = field(default_factory=list)  # (claim, driver, pool, device)
    container: str = "main"


class FakeKubelet:
    def __init__(self, socket_path: str, pods: list[FakePod]):
        self.socket_path = socket_path
        self.pods = pods
        self.calls = 0
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        handler = grpc.unary_unary_rpc_method_handler(
            self.list,
            request_deserializer=MESSAGES["ListPodResourcesRequest"].FromString,
            response_serializer=MESSAGES["ListPodResourcesResponse"].SerializeToString,
        )
        self.server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler("v1.PodResourcesLister", {"List": handler})]
        )
        self.server.add_insecure_port(f"unix://{socket_path}")

    def list(self, request, context):
        self.calls += 1
        answer = MESSAGES["ListPodResourcesResponse"]()
        for pod in self.pods:
            message = answer.pod_resources.add(name=pod.name, namespace=pod.namespace)
            container = message.containers.add(name=pod.container)
            for resource, ids in pod.devices.items():
                container.devices.add(resource_name=resource, device_ids=ids)
            for claim, driver, pool, device in pod.claims:
                dynamic = container.dynamic_resources.add(claim_name=claim, claim_namespace=pod.namespace)
                dynamic.claim_resources.add(driver_name=driver, pool_name=pool, device_name=device)
        return answer

    def __enter__(self) -> FakeKubelet:
        self.server.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.stop(grace=None)
