"""A request that ended before it was placed (withdrawn, rejected) says it never ran: its progress
line, its replicas and placement, its /home, its list row and its charts say what is true."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.approvals.services import approval_decide
from portal.deployments.services import deployment_request
from portal.fleet.models import Gpu
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Approval, WorkloadState
from portal.workloads.selectors import progress_steps
from portal.workloads.services import workload_withdraw
from tests.conftest import signed_in
from tests.rows import make_deployment, make_sandbox

pytestmark = pytest.mark.django_db


def four_gpus_for_two_days(researcher):
    return sandbox_request(
        user=researcher, team="vision", name="big", gpu_type="h100-80gb", count=4, ttl_hours=48
    )


def test_a_withdrawn_deployment_says_it_was_withdrawn_and_never_ran(
    researcher, researcher_client, fleet, run_jobs
):
    from portal.catalog.demo import catalog_seed

    catalog_seed()
    deployment = run_jobs(
        lambda: deployment_request(
            user=researcher,
            team="vision",
            name="big-llama",
            model="llama-3.1-8b-instruct",
            gpu_type="h100-80gb",
            count=1,
            replicas=3,
            ttl_hours=48,
        )
    )
    assert deployment.state == WorkloadState.PENDING_APPROVAL
    workload_withdraw(user=researcher, workload_id=deployment.pk, kind="deployment")
    deployment.refresh_from_db()

    assert [step.label for step in progress_steps(deployment, None)][-1] == "Withdrawn"
    page = researcher_client.get(reverse("deployment-detail", args=[deployment.number])).content.decode()
    assert '<li class="step step-done">Withdrawn</li>' in page
    assert "Terminated</li>" not in page
    assert '<span class="state state-terminated">withdrawn</span>' in page  # its badge says so too
    assert ">terminated</span>" not in page
    listed = researcher_client.get("/deployments/?scope=ended").content.decode()
    assert '<span class="state state-terminated">withdrawn</span>' in listed
    assert "GPUs given back" not in page and "never placed: it held no GPU" in page
    assert "3, ended" not in page and "3 asked for" in page


def test_a_rejected_sandbox_has_no_home_and_its_row_says_rejected(
    researcher, researcher_client, lead, fleet, run_jobs
):
    sandbox = four_gpus_for_two_days(researcher)
    approval = Approval.objects.get(workload=sandbox)
    run_jobs(lambda: approval_decide(user=lead, approval_id=approval.pk, approve=False, comment="too big"))
    sandbox.refresh_from_db()
    assert sandbox.state == WorkloadState.REJECTED

    page = researcher_client.get(reverse("sandbox-detail", args=[sandbox.number])).content.decode()
    assert "none: the sandbox never ran" in page and "scratch volume" not in page
    assert "never placed: it held no GPU" in page and "not placed yet" not in page
    row = researcher_client.get("/").content.decode().split(f'id="sandbox-row-{sandbox.pk}"')[1]
    row = row.split("</tr>")[0]
    assert "rejected just now" in row and "ended just now" not in row
    assert "$0.00" not in row and "—" in row


def test_a_sandbox_that_ran_still_shows_its_cost_and_scratch_volume_gone_with_it(
    researcher, researcher_client, team, fleet
):
    gpu = Gpu.objects.filter(node=fleet["whole"]).first()
    sandbox = make_sandbox(owner=researcher, team=team, gpu=gpu, state=WorkloadState.TERMINATED)
    row = researcher_client.get("/").content.decode().split(f'id="sandbox-row-{sandbox.pk}"')[1]
    assert "$" in row.split("</tr>")[0]
    page = researcher_client.get(reverse("sandbox-detail", args=[sandbox.number])).content.decode()
    assert "gone with the sandbox" in page


def test_the_charts_say_what_is_true_once_it_has_ended(researcher, team, fleet):
    from portal.catalog.demo import catalog_seed

    catalog_seed()
    gpu = Gpu.objects.filter(node=fleet["whole"]).first()
    ending = make_deployment(owner=researcher, team=team, gpu=gpu, state=WorkloadState.TERMINATING)
    page = signed_in(researcher).get(reverse("deployment-detail", args=[ending.number])).content.decode()
    assert "Nothing billed yet." not in page
    assert 'data-empty="Nothing was billed."' in page
    assert "they come every minute while it runs" not in page
    assert "No readings from its run." in page
