"""GET /fleet/gpus: every GPU with its MIG layout and holders, for platform admins only; GET /gpu-types:
the catalogue of GPU types with prices and free capacity, open to anyone."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from portal.fleet.models import Gpu, Node

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
    assert cut["mig_enabled"] is True and cut["mig_mode"] == "layouts"
    assert cut["holder"] is None
    # A "layouts" GPU is cut whole: the request takes one of seven 1g.10gb, the rest stay free.
    holder = {"kind": "sandbox", "id": slice_id, "name": "mig-small"}
    assert cut["mig_slices"] == [
        {
            "profile": "1g.10gb",
            "start": start,
            "size": 1,
            "state": "ready",
            "holder": holder if start == placed["start"] else None,
        }
        for start in range(7)
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


# GET /gpu-types


def test_gpu_types_list_profiles_price_and_free_capacity(fleet, alice):
    body = alice.get("/api/v1/gpu-types").json()
    assert body["count"] == 1
    h100 = body["results"][0]
    assert h100["slug"] == "h100-80gb"
    assert h100["name"] == "NVIDIA H100 80GB"
    assert h100["memory_gb"] == 80
    assert h100["price_per_hour"] == "6.88"
    profiles = {p["name"]: p for p in h100["mig_profiles"]}
    assert profiles["1g.10gb"]["compute_slices"] == 1
    assert profiles["1g.10gb"]["memory_gb"] == 10
    assert profiles["1g.10gb"]["gpu_equivalents"] == "0.143"
    assert profiles["3g.40gb"]["price_per_hour"] == "2.95"  # 6.88 x 3/7
    assert h100["capacity"]["gpus"] == 16
    assert h100["capacity"]["free_gpus"] == 8
    assert h100["capacity"]["free_slices"]["1g.10gb"] == 8


def test_gpu_type_capacity_drops_when_gpus_are_taken(run_jobs, fleet, alice, slice_body):
    whole = {"name": "one", "team": "vision", "gpu": {"type": "h100-80gb", "count": 1}, "ttl_hours": 1}
    run_jobs(lambda: alice.post("/api/v1/sandboxes", whole, format="json"))
    run_jobs(lambda: alice.post("/api/v1/sandboxes", slice_body, format="json"))
    capacity = alice.get("/api/v1/gpu-types").json()["results"][0]["capacity"]
    assert capacity["free_gpus"] == 7
    # The cut GPU cannot take a full 7g.80gb any more; the other seven can.
    assert capacity["free_slices"]["7g.80gb"] == 7
    assert capacity["free_slices"]["1g.10gb"] == 8


def test_gpu_types_are_open_to_anyone_but_me_needs_a_signed_in_user(fleet):
    response = APIClient().get("/api/v1/gpu-types")
    assert response.status_code == 200
    assert {row["slug"] for row in response.json()["results"]} == {"h100-80gb"}
    assert APIClient().get("/api/v1/me").status_code == 401


def test_the_fleet_says_which_nodes_mig_layout_the_portal_manages(fleet, admin):
    unmanaged = Gpu.objects.filter(mig_enabled=True).first().node
    Node.objects.filter(pk=unmanaged.pk).update(mig_managed=False)

    rows = admin.get(URL).json()["results"]

    assert {row["node"] for row in rows if not row["mig_managed"]} == {unmanaged.name}
    assert any(row["mig_managed"] for row in rows)
