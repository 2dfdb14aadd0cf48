"""The portal's own deploy manifests (deploy/kubernetes): valid, complete, and RBAC that matches
what the Kubernetes driver really calls.

kubectl is not installed where tests run, so `render` reads the kustomization in pure Python:
it concatenates `resources:` and applies `namespace:`, `labels:`/`commonLabels:` and `images:`,
and refuses any other kustomize feature so a new one cannot be silently rendered wrong.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from tests.fakekube import SCHEMA_VERSION, FakeKube, dra, fixtures
from tests.fakekube.resources import BY_KIND
from tests.workers.test_manifests import HOST_KEY, SLICE, make_serving_spec, make_spec
from workers.drivers.kubernetes import REQUIRED_PERMISSIONS, KubernetesDriver, KubernetesOptions
from workers.drivers.kubernetes_nodes import MIG_CONFIG_KEY, merge_mig_config
from workers.manifests.options import ManifestOptions, SandboxRoute
from workers.spec import DatasetMount, HomeVolume

fake_kube = fixtures.fake_kube
kube_driver = fixtures.kube_driver

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KUSTOMIZATION = DEPLOY / "kubernetes"
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "Job"}
SUPPORTED_KEYS = {"apiVersion", "kind", "namespace", "labels", "commonLabels", "resources", "images"}
REQUIRED_ENV = {
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "SECRET_KEY",
    "PORTAL_CLUSTER_DRIVER",
    "ALLOWED_HOSTS",
    "PORTAL_BASE_URL",
}


def _add_labels(doc: dict, labels: dict[str, str], *, selectors: bool, templates: bool) -> None:
    doc["metadata"].setdefault("labels", {}).update(labels)
    spec = doc.get("spec") or {}
    if templates and doc["kind"] in WORKLOADS:
        spec["template"].setdefault("metadata", {}).setdefault("labels", {}).update(labels)
    if selectors and doc["kind"] in WORKLOADS - {"Job"}:
        spec["selector"].setdefault("matchLabels", {}).update(labels)
    if selectors and doc["kind"] == "Service":
        spec.setdefault("selector", {}).update(labels)


def render(directory: Path) -> list[dict]:
    """`kubectl kustomize directory`, for the subset of kustomize this repository uses."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unsupported = set(kustomization) - SUPPORTED_KEYS
    assert not unsupported, f"render() does not know kustomize's {sorted(unsupported)}; teach it first"
    docs: list[dict] = []
    for resource in kustomization.get("resources", []):
        path = directory / resource
        if path.is_dir():
            docs.extend(render(path))
        else:
            docs.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    namespace = kustomization.get("namespace")
    for doc in docs:
        if namespace and doc["kind"] not in CLUSTER_SCOPED:
            doc["metadata"]["namespace"] = namespace
        if kustomization.get("commonLabels"):
            _add_labels(doc, kustomization["commonLabels"], selectors=True, templates=True)
        for entry in kustomization.get("labels", []):
            _add_labels(
                doc,
                entry["pairs"],
                selectors=entry.get("includeSelectors", False),
                templates=entry.get("includeTemplates", False),
            )
        for image in kustomization.get("images", []):
            for container in pod_spec(doc).get("containers", []) if doc["kind"] in WORKLOADS else []:
                if container["image"].split(":")[0] == image["name"]:
                    container["image"] = f"{image.get('newName', image['name'])}:{image['newTag']}"
    return docs


def pod_spec(doc: dict) -> dict:
    return doc["spec"]["template"]["spec"]


@pytest.fixture(scope="module")
def documents() -> list[dict]:
    return render(KUSTOMIZATION)


def find(documents: list[dict], kind: str, name: str) -> dict:
    return next(doc for doc in documents if doc["kind"] == kind and doc["metadata"]["name"] == name)


def test_every_document_passes_the_strict_official_schema(documents: list[dict]) -> None:
    example = yaml.safe_load((KUSTOMIZATION / "secret.example.yaml").read_text())
    operator = [
        doc
        for path in sorted((DEPLOY / "gpu-operator").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]
    for doc in [*documents, example, *operator]:
        assert kubernetes_validate.validate(doc, SCHEMA_VERSION, strict=True) == SCHEMA_VERSION, doc["kind"]


def test_the_kustomization_lists_every_manifest_but_the_secret_template() -> None:
    listed = set(yaml.safe_load((KUSTOMIZATION / "kustomization.yaml").read_text())["resources"])
    on_disk = {path.name for path in KUSTOMIZATION.glob("*.yaml")} - {"kustomization.yaml"}
    assert on_disk - listed == {"secret.example.yaml"}  # applying it would overwrite the real Secret
    assert listed <= on_disk


def test_every_namespaced_object_lands_in_the_portal_namespace(documents: list[dict]) -> None:
    for doc in documents:
        expected = None if doc["kind"] in CLUSTER_SCOPED else "gpu-portal"
        assert doc["metadata"].get("namespace") == expected, doc["metadata"]["name"]
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "gpu-portal"
    binding = find(documents, "ClusterRoleBinding", "gpu-portal-driver")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpu-portal", "namespace": "gpu-portal"}
    ]


@pytest.mark.parametrize(
    ("kind", "name", "command"),
    [
        ("Deployment", "gpu-portal-web", ["gunicorn", "portal.wsgi"]),
        ("Deployment", "gpu-portal-worker", ["celery", "-A", "workers", "worker"]),
        ("Deployment", "gpu-portal-beat", ["celery", "-A", "workers", "beat"]),
        ("Job", "gpu-portal-migrate", ["python", "manage.py", "migrate"]),
    ],
)
def test_each_process_runs_its_command_with_the_full_environment(
    documents: list[dict], kind: str, name: str, command: list[str]
) -> None:
    spec = pod_spec(find(documents, kind, name))
    container = spec["containers"][0]
    assert container["command"][: len(command)] == command
    assert container["image"] == "registry.example.internal/gpu-portal:0.1.0"
    sources = {ref.get("configMapRef", ref.get("secretRef", {})).get("name") for ref in container["envFrom"]}
    assert sources == {"gpu-portal-config", "gpu-portal-secrets"}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True


def test_config_and_secret_template_provide_every_setting_the_portal_needs(documents: list[dict]) -> None:
    config = find(documents, "ConfigMap", "gpu-portal-config")["data"]
    secret = yaml.safe_load((KUSTOMIZATION / "secret.example.yaml").read_text())["stringData"]
    assert set(config) | set(secret) >= REQUIRED_ENV
    assert not set(config) & {"DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY"}  # secrets stay secret
    assert config["PORTAL_CLUSTER_DRIVER"] == "kubernetes"


def test_only_the_worker_holds_the_service_account_token(documents: list[dict]) -> None:
    worker = pod_spec(find(documents, "Deployment", "gpu-portal-worker"))
    assert worker["serviceAccountName"] == "gpu-portal" and worker["automountServiceAccountToken"] is True
    for kind, name in [
        ("Deployment", "gpu-portal-web"),
        ("Deployment", "gpu-portal-beat"),
        ("Job", "gpu-portal-migrate"),
    ]:
        assert pod_spec(find(documents, kind, name))["automountServiceAccountToken"] is False
    beat = find(documents, "Deployment", "gpu-portal-beat")["spec"]
    assert beat["replicas"] == 1 and beat["strategy"] == {"type": "Recreate"}


def test_the_ingress_reaches_the_web_service(documents: list[dict]) -> None:
    ingress = find(documents, "Ingress", "gpu-portal")["spec"]["rules"][0]["http"]["paths"][0]["backend"]
    service = find(documents, "Service", "gpu-portal-web")
    assert ingress["service"]["name"] == service["metadata"]["name"]
    assert ingress["service"]["port"]["name"] in {port["name"] for port in service["spec"]["ports"]}


def test_the_seed_mig_config_is_the_one_the_driver_writes_and_keeps_the_stock_layouts() -> None:
    config_map = yaml.safe_load((DEPLOY / "gpu-operator" / "mig-parted-config.yaml").read_text())
    assert kubernetes_validate.validate(config_map, SCHEMA_VERSION, strict=True) == SCHEMA_VERSION
    options = KubernetesOptions()
    assert (config_map["metadata"]["name"], config_map["metadata"]["namespace"]) == (
        options.mig_config_map,
        options.mig_config_namespace,
    )
    seeded = config_map["data"][MIG_CONFIG_KEY]
    merged = yaml.safe_load(merge_mig_config(seeded, "gpu-a", "gpu-portal-gpu-a-0123abcd", []))
    assert {"all-disabled", "all-enabled", "gpu-portal-gpu-a-0123abcd"} <= set(merged["mig-configs"])


# --- RBAC: exactly what the driver calls -------------------------------------------------------------


MIG_ACCESS = DEPLOY / "gpu-operator" / "portal-access.yaml"


def mig_config_role() -> dict:
    return next(doc for doc in yaml.safe_load_all(MIG_ACCESS.read_text()) if doc and doc["kind"] == "Role")


def granted(documents: list[dict]) -> set[tuple[str, str, str]]:
    """The ClusterRole's grants, and the Role's in the GPU Operator's namespace."""
    rules = find(documents, "ClusterRole", "gpu-portal-driver")["rules"] + mig_config_role()["rules"]
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def declared() -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb) for (group, resource), verbs in REQUIRED_PERMISSIONS.items() for verb in verbs
    }


def exercise(fake: FakeKube, driver: KubernetesDriver) -> set[tuple[str, str, str]]:
    """Drive every path of the driver that reaches the API; return the (group, resource, verb)
    triples the server saw."""
    spec = make_spec()
    driver.apply_workload(spec)
    driver.workload_insight(spec)  # its events and log tail
    driver.restart_workload(spec)  # deletes its pod
    driver.kubectl_token(spec, seconds=3600)  # a token of its ServiceAccount
    # a persistent home: provisioned, kept, grown, moved to the owner's next sandbox, deleted
    homed = dataclasses.replace(
        spec, workload_id=80, namespace="sbx-vision-homed-80", home=HomeVolume(size_gb=50, owner="alice")
    )
    driver.apply_workload(homed)  # creates the claim
    state = driver.home_state(homed)  # reads it and its volume; keeps the volume (Retain)
    grown = dataclasses.replace(
        homed, home=HomeVolume(size_gb=80, provisioned_gb=50, volume_name=state.volume_name, owner="alice")
    )
    driver.home_state(grown)  # patches the claim's size
    driver.delete_workload(grown)
    moved = dataclasses.replace(grown, workload_id=81, namespace="sbx-vision-homed-81")
    driver.apply_workload(moved)  # points the volume at the new claim
    driver.delete_workload(moved)
    driver.delete_home(state.volume_name)  # deletes the volume
    # team datasets: a bucket's credentials copied in, a claim's volume copied read-only (and removed)
    with fake.store.lock:
        fake.api.create(BY_KIND["Secret"], "gpu-portal-datasets", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3-creds", "namespace": "gpu-portal-datasets"},
            "data": {"key": "c2VjcmV0"},
        })  # fmt: skip
    shared = dataclasses.replace(
        spec, workload_id=82, namespace="sbx-vision-shared-82", access_host="h82.example", home=None,
        datasets=(
            DatasetMount(slug="imagenet", kind="bucket", csi_driver="s3.csi.aws.com", bucket="imagenet", credentials_secret="s3-creds"),
            DatasetMount(slug="corpus", kind="pvc", claim_namespace="sbx-vision-homed-80", claim_name="home"),
        ),
    )  # fmt: skip
    homed_again = dataclasses.replace(
        homed, workload_id=83, namespace="sbx-vision-homed-83", home=HomeVolume(size_gb=50, owner="bob")
    )
    driver.apply_workload(homed_again)
    shared = dataclasses.replace(
        shared,
        datasets=(
            shared.datasets[0],
            dataclasses.replace(shared.datasets[1], claim_namespace="sbx-vision-homed-83"),
        ),
    )
    driver.apply_workload(shared)
    driver.delete_workload(shared)  # deletes the volume's read-only copy
    with fake.store.lock:  # someone let pods mount the account's token: the next apply patches it back
        key = ("serviceaccounts", spec.namespace, "sandbox-user")
        account = fake.api.store.get(key)
        fake.api.store.put(key, {**account, "automountServiceAccountToken": True})
    driver.apply_workload(
        dataclasses.replace(spec, access_host="moved.sandboxes.example")
    )  # patches the route
    gateway = dataclasses.replace(driver.options.manifests, route=SandboxRoute(kind="httproute"))
    routed = KubernetesDriver(driver.config, dataclasses.replace(driver.options, manifests=gateway))
    routed.apply_workload(dataclasses.replace(spec, workload_id=78, namespace="sbx-vision-routed-78"))
    routed.apply_workload(  # reads and patches the HTTPRoute
        dataclasses.replace(
            spec, workload_id=78, namespace="sbx-vision-routed-78", access_host="elsewhere.example"
        )
    )
    changed = dataclasses.replace(
        spec,
        image_kind="shell",
        ssh_host_key=HOST_KEY,
        gpu=SLICE,
        cpu=12,
        expires_at=datetime(2026, 3, 1, tzinfo=UTC),
        user_identity="bob@firm.example",
    )
    driver.apply_workload(changed)  # 409s, reads, patches of every kind
    driver.apply_workload(dataclasses.replace(changed, user_identity=""))  # deletes the RoleBinding
    driver.workload_status(changed)
    driver.managed_namespaces()
    driver.managed_volumes()  # the orphan reconcile: the portal's volumes the database may not know
    driver.discover_gpu_nodes()
    driver.apply_mig_layout("gpu-h100-a", {0: [("1g.10gb", 0)]})  # creates the ConfigMap
    driver.apply_mig_layout("gpu-h100-a", {0: [("3g.40gb", 0)]})  # reads and patches it
    driver.mig_layout_state("gpu-h100-a", {0: [("3g.40gb", 0)]})
    driver.delete_workload(changed)
    serving = make_serving_spec(replicas=2)
    driver.apply_workload(serving)  # one Deployment per replica
    assert serving.serving is not None
    one = dataclasses.replace(
        serving, serving=dataclasses.replace(serving.serving, replicas=serving.serving.replicas[:1])
    )
    driver.apply_workload(dataclasses.replace(one, cpu=12))  # patches, and deletes the replica scaled away
    driver.workload_status(one)
    for pod in fake.list("Pod", one.namespace):  # its runtime's metrics, through the pod proxy
        fake.pod_running(one.namespace, name=pod["metadata"]["name"])
        fake.serve_pod_http(one.namespace, pod["metadata"]["name"], port=8000, path="metrics", text="up 1\n")
    assert set(driver.serving_metrics(one).values()) == {"up 1\n"}
    assert one.serving is not None
    gated = dataclasses.replace(one, serving=dataclasses.replace(one.serving, hf_token="hf_first1234"))
    driver.apply_workload(gated)  # creates the team's token Secret
    rotated = dataclasses.replace(one, serving=dataclasses.replace(one.serving, hf_token="hf_second5678"))
    driver.apply_workload(rotated)  # reads and patches it
    driver.apply_workload(dataclasses.replace(one, cpu=16))  # the team cleared its token: deleted
    # A "dynamic" cluster: slices claimed through NVIDIA's DRA driver.
    with fake.store.lock:
        dra.install(fake.api, [("gpu-h100-a", "h100-80gb", 1)])
    dynamic = KubernetesDriver(dataclasses.replace(driver.config, mig_mode="dynamic"), driver.options)
    claimed = dataclasses.replace(
        spec,
        workload_id=77,
        namespace="sbx-vision-claimed-77",
        gpu=dataclasses.replace(SLICE, dra_parent_uuid="GPU-1"),
    )
    dynamic.apply_workload(claimed)  # creates the ResourceClaim
    moved = dataclasses.replace(claimed.gpu, dra_parent_uuid="GPU-2")
    dynamic.apply_workload(dataclasses.replace(claimed, gpu=moved))  # reads it, replaces it
    dynamic.workload_status(claimed)
    dynamic.discover_gpu_nodes()  # lists the ResourceSlices
    return {(r.group, r.resource, r.verb) for r in fake.requests}


def test_the_cluster_role_grants_exactly_what_the_driver_declares(documents: list[dict]) -> None:
    assert granted(documents) == declared()
    cluster_wide = find(documents, "ClusterRole", "gpu-portal-driver")["rules"]
    assert not [rule for rule in cluster_wide if "configmaps" in rule["resources"]]  # no ConfigMaps anywhere
    role = mig_config_role()
    assert role["metadata"]["namespace"] == "gpu-operator"
    configmap_rules = role["rules"]
    named = [rule for rule in configmap_rules if rule.get("resourceNames")]
    assert named and all(rule["resourceNames"] == ["gpu-portal-mig-parted-config"] for rule in named)
    assert {verb for rule in configmap_rules if not rule.get("resourceNames") for verb in rule["verbs"]} == {
        "create"
    }


def test_the_driver_makes_every_declared_call_and_no_other(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
) -> None:
    called = exercise(fake_kube, kube_driver)
    not_calls = {
        ("rbac.authorization.k8s.io", "clusterroles", "bind")
    }  # checked by the API server, not called
    assert called == declared() - not_calls


# --- the smoke script --------------------------------------------------------------------------------


def test_the_smoke_script_is_strict_bash_and_explains_its_usage() -> None:
    script = DEPLOY / "smoke.sh"
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text
    assert "api POST /api/v1/sandboxes " in text and '"mig_profile": "%s"' in text
    assert "MIG_PROFILE=${MIG_PROFILE:-1g.10gb}" in text
    bash = shutil.which("bash")
    assert bash is not None
    subprocess.run([bash, "-n", str(script)], check=True)
    result = subprocess.run([bash, str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: deploy/smoke.sh PORTAL_URL TOKEN")


def test_a_sandbox_owner_may_use_the_sandbox_but_not_change_its_namespace(documents: list[dict]) -> None:
    """The role the owner's RoleBinding names: the one the driver may bind, and nothing that
    would let the owner scale the sandbox away and run their own GPU pod around placement."""
    role = find(documents, "ClusterRole", "gpu-portal-sandbox-user")
    granted_to_owner = {
        (resource, verb) for rule in role["rules"] for resource in rule["resources"] for verb in rule["verbs"]
    }
    assert ("pods/exec", "create") in granted_to_owner and ("pods/portforward", "create") in granted_to_owner
    assert ("pods/log", "get") in granted_to_owner
    writes = {"create", "update", "patch", "delete", "deletecollection"}
    changed = {
        (r, v) for r, v in granted_to_owner if v in writes and r not in ("pods/exec", "pods/portforward")
    }
    assert changed == set()
    bindable = [
        rule
        for rule in find(documents, "ClusterRole", "gpu-portal-driver")["rules"]
        if "bind" in rule["verbs"]
    ]
    assert [rule["resourceNames"] for rule in bindable] == [["gpu-portal-sandbox-user"]]
    assert ManifestOptions().user_cluster_role == "gpu-portal-sandbox-user"


def test_only_the_ingress_controller_agents_and_prometheus_reach_the_portal_and_only_its_web_pods(
    documents: list[dict],
) -> None:
    deny = find(documents, "NetworkPolicy", "gpu-portal-ingress")["spec"]
    assert deny["podSelector"] == {} and deny["ingress"] == [] and deny["policyTypes"] == ["Ingress"]
    web = find(documents, "NetworkPolicy", "gpu-portal-web")["spec"]
    assert web["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "web"
    (rule,) = web["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8000}]
    sources = {
        peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] for peer in rule["from"]
    }
    assert sources == {"ingress-nginx", "gpu-portal-agent", "monitoring"}
    web_pod = find(documents, "Deployment", "gpu-portal-web")["spec"]["template"]["metadata"]["labels"]
    assert all(web_pod.get(key) == value for key, value in web["podSelector"]["matchLabels"].items())


def test_the_node_agent_lives_apart_reads_the_kubelets_socket_read_only_and_holds_no_token() -> None:
    documents = render(DEPLOY / "agent")
    for doc in documents:
        assert kubernetes_validate.validate(doc, SCHEMA_VERSION, strict=True) == SCHEMA_VERSION, doc["kind"]
    namespace = find(documents, "Namespace", "gpu-portal-agent")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    agent = find(documents, "DaemonSet", "gpu-portal-agent")
    assert agent["metadata"]["namespace"] == "gpu-portal-agent"
    spec = pod_spec(agent)
    assert spec["automountServiceAccountToken"] is False
    (container,) = spec["containers"]
    assert container["image"] == "registry.example.internal/gpu-portal:0.1.0"
    assert container["command"] == ["python", "-m", "workers.agent"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    (mount,) = container["volumeMounts"]
    (volume,) = spec["volumes"]
    assert mount["readOnly"] is True and volume["hostPath"]["path"] == mount["mountPath"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["GPU_PORTAL_POD_RESOURCES"] == f"{mount['mountPath']}/kubelet.sock"
    assert env["GPU_PORTAL_URL"].startswith("http://gpu-portal-web.gpu-portal.svc")


def test_the_datasets_namespace_role_lets_the_portal_read_credentials_there_only() -> None:
    documents = [
        doc for doc in yaml.safe_load_all((DEPLOY / "datasets" / "portal-access.yaml").read_text()) if doc
    ]
    for doc in documents:
        assert kubernetes_validate.validate(doc, SCHEMA_VERSION, strict=True) == SCHEMA_VERSION
    role = next(doc for doc in documents if doc["kind"] == "Role")
    assert role["metadata"]["namespace"] == "gpu-portal-datasets"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    binding = next(doc for doc in documents if doc["kind"] == "RoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpu-portal", "namespace": "gpu-portal"}
    ]
