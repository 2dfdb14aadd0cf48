"""A served model on the Kubernetes driver, end to end over HTTP: the fake's Deployment controller
makes each replica's pod, a replica reaches running once its pod is ready, and a Failed pod its
ReplicaSet replaced says nothing about the replica."""

from __future__ import annotations

import pytest

from portal.deployments.models import Serving
from portal.deployments.services import deployment_request
from portal.workloads.models import Workload, WorkloadState
from tests.deployments import conftest as deployment_fixtures
from workers.reconcile.workloads import reconcile_workload

pytestmark = pytest.mark.django_db
catalog = deployment_fixtures.catalog  # the fixture, where pytest looks for it
S = WorkloadState


def test_a_served_model_reaches_running_when_its_replica_is_ready(
    run_jobs, fake_kube, kube_cluster, catalog, researcher
):
    deployment = run_jobs(
        lambda: deployment_request(
            user=researcher, team="vision", name="llama8b", model="llama-3.1-8b-instruct",
            gpu_type="h100-80gb", count=1,
        )
    )  # fmt: skip
    deployment = Workload.objects.get(pk=deployment.pk)
    assert deployment.state == S.PROVISIONING
    (pod,) = fake_kube.list("Pod", deployment.namespace)
    assert pod["metadata"]["name"].startswith("serve-0-")
    container = pod["spec"]["containers"][0]
    assert container["command"][:2] == ["vllm", "serve"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"

    reconcile_workload(deployment.pk)
    assert Workload.objects.get(pk=deployment.pk).state == S.PROVISIONING  # not ready yet

    fake_kube.pod_running(deployment.namespace, name=pod["metadata"]["name"])
    reconcile_workload(deployment.pk)
    deployment.refresh_from_db()
    assert deployment.state == S.RUNNING
    assert Serving.objects.get(workload=deployment).ready_replicas == 1
    assert deployment.access.startswith("https://")


@pytest.fixture
def model_volume(settings):
    """The cluster's model repositories on an NFS server, through the NFS CSI driver inline."""
    from workers.drivers.factory import get_driver

    settings.PORTAL_MODEL_VOLUME = {
        "csi": {
            "driver": "nfs.csi.k8s.io",
            "volumeAttributes": {"server": "nfs.internal", "share": "/export/models"},
        }
    }
    get_driver.cache_clear()
    yield settings.PORTAL_MODEL_VOLUME
    get_driver.cache_clear()


def test_a_triton_repository_on_the_model_volume_is_mounted_read_only_and_serves(
    run_jobs, fake_kube, kube_cluster, catalog, researcher, model_volume
):
    deployment = run_jobs(
        lambda: deployment_request(
            user=researcher, team="vision", name="resnet", model="resnet-50", gpu_type="h100-80gb", count=1,
        )
    )  # fmt: skip
    deployment = Workload.objects.get(pk=deployment.pk)
    assert deployment.state == S.PROVISIONING, deployment.message
    # the pod passed the namespace's Pod Security "restricted" admission with its CSI volume
    (pod,) = fake_kube.list("Pod", deployment.namespace)
    container = pod["spec"]["containers"][0]
    assert "--model-repository=/models/triton/resnet-50" in container["command"]
    assert {"name": "models", "mountPath": "/models", "readOnly": True} in container["volumeMounts"]
    assert {"name": "models", **model_volume} in pod["spec"]["volumes"]

    fake_kube.pod_running(deployment.namespace, name=pod["metadata"]["name"])
    reconcile_workload(deployment.pk)
    assert Workload.objects.get(pk=deployment.pk).state == S.RUNNING
