"""The deployment API: deploy with a token, see the endpoint and a working example, scale, extend,
terminate; errors in the documented shape, idempotent creates, visibility and bounded lists."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from portal.deployments.models import Serving
from portal.deployments.selectors import deployment_client_example, deployment_example
from portal.workloads.models import Workload

URL = "/api/v1/deployments"
LLAMA_8B = {
    "name": "llama8b",
    "team": "vision",
    "model": "llama-3.1-8b-instruct",
    "gpu": {"type": "h100-80gb", "count": 1},
    "ttl_hours": 4,
}


@pytest.fixture(autouse=True)
def _fresh_throttle():
    """Throttle counters live in the cache; start every test with none."""
    cache.clear()
    yield
    cache.clear()


def deploy(client, run_jobs, **fields):
    response = run_jobs(lambda: client.post(URL, {**LLAMA_8B, **fields}, format="json"))
    assert response.status_code == 201, response.json()
    return response.json()


def test_llama_8b_on_one_h100_runs_with_an_endpoint_and_a_working_example(run_jobs, fleet, catalog, alice):
    created = deploy(alice, run_jobs)
    assert created["model"] == "llama-3.1-8b-instruct"
    assert created["team"] == "vision" and created["owner"] == "alice"

    body = alice.get(f"{URL}/{created['id']}").json()
    assert body["state"] == "running"
    assert body["gpu"] == {"type": "h100-80gb", "count": 1, "mig_profile": None, "label": "1x h100-80gb"}
    assert body["replicas"] == 1 and body["ready_replicas"] == 1
    assert body["runtime"] == "vllm" and body["api"] == "openai" and body["precision"] == "bf16"
    assert body["endpoint"].startswith("https://dep-vision-llama8b-")
    assert body["access"] == body["endpoint"]
    # the simulated cluster's stand-in for the endpoint, behind the same check
    host = body["endpoint"].removeprefix("https://")
    stand_in = f"{django_settings.PORTAL_BASE_URL}/simulated-endpoint/{host}"
    assert body["example"].startswith(f"curl -s {stand_in}/v1/chat/completions")
    assert "Authorization: Bearer $SERVING_TOKEN" in body["example"]
    assert '"model": "meta-llama/Llama-3.1-8B-Instruct"' in body["example"]
    assert body["placement"] == [{"replica": 0, "node": "gpu-h100-a", "gpus": [0]}]
    assert body["hourly_cost"] == "6.88"
    assert body["cost_so_far"] == "0.00"
    assert body["approval"] is None
    assert body["started_at"] is not None


def test_the_cheapest_fit_is_used_when_no_gpu_is_given(run_jobs, fleet, catalog, alice):
    body = deploy(alice, run_jobs, gpu=None)
    assert body["gpu"]["mig_profile"] == "3g.40gb"
    placement = alice.get(f"{URL}/{body['id']}").json()["placement"]
    assert len(placement) == 1
    assert placement[0]["node"] == "gpu-h100-b" and placement[0]["mig_profile"] == "3g.40gb"
    assert isinstance(placement[0]["gpu"], int) and isinstance(placement[0]["start"], int)


def test_an_embedding_model_gets_an_embeddings_example(run_jobs, fleet, catalog, alice):
    body = deploy(alice, run_jobs, name="bge", model="bge-large-en-v1.5", gpu=None)
    example = alice.get(f"{URL}/{body['id']}").json()["example"]
    assert "/v1/embeddings" in example and '"model": "BAAI/bge-large-en-v1.5"' in example


def test_a_triton_model_gets_a_kserve_v2_inference_example(run_jobs, fleet, catalog, researcher):
    from portal.deployments.services import deployment_request

    workload = run_jobs(
        lambda: deployment_request(user=researcher, team="vision", name="resnet", model="resnet-50")
    )
    workload = Workload.objects.select_related("serving__model", "serving__runtime").get(pk=workload.pk)
    example = deployment_example(workload)
    assert example is not None
    host = workload.access.removeprefix("https://")
    assert f"/simulated-endpoint/{host}/v2/models/resnet-50/infer" in example
    assert example.count('-H "Authorization: Bearer $SERVING_TOKEN"') == 2  # metadata and infer
    assert "[1, 3, 224, 224]" in example and "FP16" in example
    assert deployment_client_example(workload) is None  # KServe v2: no OpenAI client


def test_70b_on_two_h100s_is_refused_naming_gpu_count(fleet, catalog, alice):
    response = alice.post(
        URL,
        {
            **LLAMA_8B,
            "name": "big",
            "model": "llama-3.1-70b-instruct",
            "gpu": {"type": "h100-80gb", "count": 2},
        },
        format="json",
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert error["fields"]["gpu.count"] == [
        "Llama 3.1 70B Instruct needs at least 4 h100-80gb GPUs at these settings."
    ]
    assert not Workload.objects.exists()


def test_bad_inputs_name_their_fields(fleet, catalog, alice):
    unknown = alice.post(URL, {**LLAMA_8B, "model": "gpt-5"}, format="json").json()["error"]
    assert "model" in unknown["fields"]
    sizing = alice.post(URL, {**LLAMA_8B, "dtype": "int3", "context": 0}, format="json").json()["error"]
    assert {"dtype", "context"} <= set(sizing["fields"])
    replicas = alice.post(URL, {**LLAMA_8B, "replicas": 0}, format="json").json()["error"]
    assert "replicas" in replicas["fields"]
    shape = alice.post(URL, {**LLAMA_8B, "gpu": {"count": 1}, "replicas": "two"}, format="json")
    assert shape.status_code == 400
    assert {"gpu.type", "replicas"} <= set(shape.json()["error"]["fields"])


def test_scale_up_within_policy_then_down(run_jobs, fleet, catalog, alice, team):
    team.auto_approve_max_gpus = 4
    team.save()
    body = deploy(alice, run_jobs)

    up = run_jobs(lambda: alice.post(f"{URL}/{body['id']}/scale", {"replicas": 2}, format="json"))
    assert up.status_code == 200, up.json()
    scaled = alice.get(f"{URL}/{body['id']}").json()
    assert scaled["replicas"] == 2 and scaled["ready_replicas"] == 2 and scaled["state"] == "running"
    assert [p["replica"] for p in scaled["placement"]] == [0, 1]
    assert scaled["hourly_cost"] == "13.76"

    down = run_jobs(lambda: alice.post(f"{URL}/{body['id']}/scale", {"replicas": 1}, format="json"))
    assert down.status_code == 200
    after = alice.get(f"{URL}/{body['id']}").json()
    assert after["replicas"] == 1 and len(after["placement"]) == 1
    assert after["hourly_cost"] == "6.88"


def test_scale_up_beyond_policy_waits_for_a_lead(run_jobs, fleet, catalog, alice, bob):
    body = deploy(alice, run_jobs)
    asked = alice.post(f"{URL}/{body['id']}/scale", {"replicas": 2}, format="json").json()
    assert asked["replicas"] == 1
    assert asked["approval"]["kind"] == "scale" and asked["approval"]["state"] == "pending"
    assert asked["approval"]["replicas"] == 2

    inbox = bob.get("/api/v1/approvals?state=pending").json()["results"]
    assert inbox[0]["kind"] == "scale" and inbox[0]["replicas"] == 2
    assert inbox[0]["sandbox"]["kind"] == "deployment"
    assert inbox[0]["summary"] == "scale llama8b to 2 replicas"

    decided = run_jobs(
        lambda: bob.post(f"/api/v1/approvals/{asked['approval']['id']}/approve", {}, format="json")
    )
    assert decided.status_code == 200
    assert alice.get(f"{URL}/{body['id']}").json()["replicas"] == 2


def test_a_scale_waiting_for_a_lead_is_withdrawn_through_the_api(run_jobs, fleet, catalog, alice, bob):
    body = deploy(alice, run_jobs)
    asked = alice.post(f"{URL}/{body['id']}/scale", {"replicas": 2}, format="json").json()
    assert "withdraw_scale" in asked["allowed_actions"]
    withdrawn = alice.post(f"{URL}/{body['id']}/scale/withdraw", format="json")
    assert withdrawn.status_code == 200
    assert withdrawn.json()["approval"]["state"] == "cancelled" and withdrawn.json()["replicas"] == 1
    assert "withdraw_scale" not in withdrawn.json()["allowed_actions"]
    again = alice.post(f"{URL}/{body['id']}/scale/withdraw", format="json")
    assert again.status_code == 409 and "No scale" in again.json()["error"]["message"]
    assert bob.get("/api/v1/approvals?state=pending").json()["count"] == 0


def test_scale_needs_a_whole_number(run_jobs, fleet, catalog, alice):
    body = deploy(alice, run_jobs)
    response = alice.post(f"{URL}/{body['id']}/scale", {"replicas": 1.5}, format="json")
    assert response.status_code == 400
    assert "replicas" in response.json()["error"]["fields"]
    too_many = alice.post(f"{URL}/{body['id']}/scale", {"replicas": 99}, format="json")
    assert too_many.status_code == 400 and "replicas" in too_many.json()["error"]["fields"]


def test_extend_moves_the_expiry(run_jobs, fleet, catalog, alice):
    created = deploy(alice, run_jobs)
    assert created["expires_at"] is None  # its lifetime starts when it runs
    body = alice.get(f"{URL}/{created['id']}").json()
    extended = alice.post(f"{URL}/{body['id']}/extend", {"hours": 2}, format="json")
    assert extended.status_code == 200
    assert extended.json()["expires_at"] > body["expires_at"]


def test_terminate_ends_it_and_the_endpoint_goes_away_then_scale_and_extend_conflict(
    run_jobs, fleet, catalog, alice
):
    body = deploy(alice, run_jobs)
    ended = run_jobs(lambda: alice.post(f"{URL}/{body['id']}/terminate"))
    assert ended.status_code == 200
    after = alice.get(f"{URL}/{body['id']}").json()
    assert after["state"] == "terminated"
    assert after["endpoint"] is None and after["example"] is None
    assert after["placement"] == [] and after["ready_replicas"] == 0

    for action, payload in (("scale", {"replicas": 2}), ("extend", {"hours": 1}), ("terminate", {})):
        response = alice.post(f"{URL}/{body['id']}/{action}", payload, format="json")
        assert response.status_code == 409, action
        assert response.json()["error"]["code"] == "conflict"


def test_others_get_404_for_a_deployment_they_may_not_see(run_jobs, fleet, catalog, alice, carol):
    body = deploy(alice, run_jobs)
    assert carol.get(f"{URL}/{body['id']}").status_code == 404
    for action, payload in (("scale", {"replicas": 2}), ("extend", {"hours": 1}), ("terminate", {})):
        response = carol.post(f"{URL}/{body['id']}/{action}", payload, format="json")
        assert response.status_code == 404, action
    assert carol.get(URL).json()["count"] == 0
    # A sandbox id is not a deployment id.
    assert alice.get(f"/api/v1/sandboxes/{body['id']}").status_code == 404


def test_the_same_idempotency_key_returns_the_first_deployment(run_jobs, fleet, catalog, alice):
    first = run_jobs(lambda: alice.post(URL, LLAMA_8B, format="json", HTTP_IDEMPOTENCY_KEY="deploy-1"))
    again = alice.post(URL, LLAMA_8B, format="json", HTTP_IDEMPOTENCY_KEY="deploy-1")
    assert first.status_code == again.status_code == 201
    assert again.json()["id"] == first.json()["id"]
    assert again["Idempotent-Replayed"] == "true"
    assert Workload.objects.filter(kind="deployment").count() == 1
    other = alice.post(URL, {**LLAMA_8B, "name": "other"}, format="json", HTTP_IDEMPOTENCY_KEY="deploy-1")
    assert other.status_code == 409


def test_the_list_is_newest_first_filterable_and_bounded_in_queries(run_jobs, fleet, catalog, alice, bob):
    ids = [deploy(alice, run_jobs, name=f"dep-{n}", gpu=None)["id"] for n in range(3)]
    run_jobs(lambda: alice.post(f"{URL}/{ids[0]}/terminate"))

    listed = alice.get(URL).json()
    assert [d["id"] for d in listed["results"]] == ids[::-1]
    assert all(isinstance(d["placement"], list) for d in listed["results"])
    live = alice.get(f"{URL}?live=true").json()
    assert {d["id"] for d in live["results"]} == set(ids[1:])
    assert alice.get(f"{URL}?state=terminated").json()["count"] == 1
    assert bob.get(f"{URL}?owner=alice").json()["count"] == 3  # a lead sees the team's

    with CaptureQueriesContext(connection) as few:
        alice.get(URL)
    for n in range(3, 8):
        deploy(alice, run_jobs, name=f"dep-{n}", gpu=None)
    with CaptureQueriesContext(connection) as many:
        alice.get(URL)
    assert len(many) == len(few)
    assert len(many) <= 12
    assert Serving.objects.count() == 8


def test_the_schema_describes_the_deployment_endpoints(db):

    paths = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()["paths"]
    for path in [
        "/api/v1/deployments",
        "/api/v1/deployments/{id}",
        "/api/v1/deployments/{id}/scale",
        "/api/v1/deployments/{id}/extend",
        "/api/v1/deployments/{id}/terminate",
    ]:
        assert path in paths, path


def test_a_deployments_history_is_its_audit_trail(run_jobs, fleet, catalog, alice, carol):
    made = run_jobs(
        lambda: alice.post(
            URL, {"name": "chat", "team": "vision", "model": "llama-3.1-8b-instruct"}, format="json"
        )
    ).json()
    events = alice.get(f"{URL}/{made['id']}/history").json()["results"]
    assert [e["action"] for e in events][:1] == ["deployment.request"]
    assert "deployment.running" in [e["action"] for e in events]
    assert carol.get(f"{URL}/{made['id']}/history").status_code == 404


def test_a_long_history_is_read_a_page_at_a_time(
    fleet, researcher, team, alice, django_assert_max_num_queries
):
    from portal.audit.models import AuditEvent
    from portal.audit.services import audit_record
    from tests.rows import make_sandbox

    sandbox = make_sandbox(owner=researcher, team=team, gpu=fleet["whole"].gpus.first())
    for n in range(120):
        audit_record(actor=researcher, action="sandbox.extend", obj=sandbox, detail=f"by {n} h")
    url = f"/api/v1/sandboxes/{sandbox.number}/history"
    with django_assert_max_num_queries(12) as queries:
        first = alice.get(url).json()
    read = [q["sql"] for q in queries.captured_queries if 'FROM "audit_auditevent"' in q["sql"]]
    assert read and all("COUNT(" in sql or "LIMIT 50" in sql for sql in read)  # one page, not the trail
    assert (
        first["count"] == AuditEvent.objects.filter(object_type="sandbox", object_id=str(sandbox.pk)).count()
    )
    assert first["count"] >= 120
    assert len(first["results"]) == 50 and first["results"][0]["detail"] == "by 0 h"  # oldest first
    last = alice.get(url, {"page": 3}).json()["results"]
    assert last[-1]["detail"] == "by 119 h"
