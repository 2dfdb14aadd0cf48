"""Model serving manifests: one pinned Deployment per replica behind one Service, schema-valid,
with a quota that counts every replica."""

from __future__ import annotations

import dataclasses

import kubernetes_validate
import pytest

from tests.fakekube import SCHEMA_VERSION, FakeKube, fixtures
from tests.workers.test_manifests import make_serving_spec
from workers.drivers.base import ClusterConfig, DriverError
from workers.drivers.kubernetes import KubernetesDriver, KubernetesOptions
from workers.manifests import workload_objects
from workers.manifests.names import is_dns_label
from workers.manifests.options import ManifestOptions, ModelVolume
from workers.manifests.pods import pinned_node

fake_kube = fixtures.fake_kube
kube_driver = fixtures.kube_driver


def test_serving_objects_pass_the_strict_official_schema() -> None:
    for obj in workload_objects(make_serving_spec(replicas=3)):
        assert kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True) == SCHEMA_VERSION
        assert is_dns_label(obj["metadata"]["name"])


def test_each_replica_is_a_deployment_pinned_to_its_node_with_its_gpu() -> None:
    spec = make_serving_spec(replicas=2)
    deployments = [obj for obj in workload_objects(spec) if obj["kind"] == "Deployment"]
    assert [d["metadata"]["name"] for d in deployments] == ["serve-0", "serve-1"]
    nodes = [pinned_node(d["spec"]["template"]["spec"]) for d in deployments]
    assert nodes == ["gpu-h100-a", "gpu-h100-b"]
    container = deployments[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:2] == ["vllm", "serve"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["readinessProbe"]["httpGet"]["path"] == "/v1/models"
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert deployments[0]["spec"]["strategy"] == {"type": "Recreate"}
    assert not any(obj["kind"] == "StatefulSet" for obj in workload_objects(spec))


def test_a_replica_can_run_as_a_uid_without_a_passwd_entry_and_asks_for_its_cache() -> None:
    spec = make_serving_spec(replicas=1, storage_gb=164)
    deployment = next(obj for obj in workload_objects(spec) if obj["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = {item["name"]: item["value"] for item in container["env"]}
    # torch's getpass needs a user name; every runtime cache goes under the writable /cache
    assert env["USER"] == "portal" and env["HOME"] == "/cache"
    assert env["XDG_CACHE_HOME"] == "/cache/.cache" and env["HF_HOME"] == "/cache/huggingface"
    cache = next(volume for volume in pod["volumes"] if volume["name"] == "cache")
    assert cache["emptyDir"]["sizeLimit"] == "164Gi"
    assert container["resources"]["requests"]["ephemeral-storage"] == "164Gi"
    assert container["resources"]["limits"]["ephemeral-storage"] == "164Gi"


def test_quota_counts_every_replica_exactly() -> None:
    spec = make_serving_spec(replicas=3)
    quota = next(obj for obj in workload_objects(spec) if obj["kind"] == "ResourceQuota")["spec"]["hard"]
    assert quota["requests.nvidia.com/gpu"] == "3"
    assert quota["pods"] == "3"
    assert quota["requests.cpu"] == str(spec.cpu * 3)
    assert quota["persistentvolumeclaims"] == "0"


def test_on_a_gateway_cluster_the_quota_admits_the_checks_service_beside_the_models() -> None:
    from workers.manifests.options import SandboxRoute

    options = ManifestOptions(route=SandboxRoute(kind="httproute"))
    objects = workload_objects(make_serving_spec(replicas=1), options)
    quota = next(obj for obj in objects if obj["kind"] == "ResourceQuota")["spec"]["hard"]
    services = [obj["metadata"]["name"] for obj in objects if obj["kind"] == "Service"]
    assert services == ["model", "portal-auth"]
    assert int(quota["services"]) >= len(services)


def test_service_selects_the_replicas_on_the_runtime_port() -> None:
    service = next(obj for obj in workload_objects(make_serving_spec()) if obj["kind"] == "Service")
    assert service["metadata"]["name"] == "model"
    assert service["spec"]["ports"][0]["port"] == 8000
    assert service["spec"]["selector"]["gpu-portal/sandbox-id"] == "77"


def test_scaling_down_deletes_the_replicas_scaled_away(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    spec = make_serving_spec(replicas=2)
    kube_driver.apply_workload(spec)
    assert fake_kube.get("Deployment", "serve-1", spec.namespace) is not None
    assert spec.serving is not None
    one = dataclasses.replace(
        spec, serving=dataclasses.replace(spec.serving, replicas=spec.serving.replicas[:1])
    )
    kube_driver.apply_workload(one)
    assert fake_kube.get("Deployment", "serve-0", spec.namespace) is not None
    assert fake_kube.get("Deployment", "serve-1", spec.namespace) is None


def test_serving_status_waits_for_every_replica(fake_kube: FakeKube, kube_driver: KubernetesDriver) -> None:
    spec = make_serving_spec(replicas=1)
    kube_driver.apply_workload(spec)
    status = kube_driver.workload_status(spec)
    assert status.phase == "pending"
    assert status.access == f"https://{spec.access_host}"


def test_a_teams_hugging_face_token_reaches_the_servers_from_a_secret_never_in_the_clear() -> None:
    spec = make_serving_spec(replicas=1)
    assert spec.serving is not None
    gated = dataclasses.replace(spec, serving=dataclasses.replace(spec.serving, hf_token="hf_abcdefgh1234"))
    objects = workload_objects(gated)
    secret = next(obj for obj in objects if obj["kind"] == "Secret")
    assert secret["metadata"]["name"] == "hf-token" and secret["data"] == {"HF_TOKEN": "aGZfYWJjZGVmZ2gxMjM0"}
    container = next(obj for obj in objects if obj["kind"] == "Deployment")["spec"]["template"]["spec"][
        "containers"
    ][0]
    (env,) = [item for item in container["env"] if item["name"] == "HF_TOKEN"]
    assert env == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN"}}}
    assert "hf_abcdefgh1234" not in repr(gated)  # the spec never prints it
    assert not [obj for obj in workload_objects(spec) if obj["kind"] == "Secret"]  # no token, no Secret
    for obj in objects:
        assert kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True) == SCHEMA_VERSION


def test_a_triton_repository_on_a_path_no_volume_holds_fails_with_the_reason(
    kube_driver: KubernetesDriver,
) -> None:
    spec = make_serving_spec(replicas=1)
    assert spec.serving is not None
    command = ("tritonserver", "--model-repository=/models/triton/resnet-50", "--http-port", "8000")
    triton = dataclasses.replace(spec, serving=dataclasses.replace(spec.serving, command=command))
    with pytest.raises(DriverError) as refused:
        kube_driver.apply_workload(triton)
    assert refused.value.retryable is False
    assert "model repository /models/triton/resnet-50 is a path" in refused.value.message
    assert "PORTAL_MODEL_VOLUME names none" in refused.value.message
    remote = ("tritonserver", "--model-repository=s3://models/triton/resnet-50", "--http-port", "8000")
    kube_driver.apply_workload(
        dataclasses.replace(spec, serving=dataclasses.replace(spec.serving, command=remote))
    )


def test_a_triton_repository_beside_the_model_volume_fails_naming_where_the_volume_is(
    fake_kube: FakeKube,
) -> None:
    volume = ModelVolume(source={"csi": {"driver": "nfs.csi.k8s.io"}}, mount_path="/models")
    assert volume.holds("/models") and volume.holds("/models/triton/resnet-50")
    assert not volume.holds("/models2/resnet-50") and not volume.holds("/data/resnet-50")
    assert not ModelVolume().holds("/models/resnet-50")  # no source, nothing is held
    config = ClusterConfig(name="fake", driver="kubernetes", api_url=fake_kube.url)
    driver = KubernetesDriver(config, KubernetesOptions(manifests=ManifestOptions(model_volume=volume)))
    spec = make_serving_spec(replicas=1)
    assert spec.serving is not None
    command = ("tritonserver", "--model-repository=/data/resnet-50", "--http-port", "8000")
    with pytest.raises(DriverError) as refused:
        driver.apply_workload(
            dataclasses.replace(spec, serving=dataclasses.replace(spec.serving, command=command))
        )
    assert "(the model volume is mounted at /models)" in refused.value.message
    assert fake_kube.list("Deployment", spec.namespace) == []  # nothing applied
