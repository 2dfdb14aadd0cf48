"""The sandbox manifest builders: valid objects, exact quotas, locked-down pods on the placed node."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime

import kubernetes_validate
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fakekube import SCHEMA_VERSION
from tests.fakekube.validation import QUANTITY, is_dns_subdomain, schema_version
from workers.manifests import (
    AccessPath,
    ManifestOptions,
    label_value,
    mig_resource_name,
    network_policy_manifest,
    quota_hard,
    role_binding_manifest,
    sandbox_access,
    workload_namespace_name,
    workload_objects,
)
from workers.manifests.names import MAX_LABEL, is_dns_label, is_qualified_name
from workers.manifests.options import SandboxEgress
from workers.spec import GpuClaim, HomeVolume, ServingSpec, WorkloadSpec

WHOLE = GpuClaim(resource="nvidia.com/gpu", count=2, node="gpu-h100-a", gpu_indices=(0, 1))
SLICE = GpuClaim(
    resource="nvidia.com/mig-1g.10gb",
    count=1,
    node="gpu-h100-b",
    gpu_indices=(3,),
    mig_profile="1g.10gb",
    mig_start=2,
)

LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def is_label_value(value: str) -> bool:
    """What the API server accepts as a label value."""
    return len(value) <= MAX_LABEL and bool(LABEL_VALUE.match(value))


def make_spec(**overrides: object) -> WorkloadSpec:
    values: dict = {
        "workload_id": 42,
        "name": "Llama finetune",
        "team": "vision",
        "owner": "alice",
        "namespace": workload_namespace_name("vision", "Llama finetune", 42),
        "image": "quay.io/jupyter/pytorch-notebook:cuda12-2025-10-20",
        "image_kind": "jupyter",
        "cpu": 8,
        "memory_gb": 64,
        "storage_gb": 100,
        "gpu": WHOLE,
        "expires_at": datetime(2026, 1, 5, 18, 0, tzinfo=UTC),
        "access_host": "sbx-42.sandboxes.gpu.internal",
        "user_identity": "alice@firm.example",
    }
    values.update(overrides)
    if values["image_kind"] == "shell":
        values.setdefault("ssh_host_key", HOST_KEY)  # the portal makes one for each ssh sandbox
    return WorkloadSpec(**values)


# An ed25519 host key in OpenSSH's format (a test key, made for these tests alone).
HOST_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)


def make_serving_spec(replicas: int = 2, **overrides: object) -> WorkloadSpec:
    """A vLLM deployment of `replicas` replicas, each one whole H100 on its own node."""
    claims = tuple(
        GpuClaim(resource="nvidia.com/gpu", count=1, node=f"gpu-h100-{'ab'[i % 2]}", gpu_indices=(i,))
        for i in range(replicas)
    )
    serving = ServingSpec(
        model="llama-3.1-8b-instruct",
        image="vllm/vllm-openai:v0.8.5",
        command=("vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--port", "8000"),
        port=8000,
        health_path="/health",
        readiness_path="/v1/models",
        api="openai",
        replicas=claims,
    )
    values: dict = {
        "workload_id": 77,
        "name": "llama8b",
        "namespace": workload_namespace_name("vision", "llama8b", 77),
        "image": serving.image,
        "gpu": claims[0],
        "storage_gb": 50,
        "serving": serving,
        "user_identity": "",
    }
    values.update(overrides)
    return make_spec(**values)


def by_kind(objects: list[dict]) -> dict[str, dict]:
    return {obj["kind"]: obj for obj in objects}


def pod_spec(spec: WorkloadSpec, options: ManifestOptions | None = None) -> dict:
    return by_kind(workload_objects(spec, options))["StatefulSet"]["spec"]["template"]["spec"]


VARIANTS = {
    "whole GPUs, jupyter": make_spec(),
    "MIG slice, shell": make_spec(gpu=SLICE, image_kind="shell", image="registry.local/shell:1"),
    "no cluster identity": make_spec(user_identity=""),
    "service account identity": make_spec(user_identity="system:serviceaccount:ci:runner"),
}


@pytest.mark.parametrize("spec", VARIANTS.values(), ids=VARIANTS.keys())
def test_every_object_passes_the_strict_official_schema(spec: WorkloadSpec) -> None:
    for obj in workload_objects(spec):
        assert kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True) == SCHEMA_VERSION


@pytest.mark.parametrize("spec", VARIANTS.values(), ids=VARIANTS.keys())
def test_every_name_label_and_quantity_is_one_the_api_server_accepts(spec: WorkloadSpec) -> None:
    for obj in workload_objects(spec):
        metadata = obj["metadata"]
        assert is_dns_label(metadata["name"]), metadata["name"]
        assert metadata.get("namespace", spec.namespace) == spec.namespace
        for key, value in metadata.get("labels", {}).items():
            assert is_qualified_name(key) and is_label_value(value), (key, value)
        for key in metadata.get("annotations", {}):
            assert is_qualified_name(key), key
    hard = quota_hard(spec)
    assert all(is_qualified_name(key) and QUANTITY.match(value) for key, value in hard.items())


def test_objects_come_namespace_first_and_workload_last() -> None:
    kinds = [obj["kind"] for obj in workload_objects(make_spec())]
    assert kinds == [
        "Namespace",
        "ResourceQuota",
        "LimitRange",
        "NetworkPolicy",
        "RoleBinding",
        "ServiceAccount",
        "RoleBinding",
        "Service",
        "Ingress",
        "StatefulSet",
    ]


def test_building_twice_gives_identical_objects() -> None:
    assert workload_objects(make_spec()) == workload_objects(make_spec())


@given(
    team=st.text(max_size=80),
    name=st.text(max_size=120),
    workload_id=st.integers(min_value=0, max_value=10**12),
)
def test_namespace_name_is_a_dns_label_ending_in_the_id(team: str, name: str, workload_id: int) -> None:
    namespace = workload_namespace_name(team, name, workload_id)
    assert is_dns_label(namespace)
    assert namespace.startswith("sbx-")
    assert namespace.rsplit("-", 1)[1] == str(workload_id)
    assert workload_namespace_name(team, name, workload_id) == namespace


def test_namespace_name_keeps_team_and_name_readable_and_cuts_long_ones() -> None:
    assert (
        workload_namespace_name("Vision", "Llama 3 \u2013 LoRA sweep!", 7)
        == "sbx-vision-llama-3-lora-sweep-7"
    )
    long_name = workload_namespace_name("t" * 40, "n" * 100, 123456)
    assert len(long_name) <= 63 and long_name.endswith("-123456")
    assert workload_namespace_name("a", "b-1", 2) != workload_namespace_name("a", "b", 12)


def test_label_values_are_sanitized_and_the_owner_is_kept_whole_in_an_annotation() -> None:
    spec = make_spec(owner="alice.o'neil@firm.example", team="R&D / Vision")
    namespace = by_kind(workload_objects(spec))["Namespace"]
    labels = namespace["metadata"]["labels"]
    assert labels["gpu-portal/owner"] == "alice.o_neil_firm.example"
    assert labels["gpu-portal/team"] == "R_D___Vision"
    assert namespace["metadata"]["annotations"]["gpu-portal/owner"] == "alice.o'neil@firm.example"
    assert label_value("-" * 10 + "x" * 80 + "-") == "x" * 53
    assert label_value("@@@") == ""


def test_portal_labels_win_over_extra_labels_and_bad_label_keys_are_refused() -> None:
    spec = make_spec(labels={"gpu-portal/team": "spoofed", "cost-center": "ML 42"})
    labels = by_kind(workload_objects(spec))["Namespace"]["metadata"]["labels"]
    assert labels["gpu-portal/team"] == "vision"
    assert labels["cost-center"] == "ML_42"
    with pytest.raises(ValueError, match="label key"):
        workload_objects(make_spec(labels={"bad key!": "x"}))


def test_namespace_carries_portal_labels_and_enforces_restricted_pod_security() -> None:
    labels = by_kind(workload_objects(make_spec()))["Namespace"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "gpu-portal"
    assert labels["gpu-portal/sandbox-id"] == "42"
    assert labels["gpu-portal/team"] == "vision"
    assert labels["gpu-portal/owner"] == "alice"
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    baseline = by_kind(workload_objects(make_spec(), ManifestOptions(pod_security_level="baseline")))
    assert baseline["Namespace"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"


def test_quota_equals_a_whole_gpu_allocation_exactly() -> None:
    quota = by_kind(workload_objects(make_spec()))["ResourceQuota"]
    assert quota["spec"]["hard"] == {
        "requests.cpu": "8",
        "limits.cpu": "8",
        "requests.memory": "64Gi",
        "limits.memory": "64Gi",
        "requests.storage": "100Gi",
        "persistentvolumeclaims": "1",
        "pods": "1",
        "services": "2",  # its Service, and a Gateway's ExternalName for the sign-in check
        "services.loadbalancers": "0",
        "services.nodeports": "0",
        "requests.nvidia.com/gpu": "2",
    }


def test_quota_for_a_mig_slice_caps_that_profile_and_allows_no_whole_gpu() -> None:
    hard = quota_hard(make_spec(gpu=SLICE, cpu=4, memory_gb=32))
    assert hard["requests.nvidia.com/mig-1g.10gb"] == "1"
    assert hard["requests.nvidia.com/gpu"] == "0"
    assert hard["requests.cpu"] == hard["limits.cpu"] == "4"
    assert hard["requests.memory"] == hard["limits.memory"] == "32Gi"


def test_container_requests_fill_the_quota_exactly_so_nothing_else_fits() -> None:
    spec = make_spec(gpu=SLICE)
    objects = by_kind(workload_objects(spec))
    resources = objects["StatefulSet"]["spec"]["template"]["spec"]["containers"][0]["resources"]
    hard = objects["ResourceQuota"]["spec"]["hard"]
    for name, amount in resources["requests"].items():
        assert hard[f"requests.{name}"] == amount
    for name in ("cpu", "memory"):
        assert hard[f"limits.{name}"] == resources["limits"][name]
    claim = objects["StatefulSet"]["spec"]["volumeClaimTemplates"][0]["spec"]
    assert claim["resources"]["requests"]["storage"] == hard["requests.storage"]


@pytest.mark.parametrize(
    ("claim", "resource", "count"),
    [(WHOLE, "nvidia.com/gpu", "2"), (SLICE, "nvidia.com/mig-1g.10gb", "1")],
    ids=["whole GPUs", "MIG slice"],
)
def test_the_container_asks_for_the_gpu_resource_in_its_limits(
    claim: GpuClaim, resource: str, count: str
) -> None:
    container = pod_spec(make_spec(gpu=claim))["containers"][0]
    assert container["resources"]["limits"][resource] == count
    assert container["resources"]["requests"][resource] == count
    other = {"nvidia.com/gpu", "nvidia.com/mig-1g.10gb"} - {resource}
    assert not other & set(container["resources"]["limits"])


def test_the_pod_is_pinned_to_the_placed_node_and_tolerates_the_gpu_taint() -> None:
    spec = pod_spec(make_spec(gpu=SLICE))
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-h100-b"]}]}
        ]
    }  # the Node's name, not its hostname label, which can differ
    assert "nodeSelector" not in spec
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert "tolerations" not in pod_spec(make_spec(), ManifestOptions(tolerate_gpu_taint=False))


def test_the_pod_meets_pod_security_restricted() -> None:
    spec = pod_spec(make_spec())
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is False
    assert not {"hostNetwork", "hostPID", "hostIPC"} & set(spec)
    for container in spec["containers"]:
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["privileged"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}
        assert all("hostPort" not in port for port in container["ports"])
    allowed_volumes = {"emptyDir", "persistentVolumeClaim", "configMap", "secret", "projected", "downwardAPI"}
    for volume in spec["volumes"]:
        assert set(volume) - {"name"} <= allowed_volumes


def test_home_lives_on_a_claim_from_the_statefulset_template() -> None:
    objects = by_kind(workload_objects(make_spec(), ManifestOptions(storage_class="fast-nvme")))
    stateful_set = objects["StatefulSet"]["spec"]
    assert stateful_set["replicas"] == 1
    assert stateful_set["serviceName"] == objects["Service"]["metadata"]["name"]
    claim = stateful_set["volumeClaimTemplates"][0]
    assert claim["spec"]["storageClassName"] == "fast-nvme"
    mounts = stateful_set["template"]["spec"]["containers"][0]["volumeMounts"]
    assert {"name": claim["metadata"]["name"], "mountPath": "/home"} in mounts


def test_jupyter_serves_lab_on_8888_under_the_access_path() -> None:
    spec = make_spec(access_host="sandboxes.gpu.internal/s/sbx-42")
    objects = by_kind(workload_objects(spec))
    container = objects["StatefulSet"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:2] == ["jupyter", "lab"]
    assert "--port=8888" in container["command"]
    assert "--ServerApp.base_url=/s/sbx-42/" in container["command"]
    assert container["ports"] == [{"name": "jupyter", "containerPort": 8888, "protocol": "TCP"}]
    assert objects["Service"]["spec"]["ports"][0]["port"] == 8888
    assert sandbox_access(spec) == "https://sandboxes.gpu.internal/s/sbx-42/"
    assert sandbox_access(make_spec()) == "https://sbx-42.sandboxes.gpu.internal/"


def test_shell_serves_sshd_on_2222_and_the_access_is_an_ssh_command() -> None:
    spec = make_spec(image_kind="shell")
    objects = by_kind(workload_objects(spec))
    container = objects["StatefulSet"]["spec"]["template"]["spec"]["containers"][0]
    assert "sshd -D -e -p 2222" in container["command"][-1]
    assert container["ports"][0]["containerPort"] == 2222
    assert objects["Service"]["spec"]["ports"][0]["port"] == 2222
    assert objects["NetworkPolicy"]["spec"]["ingress"][0]["ports"] == [{"protocol": "TCP", "port": 2222}]
    assert sandbox_access(spec) == "ssh -p 2222 alice@sbx-42.sandboxes.gpu.internal"
    assert (
        sandbox_access(spec, ManifestOptions(shell_user="user"))
        == "ssh -p 2222 user@sbx-42.sandboxes.gpu.internal"
    )


def test_network_policy_denies_ingress_except_from_the_access_path() -> None:
    policy = network_policy_manifest(make_spec())["spec"]
    assert policy["podSelector"] == {} and policy["policyTypes"] == ["Ingress", "Egress"]
    assert policy["ingress"] == [
        {
            "from": [
                {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}
            ],
            "ports": [{"protocol": "TCP", "port": 8888}],
        }
    ]
    custom = network_policy_manifest(make_spec(), AccessPath("gateway", {"app": "envoy"}))["spec"]
    assert custom["ingress"][0]["from"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gateway"}},
            "podSelector": {"matchLabels": {"app": "envoy"}},
        }
    ]


def test_egress_is_denied_but_dns_and_the_public_internet() -> None:
    policy = network_policy_manifest(make_spec())["spec"]
    dns, internet = policy["egress"]
    assert dns == {
        "to": [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
            }
        ],
        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
    }
    v4, v6 = internet["to"]
    assert v4["ipBlock"]["cidr"] == "0.0.0.0/0"
    # the cloud metadata endpoint, the cluster's and the portal's own addresses are out of reach
    assert {"169.254.0.0/16", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"} <= set(v4["ipBlock"]["except"])
    assert v6["ipBlock"] == {"cidr": "::/0", "except": ["fc00::/7", "fe80::/10", "::1/128"]}
    closed = network_policy_manifest(make_spec(), egress=SandboxEgress(allow=()))["spec"]
    assert closed["egress"] == [dns]  # no internet at all: DNS only
    narrow = network_policy_manifest(make_spec(), egress=SandboxEgress(allow=("203.0.113.0/24",)))["spec"]
    assert narrow["egress"][1] == {"to": [{"ipBlock": {"cidr": "203.0.113.0/24"}}]}
    assert kubernetes_validate.validate(network_policy_manifest(make_spec()), SCHEMA_VERSION, strict=True)


def test_the_owner_gets_the_sandbox_user_role_only_when_they_have_a_cluster_identity() -> None:
    binding = role_binding_manifest(make_spec())
    assert binding is not None
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "gpu-portal-sandbox-user",
    }
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice@firm.example"}
    ]
    robot = role_binding_manifest(make_spec(user_identity="system:serviceaccount:ci:runner"))
    assert robot is not None and robot["subjects"] == [
        {"kind": "ServiceAccount", "name": "runner", "namespace": "ci"}
    ]
    assert role_binding_manifest(make_spec(user_identity="")) is None
    bindings = [obj for obj in workload_objects(make_spec(user_identity="")) if obj["kind"] == "RoleBinding"]
    assert [binding["metadata"]["name"] for binding in bindings] == ["sandbox-kubectl"]  # kubectl's only


def test_limit_range_defaults_fit_inside_the_allocation() -> None:
    limits = by_kind(workload_objects(make_spec(cpu=1, memory_gb=1)))["LimitRange"]["spec"]["limits"]
    container = next(item for item in limits if item["type"] == "Container")
    assert container["default"] == {"cpu": "1", "memory": "1Gi"}
    assert container["max"] == {"cpu": "1", "memory": "1Gi"}
    claim = next(item for item in limits if item["type"] == "PersistentVolumeClaim")
    assert claim["max"] == {"storage": "100Gi"}


def test_media_extension_profiles_get_a_resource_name_kubernetes_accepts() -> None:
    assert mig_resource_name("1g.10gb") == "nvidia.com/mig-1g.10gb"
    assert mig_resource_name("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"
    assert is_qualified_name(mig_resource_name("1g.18gb+me"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"cpu": 0}, "cpu must be at least 1"),
        (
            {"gpu": dataclasses.replace(SLICE, resource="nvidia.com/mig-1g.10gb+me")},
            "not a valid resource name",
        ),
        ({"gpu": dataclasses.replace(WHOLE, resource="amd.com/gpu")}, "GPU resource must be"),
        ({"gpu": dataclasses.replace(WHOLE, node="")}, "names no node"),
        ({"namespace": "Not A Label"}, "DNS-1123"),
    ],
)
def test_a_spec_no_cluster_could_honour_is_refused(change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        workload_objects(make_spec(**change))


def test_placement_is_recorded_for_operators_without_restarting_the_pod_on_extension() -> None:
    spec = make_spec(gpu=SLICE)
    stateful_set = by_kind(workload_objects(spec))["StatefulSet"]
    assert stateful_set["metadata"]["annotations"] == {
        "gpu-portal/gpu-indices": "3",
        "gpu-portal/mig-profile": "1g.10gb",
        "gpu-portal/mig-start": "2",
    }
    extended = by_kind(
        workload_objects(dataclasses.replace(spec, expires_at=datetime(2026, 2, 1, tzinfo=UTC)))
    )
    assert extended["StatefulSet"] == stateful_set
    assert is_dns_subdomain(stateful_set["metadata"]["name"])


DRA_SLICE = dataclasses.replace(SLICE, dra_parent_uuid="GPU-3b1e5d2a-0000-4000-8000-000000000003")


def test_a_slice_claimed_through_dra_is_a_pinned_resource_claim_the_pod_names() -> None:
    objects = workload_objects(make_spec(gpu=DRA_SLICE))
    kinds = [obj["kind"] for obj in objects]
    assert kinds.index("ResourceClaim") < kinds.index("StatefulSet")  # the claim exists before the pod
    claim = next(obj for obj in objects if obj["kind"] == "ResourceClaim")
    request = claim["spec"]["devices"]["requests"][0]["exactly"]
    assert request["deviceClassName"] == "mig.nvidia.com" and request["count"] == 1
    assert request["selectors"][0]["cel"]["expression"] == (
        "device.attributes['gpu.nvidia.com'].parentUUID == 'GPU-3b1e5d2a-0000-4000-8000-000000000003'"
        " && device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
    )
    pod = next(obj for obj in objects if obj["kind"] == "StatefulSet")["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "gpu-slice"}]
    resources = pod["containers"][0]["resources"]
    assert resources["claims"] == [{"name": "gpu"}]
    assert "nvidia.com/mig-1g.10gb" not in resources["limits"]
    hard = next(obj for obj in objects if obj["kind"] == "ResourceQuota")["spec"]["hard"]
    assert hard["mig.nvidia.com.deviceclass.resource.k8s.io/devices"] == "1"
    assert "requests.nvidia.com/mig-1g.10gb" not in hard
    for obj in objects:  # every object against the schema of the minor that first has its API
        version = schema_version(obj["apiVersion"])
        assert kubernetes_validate.validate(obj, version, strict=True) == version


def test_each_serving_replica_claimed_through_dra_gets_its_own_claim() -> None:
    spec = make_serving_spec(replicas=2)
    assert spec.serving is not None
    claims = tuple(dataclasses.replace(DRA_SLICE, gpu_indices=(i,)) for i in range(2))
    spec = dataclasses.replace(
        spec, gpu=claims[0], serving=dataclasses.replace(spec.serving, replicas=claims)
    )
    objects = workload_objects(spec)
    names = [obj["metadata"]["name"] for obj in objects if obj["kind"] == "ResourceClaim"]
    assert names == ["gpu-slice-r0", "gpu-slice-r1"]
    deployments = [obj for obj in objects if obj["kind"] == "Deployment"]
    refs = [d["spec"]["template"]["spec"]["resourceClaims"][0]["resourceClaimName"] for d in deployments]
    assert refs == names
    for obj in objects:
        version = schema_version(obj["apiVersion"])
        assert kubernetes_validate.validate(obj, version, strict=True) == version


def test_a_grown_home_fits_the_namespaces_limits_and_quota() -> None:
    spec = make_spec(home=HomeVolume(size_gb=180, provisioned_gb=120, volume_name="pv-1", owner="alice"))
    objects = by_kind(workload_objects(spec))
    assert objects["ResourceQuota"]["spec"]["hard"]["requests.storage"] == "180Gi"
    limits = objects["LimitRange"]["spec"]["limits"]
    assert {"type": "PersistentVolumeClaim", "max": {"storage": "180Gi"}} in limits  # more than storage_gb
    assert objects["PersistentVolumeClaim"]["spec"]["resources"]["requests"]["storage"] == "120Gi"
    assert objects["PersistentVolumeClaim"]["spec"]["volumeName"] == "pv-1"
