"""The Kubernetes driver, with the real client over HTTP against the fake API server."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
import yaml

from portal.fleet.geometry import GPU_MODELS
from tests.fakekube import FakeKube, fixtures
from tests.workers.test_manifests import HOST_KEY, SLICE, make_spec
from workers.drivers.base import ClusterConfig, DriverError
from workers.drivers.kubernetes import KubernetesDriver, KubernetesOptions
from workers.drivers.kubernetes_nodes import gpu_type_slug, product_slug_table
from workers.manifests import ManifestOptions, workload_objects
from workers.manifests.pods import pinned_node

fake_kube = fixtures.fake_kube
kube_driver = fixtures.kube_driver

SPEC = make_spec()
NS = SPEC.namespace
SANDBOX_KINDS = ("ResourceQuota", "LimitRange", "NetworkPolicy", "RoleBinding", "Service", "StatefulSet")


def versions(fake: FakeKube) -> dict[str, str]:
    found = {kind: fake.get(kind, name, NS) for kind, name in _names().items()}
    found["Namespace"] = fake.get("Namespace", NS)
    return {kind: obj["metadata"]["resourceVersion"] for kind, obj in found.items() if obj is not None}


def _names() -> dict[str, str]:
    return {obj["kind"]: obj["metadata"]["name"] for obj in workload_objects(SPEC)}


# --- apply ----------------------------------------------------------------------------------------


def test_apply_creates_every_object_the_builders_produce(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    kube_driver.apply_workload(SPEC)
    assert fake_kube.get("Namespace", NS)["metadata"]["labels"]["gpu-portal/sandbox-id"] == "42"
    for kind in SANDBOX_KINDS:
        assert fake_kube.get(kind, _names()[kind], NS) is not None, kind
    pod = fake_kube.get("Pod", "sandbox-0", NS)
    assert pinned_node(pod["spec"]) == "gpu-h100-a" and "nodeSelector" not in pod["spec"]


def test_an_unchanged_workload_is_not_applied_again_until_the_drift_cadence(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    kube_driver.apply_workload(SPEC)
    before = versions(fake_kube)
    fake_kube.requests.clear()
    kube_driver.apply_workload(SPEC)
    assert fake_kube.requests == []  # nothing changed since the last apply: no request at all
    kube_driver._applied[SPEC.namespace] = (
        kube_driver._applied[SPEC.namespace][0],
        datetime(2020, 1, 1, tzinfo=UTC),
    )
    kube_driver.apply_workload(SPEC)  # the drift cadence came: read every object, write nothing
    assert versions(fake_kube) == before
    assert {r.verb for r in fake_kube.requests} == {"get"} and len(fake_kube.requests) == 10


def test_objects_that_went_missing_are_applied_again_on_the_next_pass(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    kube_driver.apply_workload(SPEC)
    with fake_kube.store.lock:
        fake_kube.api.store.delete(("namespaces", "", SPEC.namespace))
        fake_kube.api.store.delete_namespace_contents(SPEC.namespace)
    assert kube_driver.workload_status(SPEC).phase == "absent"
    kube_driver.apply_workload(SPEC)
    assert fake_kube.get("Namespace", SPEC.namespace) is not None


def test_a_throttled_request_waits_out_retry_after_and_goes_through(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    waited: list[float] = []
    kube_driver.api.sleep = waited.append
    fake_kube.fail_next(429, method="POST", path_contains="/namespaces", retry_after=2)
    kube_driver.apply_workload(SPEC)
    assert waited == [2.0]
    assert fake_kube.get("Namespace", SPEC.namespace) is not None


def test_applying_a_changed_spec_patches_what_differs(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    kube_driver.apply_workload(SPEC)
    changed = dataclasses.replace(SPEC, image="registry.local/pytorch:2.9", cpu=12)
    fake_kube.requests.clear()
    kube_driver.apply_workload(changed)
    patched = {r.resource for r in fake_kube.requests if r.verb == "patch"}
    assert patched == {"resourcequotas", "limitranges", "statefulsets"}
    assert all(
        r.content_type == "application/merge-patch+json" for r in fake_kube.requests if r.verb == "patch"
    )
    container = fake_kube.get("StatefulSet", "sandbox", NS)["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.local/pytorch:2.9"
    assert fake_kube.get("ResourceQuota", "sandbox-quota", NS)["spec"]["hard"]["requests.cpu"] == "12"


def test_dropping_the_cluster_identity_removes_the_owner_binding(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    kube_driver.apply_workload(SPEC)
    kube_driver.apply_workload(dataclasses.replace(SPEC, user_identity=""))
    assert fake_kube.get("RoleBinding", "sandbox-owner", NS) is None
    kube_driver.apply_workload(dataclasses.replace(SPEC, user_identity=""))  # nothing left to delete: fine


def test_the_watch_of_a_running_sandbox_removes_the_owner_binding_once_the_spec_has_none(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    """An owner deactivated or removed from the team: their own cluster identity would otherwise
    keep exec and port-forward into the sandbox, which only apply_workload (never run again on a
    running sandbox) used to take away."""
    kube_driver.apply_workload(SPEC)
    kube_driver.refresh_access(SPEC)
    assert fake_kube.get("RoleBinding", "sandbox-owner", NS) is not None
    kube_driver.refresh_access(dataclasses.replace(SPEC, user_identity=""))
    assert fake_kube.get("RoleBinding", "sandbox-owner", NS) is None
    kube_driver.refresh_access(SPEC)  # back in the team: bound again
    assert fake_kube.get("RoleBinding", "sandbox-owner", NS) is not None


def test_a_route_the_cluster_refuses_does_not_hold_up_shutting_the_owner_out(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    shell = dataclasses.replace(
        SPEC, image_kind="shell", ssh_host_key=HOST_KEY, ssh_keys=("ssh-ed25519 AAAA k",)
    )
    kube_driver.apply_workload(shell)
    out = dataclasses.replace(shell, user_identity="", ssh_keys=())
    fake_kube.fail_next(422, method="PATCH", path_contains="/resourcequotas/", times=5)
    fake_kube.fail_next(422, method="POST", path_contains="/resourcequotas", times=5)
    quota = dataclasses.replace(out, cpu=out.cpu + 4)  # a quota change the cluster refuses
    with pytest.raises(DriverError):
        kube_driver.refresh_access(quota)
    assert fake_kube.get("RoleBinding", "sandbox-owner", NS) is None  # gone all the same
    secret = fake_kube.get("Secret", "ssh-keys", NS)
    assert secret["data"]["authorized_keys"] == ""  # and the keys


def test_the_owners_binding_is_asked_away_once_per_process_not_at_every_pass(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    """A cluster that binds no identity: one DELETE (answered 404) when this process first looks
    after the workload, none at the passes after."""
    unbound = dataclasses.replace(SPEC, user_identity="")
    kube_driver.apply_workload(unbound)
    for clock in range(3):
        kube_driver.clock = lambda clock=clock: datetime(2030, 1, 1, clock, tzinfo=UTC)  # each pass stale
        kube_driver.refresh_access(unbound)
    deletes = [r for r in fake_kube.requests if r.verb == "delete" and r.resource == "rolebindings"]
    assert len(deletes) == 2  # the apply's, and the first watch pass's


def test_a_change_kubernetes_forbids_is_a_final_error_naming_the_field(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    kube_driver.apply_workload(SPEC)
    with pytest.raises(DriverError) as caught:
        kube_driver.apply_workload(dataclasses.replace(SPEC, storage_gb=500))
    assert caught.value.retryable is False
    assert "cannot change volumeClaimTemplates in place" in caught.value.message
    stored = fake_kube.get("StatefulSet", "sandbox", NS)["spec"]["volumeClaimTemplates"][0]
    assert stored["spec"]["resources"]["requests"]["storage"] == "100Gi"


def test_a_change_the_server_refuses_is_a_final_error_with_its_message(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    kube_driver.apply_workload(SPEC)
    message = 'StatefulSet.apps "sandbox" is invalid: spec.template.spec.containers[0].image: Required value'
    fake_kube.fail_next(422, method="PATCH", message=message)
    with pytest.raises(DriverError) as caught:
        kube_driver.apply_workload(dataclasses.replace(SPEC, image="registry.local/other:1"))
    assert caught.value.retryable is False
    assert caught.value.message == f"the cluster rejected patch statefulsets/sandbox: {message}"


def test_a_new_cluster_role_for_the_owner_replaces_the_binding(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    kube_driver.apply_workload(SPEC)
    options = KubernetesOptions(manifests=ManifestOptions(user_cluster_role="view"))
    KubernetesDriver(kube_driver.config, options).apply_workload(SPEC)
    assert fake_kube.get("RoleBinding", "sandbox-owner", NS)["roleRef"]["name"] == "view"


def test_an_unbuildable_spec_is_a_final_error(kube_driver: KubernetesDriver) -> None:
    with pytest.raises(DriverError) as caught:
        kube_driver.apply_workload(dataclasses.replace(SPEC, cpu=0))
    assert caught.value.retryable is False and "cpu must be at least 1" in caught.value.message


# --- status ---------------------------------------------------------------------------------------


def test_status_is_absent_before_apply_and_pending_until_the_pod_is_ready(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    assert kube_driver.workload_status(SPEC).phase == "absent"
    kube_driver.apply_workload(SPEC)
    assert kube_driver.workload_status(SPEC).phase == "pending"
    fake_kube.pod_running(NS, ready=False)
    status = kube_driver.workload_status(SPEC)
    assert (status.phase, status.access) == ("pending", "")
    assert "accept connections" in status.message


def test_a_ready_jupyter_sandbox_is_running_with_its_url(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    kube_driver.apply_workload(SPEC)
    fake_kube.pod_running(NS)
    status = kube_driver.workload_status(SPEC)
    assert status.phase == "running"
    assert status.access == "https://sbx-42.sandboxes.gpu.internal/"


def test_a_ready_shell_sandbox_is_running_with_an_ssh_command(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    spec = dataclasses.replace(SPEC, image_kind="shell", gpu=SLICE, ssh_host_key=HOST_KEY)
    kube_driver.apply_workload(spec)
    fake_kube.pod_running(NS)
    assert kube_driver.workload_status(spec).access == "ssh -p 2222 alice@sbx-42.sandboxes.gpu.internal"


def test_an_image_pull_failure_fails_with_the_registrys_words(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    kube_driver.apply_workload(SPEC)
    fake_kube.pod_image_pull_failed(NS, image="registry.local/nope:1")
    status = kube_driver.workload_status(SPEC)
    assert status.phase == "failed"
    assert status.message.startswith("image pull failed: ")
    assert 'registry.local/nope:1": not found' in status.message


def test_an_unschedulable_pod_waits_with_the_schedulers_reason(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    kube_driver.apply_workload(SPEC)
    fake_kube.pod_unschedulable(NS)
    status = kube_driver.workload_status(SPEC)
    assert status.phase == "pending"
    assert status.message.startswith(
        "unschedulable: 0/4 nodes are available: 1 Insufficient nvidia.com/mig-1g.10gb"
    )


def test_a_sandbox_killed_again_and_again_for_memory_fails_as_oom_killed(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    kube_driver.apply_workload(SPEC)
    fake_kube.pod_oom_killed(NS)
    status = kube_driver.workload_status(SPEC)
    assert status.phase == "failed"
    assert status.message.startswith("OOM-killed")


def test_an_evicted_pod_is_pending_while_the_statefulset_recreates_it(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    kube_driver.apply_workload(SPEC)
    fake_kube.pod_evicted(NS)
    status = kube_driver.workload_status(SPEC)
    assert status.phase == "pending"
    assert status.message.startswith("evicted: The node was low on resource: memory")


def test_a_pod_the_controller_cannot_create_is_pending_with_its_event(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    kube_driver.apply_workload(SPEC)
    fake_kube.api.store.delete(("pods", NS, "sandbox-0"))
    fake_kube.add_event(
        NS, "StatefulSet", "sandbox", "FailedCreate", 'pods "sandbox-0" is forbidden: exceeded quota'
    )
    status = kube_driver.workload_status(SPEC)
    assert status.phase == "pending"
    assert (
        status.message == 'waiting for the pod to be created: pods "sandbox-0" is forbidden: exceeded quota'
    )


# --- delete and list ------------------------------------------------------------------------------


def test_delete_removes_the_namespace_and_deleting_again_is_fine(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    kube_driver.apply_workload(SPEC)
    assert kube_driver.delete_workload(SPEC) is True
    assert fake_kube.get("Namespace", NS) is None and fake_kube.list("StatefulSet", NS) == []
    assert kube_driver.delete_workload(SPEC) is True
    assert [r.status for r in fake_kube.requests if r.verb == "delete"] == [200, 404]
    assert kube_driver.workload_status(SPEC).phase == "absent"


def test_delete_reports_a_terminating_namespace_until_it_is_gone() -> None:
    with FakeKube(slow_namespace_deletion=True) as fake:
        driver = KubernetesDriver(ClusterConfig("fake", "kubernetes", api_url=fake.url))
        driver.apply_workload(SPEC)
        assert driver.delete_workload(SPEC) is False
        assert driver.workload_status(SPEC).phase == "terminating"
        assert driver.delete_workload(SPEC) is False  # the server answers 409 while it empties it
        with pytest.raises(DriverError) as caught:
            driver.apply_workload(SPEC)
        assert caught.value.retryable is True and "still being deleted" in caught.value.message
        fake.finish_namespace_deletions()
        assert driver.delete_workload(SPEC) is True


def test_managed_namespaces_are_the_portal_labelled_ones(kube_driver: KubernetesDriver) -> None:
    kube_driver.apply_workload(SPEC)
    other = make_spec(workload_id=7, name="other")
    kube_driver.apply_workload(dataclasses.replace(other, namespace="sbx-vision-other-7"))
    found = sorted((ns.name, ns.workload_id, ns.kind) for ns in kube_driver.managed_namespaces())
    assert found == [(NS, 42, "sandbox"), ("sbx-vision-other-7", 7, "sandbox")]


# --- errors ---------------------------------------------------------------------------------------


def test_forbidden_is_a_final_error_saying_what_the_portal_may_not_do(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    fake_kube.fail_next(403, method="POST", path_contains="/namespaces")
    with pytest.raises(DriverError) as caught:
        kube_driver.apply_workload(SPEC)
    assert caught.value.retryable is False
    assert caught.value.message.startswith("the portal's service account may not create namespaces")


def test_a_server_error_is_retryable(fake_kube: FakeKube, kube_driver: KubernetesDriver) -> None:
    kube_driver.apply_workload(SPEC)
    fake_kube.fail_next(500, path_contains="/statefulsets/")
    with pytest.raises(DriverError) as caught:
        kube_driver.workload_status(SPEC)
    assert caught.value.retryable is True
    assert "etcd timeout" in caught.value.message
    assert kube_driver.workload_status(SPEC).phase == "pending"  # the next try goes through


def test_a_slow_api_server_times_out_as_retryable(fake_kube: FakeKube) -> None:
    config = ClusterConfig("fake", "kubernetes", api_url=fake_kube.url)
    driver = KubernetesDriver(config, KubernetesOptions(timeout=(1.0, 0.2)))
    fake_kube.stall_next(0.6, path_contains="/nodes")
    with pytest.raises(DriverError) as caught:
        driver.discover_gpu_nodes()
    assert caught.value.retryable is True and "could not reach" in caught.value.message


def test_an_unreachable_api_server_is_retryable() -> None:
    with FakeKube() as fake:
        url = fake.url
    driver = KubernetesDriver(
        ClusterConfig("gone", "kubernetes", api_url=url), KubernetesOptions(timeout=(0.5, 0.5))
    )
    with pytest.raises(DriverError) as caught:
        driver.managed_namespaces()
    assert caught.value.retryable is True


def test_a_missing_kubeconfig_is_a_final_error(tmp_path) -> None:
    config = ClusterConfig("prod", "kubernetes", kubeconfig=str(tmp_path / "missing"), context="prod")
    with pytest.raises(DriverError) as caught:
        KubernetesDriver(config).managed_namespaces()
    assert (
        caught.value.retryable is False and "cannot load credentials for cluster prod" in caught.value.message
    )


# --- GPU nodes and MIG ----------------------------------------------------------------------------


def test_gpu_nodes_are_discovered_from_feature_discovery_labels(kube_driver: KubernetesDriver) -> None:
    nodes = {node.name: node for node in kube_driver.discover_gpu_nodes()}
    assert sorted(nodes) == ["gpu-a100-a", "gpu-h100-a", "gpu-h100-b"]  # the CPU node is skipped
    whole = nodes["gpu-h100-a"]
    assert (whole.product, whole.gpu_count, whole.gpu_memory_mb) == ("NVIDIA-H100-80GB-HBM3", 8, 81559)
    assert (whole.mig_capable, whole.mig_strategy, whole.mig_config) == (True, "mixed", "all-disabled")
    assert whole.allocatable == {"nvidia.com/gpu": 8}
    sliced = nodes["gpu-h100-b"]
    assert sliced.allocatable["nvidia.com/mig-1g.10gb"] == 16 and sliced.mig_config_state == "success"


def test_gpu_products_map_to_portal_gpu_types_under_every_strategy(fake_kube: FakeKube) -> None:
    table = product_slug_table(GPU_MODELS.values())
    driver = KubernetesDriver(
        ClusterConfig("fake", "kubernetes", api_url=fake_kube.url), KubernetesOptions(product_slugs=table)
    )
    assert {node.name: driver.gpu_type(node) for node in driver.discover_gpu_nodes()} == {
        "gpu-a100-a": "a100-40gb",
        "gpu-h100-a": "h100-80gb",
        "gpu-h100-b": "h100-80gb",
    }
    assert gpu_type_slug("NVIDIA-H200-SHARED", table) == "h200-141gb"
    assert gpu_type_slug("Tesla-T4", table) is None


def _mig_config(fake: FakeKube) -> dict:
    config_map = fake.get("ConfigMap", "gpu-portal-mig-parted-config", "gpu-operator")
    return yaml.safe_load(config_map["data"]["config.yaml"])


def test_a_mig_layout_becomes_a_mig_parted_config_and_a_node_label(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    kube_driver.apply_mig_layout("gpu-h100-a", {0: [("1g.10gb", 0), ("1g.10gb", 1), ("3g.40gb", 4)], 2: []})
    labels = fake_kube.get("Node", "gpu-h100-a")["metadata"]["labels"]
    name = labels["nvidia.com/mig.config"]
    assert name.startswith("gpu-portal-gpu-h100-a-") and len(name) <= 63
    assert labels["nvidia.com/mig.config.state"] == "pending"
    config = _mig_config(fake_kube)
    assert config["version"] == "v1"
    entries = config["mig-configs"][name]
    assert entries[0] == {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 2, "3g.40gb": 1}}
    assert entries[1] == {"devices": [1], "mig-enabled": False}
    assert entries[2] == {"devices": [2], "mig-enabled": True, "mig-devices": {}}
    assert len(entries) == 8
    assert "all-disabled" in config["mig-configs"]


def test_a_concurrent_change_to_the_mig_config_map_is_retried(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    kube_driver.apply_mig_layout("gpu-h100-b", {0: [("1g.10gb", 0)]})
    fake_kube.fail_next(409, method="PATCH", path_contains="/configmaps/")
    kube_driver.apply_mig_layout("gpu-h100-a", {0: [("1g.10gb", 0)]})
    name = fake_kube.get("Node", "gpu-h100-a")["metadata"]["labels"]["nvidia.com/mig.config"]
    assert name in _mig_config(fake_kube)["mig-configs"]


def test_a_layout_for_a_missing_node_or_gpu_is_a_final_error(kube_driver: KubernetesDriver) -> None:
    with pytest.raises(DriverError) as missing:
        kube_driver.apply_mig_layout("gpu-nope", {0: [("1g.10gb", 0)]})
    assert missing.value.retryable is False and "node gpu-nope not found" in missing.value.message
    with pytest.raises(DriverError) as outside:
        kube_driver.apply_mig_layout("gpu-a100-a", {4: [("1g.5gb", 0)]})
    assert outside.value.retryable is False and "has 4 GPUs" in outside.value.message


def test_a_connection_reset_is_a_retryable_error_and_the_next_pass_goes_through(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    fake_kube.reset_next(method="GET", path_contains="/namespaces/")
    with pytest.raises(DriverError) as reset:
        kube_driver.apply_workload(SPEC)
    assert reset.value.retryable is True and "could not reach the Kubernetes API" in reset.value.message
    kube_driver.apply_workload(SPEC)
    assert fake_kube.get("Namespace", SPEC.namespace) is not None
