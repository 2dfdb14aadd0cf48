"""GET /fleet/gpus: every GPU with its MIG layout and holders, for platform admins only."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

URL = "/api/v1/fleet/gpus"


def test_the_fleet_shows_who_holds_each_gpu_and_slice(run_jobs, fleet, alice, admin, slice_body):
    whole = {"name": "one", "team": "vision", "gpu": {"type": "h100-80gb", "count": 1}, "ttl_hours": 1}
    whole_id = run_jobs(lambda: alice.post("/api/v1/sandboxes", whole, format="json")).json()["id"]
    slice_id = run_jobs(lambda: alice.post("/api/v1/sandboxes", slice_body, format="json")).json()["id"]
    placed = alice.get(f"/api/v1/sandboxes/{slice_id}").json()["placement"]

    body = admin.get(URL, {"page_size": 100}).json()
    assert body["count"] == 16
    gpus = {(g["node"], g["index"]): g for g in body["results"]}

    held_whole = [g for g in body["results"] if g["holder"]]
    assert [g["holder"] for g in held_whole] == [{"kind": "sandbox", "id": whole_id, "name": "one"}]
    assert held_whole[0]["mig_enabled"] is False
    assert held_whole[0]["mig_slices"] == []
    assert held_whole[0]["type"] == "h100-80gb"
    assert held_whole[0]["uuid"].startswith("GPU-gpu-h100-a-")

    cut = gpus[("gpu-h100-b", placed["gpu"])]
    assert cut["mig_enabled"] is True
    assert cut["holder"] is None
    assert cut["mig_slices"] == [
        {
            "profile": "1g.10gb",
            "start": placed["start"],
            "size": 1,
            "state": "ready",
            "holder": {"kind": "sandbox", "id": slice_id, "name": "mig-small"},
        }
    ]


def test_a_released_hold_leaves_the_gpu_free(run_jobs, fleet, alice, admin):
    whole = {"name": "one", "team": "vision", "gpu": {"type": "h100-80gb", "count": 1}, "ttl_hours": 1}
    workload_id = run_jobs(lambda: alice.post("/api/v1/sandboxes", whole, format="json")).json()["id"]
    run_jobs(lambda: alice.post(f"/api/v1/sandboxes/{workload_id}/terminate"))
    body = admin.get(URL, {"page_size": 100}).json()
    assert all(g["holder"] is None for g in body["results"])


def test_researchers_and_leads_may_not_see_the_fleet(fleet, alice, bob):
    for client in (alice, bob):
        response = client.get(URL)
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "forbidden"


def test_the_fleet_list_takes_a_bounded_number_of_queries(run_jobs, fleet, alice, admin, slice_body):
    for number in range(4):
        body = {**slice_body, "name": f"slice-{number}"}
        run_jobs(lambda body=body: alice.post("/api/v1/sandboxes", body, format="json"))
    admin.get(URL)
    with CaptureQueriesContext(connection) as queries:
        response = admin.get(URL, {"page_size": 100})
    assert len(response.json()["results"]) == 16
    assert len(queries) <= 8
