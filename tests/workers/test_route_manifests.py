"""A sandbox's route and a deployment's: an Ingress with ingress-nginx's forward-auth annotations,
or a Gateway API HTTPRoute with the ExternalAuth filter, each valid against its pinned schema; VS
Code in the browser as a web app beside JupyterLab."""

from __future__ import annotations

import copy
from datetime import timedelta

import kubernetes_validate
import pytest

from tests.fakekube import SCHEMA_VERSION, fixtures
from tests.fakekube.validation import schema_causes
from tests.workers.test_manifests import make_serving_spec, make_spec
from workers.manifests import workload_objects
from workers.manifests.options import ManifestOptions, SandboxRoute
from workers.manifests.route import GATEWAY_AUTH_PATH, GATEWAY_ENDPOINT_AUTH_PATH, route_objects
from workers.manifests.workload import container_command, sandbox_access, service_manifest

fake_kube = fixtures.fake_kube
HOST = "sbx-42.sandboxes.gpu.internal"
ENDPOINT_HOST = "dep-vision-llama8b-77.sandboxes.gpu.internal"
ROUTE = SandboxRoute(
    auth_url="http://gpu-portal-web.gpu-portal.svc.cluster.local:8000/auth/sandbox/check",
    signin_url="https://portal.example.internal/auth/sandbox/signin/",
)


def test_an_ingress_sends_every_request_through_the_portals_check_and_passes_its_cookie_on() -> None:
    (ingress,) = route_objects(make_spec(), ROUTE)
    assert kubernetes_validate.validate(ingress, SCHEMA_VERSION, strict=True) == SCHEMA_VERSION
    notes = ingress["metadata"]["annotations"]
    assert notes["nginx.ingress.kubernetes.io/auth-url"] == ROUTE.auth_url
    assert notes["nginx.ingress.kubernetes.io/auth-signin"] == ROUTE.signin_url
    assert notes["nginx.ingress.kubernetes.io/auth-always-set-cookie"] == "true"
    assert notes["nginx.ingress.kubernetes.io/auth-response-headers"] == "X-Portal-User"
    spec = ingress["spec"]
    assert spec["ingressClassName"] == "nginx"
    assert spec["tls"] == [{"hosts": [HOST]}]  # the controller's default (wildcard) certificate
    (rule,) = spec["rules"]
    assert rule["host"] == HOST
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "sandbox", "port": {"number": 8888}}
    assert service_manifest(make_spec())["spec"]["ports"][0]["port"] == 8888


def test_an_httproute_validates_against_the_pinned_gateway_api_schema_with_external_auth() -> None:
    service, route = route_objects(make_spec(), SandboxRoute(kind="httproute", gateway="edge/sandboxes"))
    assert schema_causes(route) == []
    assert kubernetes_validate.validate(service, SCHEMA_VERSION, strict=True) == SCHEMA_VERSION
    assert service["spec"] == {
        "type": "ExternalName",
        "externalName": "gpu-portal-web.gpu-portal.svc.cluster.local",
        "ports": [{"name": "http", "port": 8000, "protocol": "TCP"}],
    }
    spec = route["spec"]
    assert spec["hostnames"] == [HOST]
    assert spec["parentRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "sandboxes", "namespace": "edge"}
    ]
    (rule,) = spec["rules"]
    (auth,) = rule["filters"]
    assert auth["type"] == "ExternalAuth"
    assert auth["externalAuth"]["backendRef"] == {"name": "portal-auth", "port": 8000}  # its own namespace
    assert auth["externalAuth"]["http"]["path"] == GATEWAY_AUTH_PATH
    assert rule["backendRefs"] == [{"name": "sandbox", "port": 8888}]


def test_the_pinned_schema_refuses_what_a_gateway_api_server_would() -> None:
    _, route = route_objects(make_spec(), SandboxRoute(kind="httproute"))
    unknown = copy.deepcopy(route)
    unknown["spec"]["rules"][0]["filters"][0]["externalAuth"]["timeout"] = "5s"
    assert schema_causes(unknown)
    wrong_type = copy.deepcopy(route)
    wrong_type["spec"]["rules"][0]["filters"][0]["type"] = "ForwardAuth"
    assert schema_causes(wrong_type)


def test_ssh_sandboxes_get_no_route() -> None:
    assert route_objects(make_spec(image_kind="shell"), ROUTE) == []


def test_a_deployments_endpoint_is_routed_through_the_endpoint_check_with_no_sign_in() -> None:
    spec = make_serving_spec(replicas=1, access_host=ENDPOINT_HOST)
    (ingress,) = route_objects(spec, ROUTE)
    assert kubernetes_validate.validate(ingress, SCHEMA_VERSION, strict=True) == SCHEMA_VERSION
    assert ingress["metadata"]["name"] == "model"
    notes = ingress["metadata"]["annotations"]
    # the endpoint check on the same Service as the sandbox check
    assert notes["nginx.ingress.kubernetes.io/auth-url"] == (
        "http://gpu-portal-web.gpu-portal.svc.cluster.local:8000/auth/endpoint/check"
    )
    # a client gets the refusal itself: no browser sign-in, no gate cookie
    assert "nginx.ingress.kubernetes.io/auth-signin" not in notes
    assert "nginx.ingress.kubernetes.io/auth-always-set-cookie" not in notes
    (rule,) = ingress["spec"]["rules"]
    assert rule["host"] == ENDPOINT_HOST
    assert rule["http"]["paths"][0]["backend"]["service"] == {"name": "model", "port": {"number": 8000}}
    assert [obj["kind"] for obj in workload_objects(spec)][-1] == "Ingress"

    service, route = route_objects(spec, SandboxRoute(kind="httproute", gateway="edge/sandboxes"))
    assert schema_causes(route) == []
    assert service["metadata"]["name"] == "portal-auth"
    (rule,) = route["spec"]["rules"]
    assert route["spec"]["hostnames"] == [ENDPOINT_HOST]
    assert rule["filters"][0]["externalAuth"]["http"]["path"] == GATEWAY_ENDPOINT_AUTH_PATH
    assert rule["backendRefs"] == [{"name": "model", "port": 8000}]


@pytest.mark.parametrize("kind", ["ingress", "httproute"])
def test_the_cluster_setting_picks_the_route(kind: str) -> None:
    options = ManifestOptions(route=SandboxRoute(kind=kind))  # type: ignore[arg-type]
    kinds = {obj["kind"] for obj in workload_objects(make_spec(), options)}
    assert ("HTTPRoute" in kinds) == (kind == "httproute") and ("Ingress" in kinds) == (kind == "ingress")


def test_vs_code_runs_code_server_without_its_own_password_behind_the_gate() -> None:
    spec = make_spec(image_kind="vscode", image="codercom/code-server:4.105.1")
    command = container_command(spec)
    assert command[0] == "code-server" and "--auth=none" in command and "--bind-addr=0.0.0.0:8888" in command
    assert sandbox_access(spec) == f"https://{HOST}/"
    (ingress,) = route_objects(spec, ROUTE)
    assert ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["port"] == {"number": 8888}
    statefulset = next(obj for obj in workload_objects(spec) if obj["kind"] == "StatefulSet")
    container = statefulset["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"] == [{"name": "http", "containerPort": 8888, "protocol": "TCP"}]
    assert kubernetes_validate.validate(statefulset, SCHEMA_VERSION, strict=True) == SCHEMA_VERSION


def test_a_cluster_that_names_its_certificate_gets_it_copied_to_each_workload(fake_kube) -> None:
    from tests.fakekube.resources import BY_KIND
    from workers.drivers.base import ClusterConfig, DriverError
    from workers.drivers.kubernetes import KubernetesDriver, KubernetesOptions

    with fake_kube.store.lock:
        fake_kube.api.create(BY_KIND["Secret"], "ingress-nginx", {
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "wildcard", "namespace": "ingress-nginx"},
            "data": {"tls.crt": "Y2VydA==", "tls.key": "a2V5"},
        })  # fmt: skip
    config = ClusterConfig(name="fake", driver="kubernetes", api_url=fake_kube.url)
    named = ManifestOptions(route=SandboxRoute(tls_secret="ingress-nginx/wildcard"))
    driver = KubernetesDriver(config, KubernetesOptions(manifests=named, timeout=(2.0, 2.0)))
    spec = make_spec()
    driver.apply_workload(spec)
    ingress = fake_kube.get("Ingress", "sandbox", spec.namespace)
    assert ingress["spec"]["tls"] == [{"hosts": [HOST], "secretName": "sandbox-tls"}]
    copied = fake_kube.get("Secret", "sandbox-tls", spec.namespace)
    assert copied["type"] == "kubernetes.io/tls" and copied["data"] == {
        "tls.crt": "Y2VydA==",
        "tls.key": "a2V5",
    }

    serving = make_serving_spec(replicas=1, access_host=ENDPOINT_HOST)
    driver.apply_workload(serving)
    endpoint = fake_kube.get("Ingress", "model", serving.namespace)
    assert endpoint["spec"]["tls"] == [{"hosts": [ENDPOINT_HOST], "secretName": "sandbox-tls"}]
    assert fake_kube.get("Secret", "sandbox-tls", serving.namespace)["data"] == copied["data"]

    missing = ManifestOptions(route=SandboxRoute(tls_secret="ingress-nginx/nope"))
    driver = KubernetesDriver(config, KubernetesOptions(manifests=missing, timeout=(2.0, 2.0)))
    with pytest.raises(DriverError, match="certificate Secret ingress-nginx/nope is missing"):
        driver.apply_workload(make_spec(workload_id=43, namespace="sbx-vision-other-43"))


def test_a_deployment_running_before_its_route_existed_gets_it_without_touching_its_replicas(fake_kube):
    from workers.drivers.base import ClusterConfig
    from workers.drivers.kubernetes import KubernetesDriver, KubernetesOptions

    config = ClusterConfig(name="fake", driver="kubernetes", api_url=fake_kube.url)
    spec = make_serving_spec(replicas=1, access_host=ENDPOINT_HOST)
    KubernetesDriver(config, KubernetesOptions(timeout=(2.0, 2.0))).apply_workload(spec)
    upgraded = KubernetesDriver(config, KubernetesOptions(timeout=(2.0, 2.0)))  # a new worker process
    upgraded.api.delete("Ingress", "model", spec.namespace)  # as a portal from before routes left it
    replica = fake_kube.get("Deployment", "serve-0", spec.namespace)["metadata"]["resourceVersion"]

    upgraded.refresh_access(spec)

    assert fake_kube.get("Ingress", "model", spec.namespace)["spec"]["rules"][0]["host"] == ENDPOINT_HOST
    assert fake_kube.get("Deployment", "serve-0", spec.namespace)["metadata"]["resourceVersion"] == replica


def test_a_route_deleted_by_hand_comes_back_after_the_re_apply_period(fake_kube):
    from workers.drivers.base import ClusterConfig
    from workers.drivers.kubernetes import KubernetesDriver, KubernetesOptions

    config = ClusterConfig(name="fake", driver="kubernetes", api_url=fake_kube.url)
    driver = KubernetesDriver(config, KubernetesOptions(timeout=(2.0, 2.0), reapply_seconds=60))
    spec = make_serving_spec(replicas=1, access_host=ENDPOINT_HOST)
    driver.apply_workload(spec)
    assert driver.refresh_access(spec) is True  # applied and read now
    driver.api.delete("Ingress", "model", spec.namespace)

    assert driver.refresh_access(spec) is False  # within the period: nothing is read again
    assert fake_kube.get("Ingress", "model", spec.namespace) is None

    later = driver.clock() + timedelta(seconds=61)
    driver.clock = lambda: later
    assert driver.refresh_access(spec) is True
    assert fake_kube.get("Ingress", "model", spec.namespace)["spec"]["rules"][0]["host"] == ENDPOINT_HOST


def test_an_older_deployments_quota_grows_to_admit_the_gateways_check_before_its_route(fake_kube):
    from workers.drivers.base import ClusterConfig
    from workers.drivers.kubernetes import KubernetesDriver, KubernetesOptions

    config = ClusterConfig(name="fake", driver="kubernetes", api_url=fake_kube.url)
    gateway = ManifestOptions(route=SandboxRoute(kind="httproute"))
    driver = KubernetesDriver(config, KubernetesOptions(timeout=(2.0, 2.0), manifests=gateway))
    spec = make_serving_spec(replicas=1, access_host=ENDPOINT_HOST)
    driver.apply_workload(spec)
    # as a portal from before deployments had routes left it: one Service allowed, no route
    driver.api.patch("ResourceQuota", "sandbox-quota", {"spec": {"hard": {"services": "1"}}}, spec.namespace)
    driver.api.delete("HTTPRoute", "model", spec.namespace)
    driver.api.delete("Service", "portal-auth", spec.namespace)

    upgraded = KubernetesDriver(config, KubernetesOptions(timeout=(2.0, 2.0), manifests=gateway))
    upgraded.refresh_access(spec)

    assert fake_kube.get("ResourceQuota", "sandbox-quota", spec.namespace)["spec"]["hard"]["services"] == "2"
    assert fake_kube.get("Service", "portal-auth", spec.namespace) is not None
    assert fake_kube.get("HTTPRoute", "model", spec.namespace) is not None
    order = [(r.method, r.resource) for r in fake_kube.api.requests if r.method in ("PATCH", "POST")][-3:]
    assert order == [("PATCH", "resourcequotas"), ("POST", "services"), ("POST", "httproutes")]
