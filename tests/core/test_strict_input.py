"""The API is strict about types and parameters, in the error shape: no string taken for a number,
no number for a string, no silent default for a bad page, no empty filter read as 'any', no
query parameter an endpoint does not take ignored."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from portal.catalog.demo import catalog_seed
from tests.rows import make_deployment, make_sandbox

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(researcher):
    client = APIClient()
    client.force_authenticate(researcher)
    return client


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": 123}, "name"),
        ({"replicas": "2"}, "replicas"),
        ({"replicas": True}, "replicas"),
        ({"gpu": {"type": "h100-80gb", "count": "1"}}, "gpu.count"),
        ({"gpu": {"type": 7}}, "gpu.type"),
    ],
)
def test_a_json_body_of_the_wrong_types_is_refused(api, fleet, team, body, field):
    request = {"team": "vision", "name": "box", "gpu": {"type": "h100-80gb", "count": 1}, **body}
    path = "/api/v1/deployments" if "replicas" in body else "/api/v1/sandboxes"
    if path.endswith("deployments"):
        request["model"] = "llama-3.1-8b-instruct"
    answer = api.post(path, request, format="json")
    assert answer.status_code == 400, answer.content
    assert field in answer.json()["error"]["fields"], answer.json()


@pytest.mark.parametrize(
    "query", ["page=x", "page=0", "page_size=0", "page_size=501", "page_size=-1", "page=1.5"]
)
def test_bad_paging_is_refused(api, query):
    answer = api.get(f"/api/v1/sandboxes?{query}")
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid", query


@pytest.mark.parametrize(
    "path", ["/api/v1/sandboxes?state=", "/api/v1/approvals?state=", "/api/v1/deployments?team="]
)
def test_an_empty_filter_is_refused_on_every_list(api, path):
    answer = api.get(path)
    assert answer.status_code == 400 and answer.json()["error"]["fields"], path


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/sandboxes?stat=running",
        "/api/v1/deployments?nme=chat",
        "/api/v1/approvals?state=pending&mine=1",
        "/api/v1/audit-events?actr=alice",
        "/api/v1/catalog/models?search=llama",
    ],
)
def test_a_parameter_a_list_does_not_take_is_refused_not_ignored(api, admin, path):
    # ignored, a misspelt filter would answer with every row
    answer = (admin if "audit" in path else api).get(path)
    assert answer.status_code == 400, (path, answer.content)
    error = answer.json()["error"]
    (stray,) = error["fields"]
    assert stray in path and "Not a parameter here, where" in error["message"]
    assert "page_size" in error["message"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/spend?grup_by=user",
        "/api/v1/spend/daily?group_by=user",  # the report's, not the daily series'
        "/api/v1/search?q=llama&kind=model",
        "/api/v1/catalog/models/llama-3.1-8b-instruct/sizing?ctx=4096",
        "/api/v1/teams/vision/statement?month=2026-03&team=vision",
        "/api/v1/presets?kind=sandbox&knd=deployment",
        "/api/v1/notifications?ordr=unread",
    ],
)
def test_a_parameter_a_report_does_not_take_is_refused_not_ignored(api, path):
    # ignored, a misspelt `group_by` would answer with the default grouping
    catalog_seed()
    answer = api.get(path)
    assert answer.status_code == 400, (path, answer.content)
    error = answer.json()["error"]
    (stray,) = error["fields"]
    assert stray in path and "Not a parameter here" in error["message"]
    base, query = path.split("?")
    kept = "&".join(part for part in query.split("&") if not part.startswith(f"{stray}="))
    assert api.get(f"{base}?{kept}&format=json").status_code == 200  # without it, and with format


def test_a_workloads_series_refuses_a_parameter_it_does_not_take(api, researcher, team, whole_gpus):
    catalog_seed()
    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0])
    deployment = make_deployment(owner=researcher, team=team, gpu=whole_gpus[1])
    for path in (
        f"/api/v1/sandboxes/{sandbox.number}/utilization?step=60&form=2026-12-01T00:00:00Z",
        f"/api/v1/sandboxes/{sandbox.number}/cost?step=3600&stepp=60",
        f"/api/v1/deployments/{deployment.number}/serving?step=60&unti=2026-12-01T00:00:00Z",
    ):
        answer = api.get(path)
        assert answer.status_code == 400, (path, answer.content)
        assert api.get(path.rsplit("&", 1)[0]).status_code == 200, path


def test_good_paging_and_filters_still_work(api):
    assert api.get("/api/v1/sandboxes?page=1&page_size=10&state=running").status_code == 200
    assert api.get("/api/v1/approvals?state=pending").status_code == 200
