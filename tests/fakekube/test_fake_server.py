"""The fake API server answers as a real one would, so driver tests against it mean something."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from tests.fakekube import FakeKube, fixtures
from tests.fakekube.errors import ApiError
from tests.fakekube.resources import BY_KIND

fake_kube = fixtures.fake_kube

NAMESPACE = BY_KIND["Namespace"]
CONFIG_MAP = BY_KIND["ConfigMap"]


def request(
    fake: FakeKube, method: str, path: str, body: object = None, content_type: str = ""
) -> tuple[int, dict]:
    raw = json.dumps(body).encode() if body is not None else b""
    return fake.api.handle(method, path, content_type or "application/json", raw)


def config_map(name: str, data: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def test_objects_a_real_server_refuses_are_refused_with_422_or_404(fake_kube: FakeKube) -> None:
    with pytest.raises(ApiError) as unknown_field:
        fake_kube.api.create(
            NAMESPACE, "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}, "bogus": 1}
        )
    assert unknown_field.value.code == 422 and unknown_field.value.body["reason"] == "Invalid"
    assert "bogus" in unknown_field.value.body["message"]
    with pytest.raises(ApiError) as bad_name:
        fake_kube.api.create(
            NAMESPACE, "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Bad_Name"}}
        )
    assert bad_name.value.code == 422
    with pytest.raises(ApiError) as no_namespace:
        fake_kube.api.create(CONFIG_MAP, "nowhere", config_map("c", {}))
    assert no_namespace.value.code == 404
    assert no_namespace.value.body["message"] == 'namespaces "nowhere" not found'


def test_creating_twice_is_409_already_exists_with_a_status_body(fake_kube: FakeKube) -> None:
    assert request(fake_kube, "POST", "/api/v1/namespaces/default/configmaps", config_map("c", {}))[0] == 201
    status, body = request(fake_kube, "POST", "/api/v1/namespaces/default/configmaps", config_map("c", {}))
    assert status == 409
    assert (body["kind"], body["reason"], body["message"]) == (
        "Status",
        "AlreadyExists",
        'configmaps "c" already exists',
    )


def test_the_server_stamps_identity_and_bumps_the_version_on_every_write(fake_kube: FakeKube) -> None:
    _, created = request(
        fake_kube, "POST", "/api/v1/namespaces/default/configmaps", config_map("c", {"a": "1"})
    )
    assert created["metadata"]["uid"] and created["metadata"]["creationTimestamp"]
    _, patched = request(
        fake_kube,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/c",
        {"data": {"a": None, "b": "2"}},
        "application/strategic-merge-patch+json",
    )
    assert patched["data"] == {"b": "2"}  # merge semantics: null removes a key
    assert patched["metadata"]["uid"] == created["metadata"]["uid"]
    assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


def test_a_stale_resource_version_is_a_409_conflict(fake_kube: FakeKube) -> None:
    _, created = request(fake_kube, "POST", "/api/v1/namespaces/default/configmaps", config_map("c", {}))
    stale = {**created, "data": {"x": "1"}}
    assert request(fake_kube, "PUT", "/api/v1/namespaces/default/configmaps/c", stale)[0] == 200
    status, body = request(fake_kube, "PUT", "/api/v1/namespaces/default/configmaps/c", stale)
    assert (status, body["reason"]) == (409, "Conflict")
    json_patch = [{"op": "add", "path": "/data/y", "value": "2"}]
    assert (
        request(
            fake_kube,
            "PATCH",
            "/api/v1/namespaces/default/configmaps/c",
            json_patch,
            "application/json-patch+json",
        )[0]
        == 415
    )


def test_deleting_a_namespace_takes_its_contents_with_it(fake_kube: FakeKube) -> None:
    request(
        fake_kube,
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gone"}},
    )
    request(fake_kube, "POST", "/api/v1/namespaces/gone/configmaps", config_map("c", {}))
    assert request(fake_kube, "DELETE", "/api/v1/namespaces/gone")[0] == 200
    assert fake_kube.list("ConfigMap", "gone") == []
    status, body = request(fake_kube, "GET", "/api/v1/namespaces/gone")
    assert (status, body["reason"]) == (404, "NotFound")


def test_labels_select_by_equality_set_and_existence_terms(fake_kube: FakeKube) -> None:
    def names(selector: str) -> list[str]:
        status, body = request(fake_kube, "GET", f"/api/v1/nodes?labelSelector={quote(selector)}")
        assert status == 200 and body["kind"] == "NodeList"
        return sorted(item["metadata"]["name"] for item in body["items"])

    assert names("nvidia.com/mig.strategy=single") == ["gpu-a100-a"]
    assert names("nvidia.com/mig.config in (all-balanced,all-1g.5gb)") == ["gpu-a100-a", "gpu-h100-b"]
    assert names("nvidia.com/mig.config notin (all-balanced),nvidia.com/gpu.product") == [
        "gpu-a100-a",
        "gpu-h100-a",
    ]
    assert names("!nvidia.com/gpu.product") == ["cpu-a"]


def test_injected_failures_answer_once_then_the_server_recovers(fake_kube: FakeKube) -> None:
    fake_kube.fail_next(403, method="GET", path_contains="/nodes")
    status, body = request(fake_kube, "GET", "/api/v1/nodes")
    assert status == 403 and 'cannot list resource "nodes"' in body["message"]
    assert request(fake_kube, "GET", "/api/v1/nodes")[0] == 200


def test_the_pod_proxy_answers_what_the_pods_server_serves_only_while_it_runs(fake_kube: FakeKube) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "serve-0"},
        "spec": {"containers": [{"name": "server", "image": "vllm/vllm-openai:v0.8.5"}]},
    }
    fake_kube.api.create(BY_KIND["Pod"], "default", pod)
    fake_kube.serve_pod_http("default", "serve-0", port=8000, path="metrics", text="up 1\n")
    path = f"/api/v1/namespaces/default/pods/{quote('serve-0:8000', safe='')}/proxy/metrics"
    status, body = request(fake_kube, "GET", path)
    assert status == 503 and body["reason"] == "ServiceUnavailable"  # not running yet
    fake_kube.pod_running("default", name="serve-0")
    assert request(fake_kube, "GET", path) == (200, {"__text__": "up 1\n"})
    assert request(fake_kube, "GET", path.replace("8000", "8002"))[0] == 503  # nothing listens there
    assert request(fake_kube, "GET", path.replace("serve-0", "serve-9"))[0] == 404
    assert fake_kube.requests[-1].resource == "pods/proxy" and fake_kube.requests[-1].verb == "get"
