"""A deployment's endpoint host reads as a deployment's (`dep-...`) while it runs in its namespace
as before; its estimate says whether the fleet has room for every replica now."""

from __future__ import annotations

import pytest
from django.test import Client

from portal.deployments.services import deployment_request
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import WorkloadState
from tests.conftest import signed_in
from workers.manifests.names import deployment_host_label, workload_namespace_name

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
ESTIMATE = "/deployments/new/estimate/"
LLAMA_8B_ON_WHOLE_H100 = {
    "team": "vision",
    "name": "llama-chat",
    "model": "llama-3.1-8b-instruct",
    "sized_model": "llama-3.1-8b-instruct",
    "dtype": "bf16",
    "context": "8192",
    "concurrency": "8",
    "gpu": "h100-80gb/1",
    "replicas": "1",
    "ttl_hours": "4",
    "purpose": "Chat for the desk",
}


@pytest.fixture
def alice(researcher) -> Client:
    return signed_in(researcher)


def test_the_host_label_is_a_dns_label_that_keeps_the_id():
    label = deployment_host_label("vision", "Llama Chat!" * 10, 1234)
    assert label.startswith("dep-vision-llama-chat")
    assert label.endswith("-1234")
    assert len(label) <= 63
    assert workload_namespace_name("vision", "llama", 7) == "sbx-vision-llama-7"  # namespaces unchanged


def test_a_running_deployment_is_reached_at_a_dep_host_in_its_sbx_namespace(
    run_jobs, fleet, catalog, researcher
):
    workload = run_jobs(
        lambda: deployment_request(
            user=researcher, team="vision", name="llama8b", model="llama-3.1-8b-instruct"
        )
    )
    workload.refresh_from_db()

    assert workload.state == WorkloadState.RUNNING
    assert workload.access.startswith(f"https://dep-vision-llama8b-{workload.pk}.")
    assert "sbx-" not in workload.access
    assert workload.namespace == f"sbx-vision-llama8b-{workload.pk}"


def test_a_sandbox_is_still_reached_at_its_namespace(run_jobs, fleet, researcher, slice_request):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **{**slice_request, "name": "notebook"}))
    sandbox.refresh_from_db()

    assert sandbox.access and f"sbx-vision-notebook-{sandbox.pk}" in sandbox.access


def test_the_estimate_says_capacity_is_free_for_every_replica(alice, fleet, catalog):
    page = alice.get(ESTIMATE, {**LLAMA_8B_ON_WHOLE_H100, "replicas": "2"}, **HTMX).content.decode()

    assert 'id="estimate-capacity"' in page
    assert "Capacity free now for all 2 replicas" in page


def test_the_estimate_says_it_will_queue_when_not_every_replica_fits(alice, fleet, catalog, whole_gpus):
    free = len(whole_gpus)
    page = alice.get(ESTIMATE, {**LLAMA_8B_ON_WHOLE_H100, "replicas": str(free + 1)}, **HTMX).content.decode()

    assert 'id="estimate-capacity"' in page, page
    assert f"Will queue until GPUs free up for all {free + 1} replicas" in page
