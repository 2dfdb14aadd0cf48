"""Deployments share the sandboxes' quota, approval, placement, metering and audit path."""

from __future__ import annotations

from decimal import Decimal

import pytest

from portal.approvals.services import approval_decide
from portal.audit.models import AuditEvent
from portal.core.errors import Conflict, QuotaExceeded, ValidationFailed
from portal.deployments.models import Serving
from portal.deployments.services import deployment_request, deployment_scale
from portal.fleet.models import Allocation, SimulatedObject
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Approval, Workload, WorkloadKind, WorkloadState
from portal.workloads.selectors import workloads_visible_to
from portal.workloads.services import workload_terminate
from workers.drivers.factory import get_driver
from workers.reconcile.clusters import cluster_config
from workers.reconcile.drift import repair_drift

pytestmark = pytest.mark.django_db
S = WorkloadState


def deploy(user, **fields):
    return deployment_request(
        user=user, **{"team": "vision", "name": "llama8b", "model": "llama-3.1-8b-instruct", **fields}
    )


def test_deploy_defaults_to_the_cheapest_fit_and_runs_with_an_endpoint(run_jobs, fleet, catalog, researcher):
    workload = run_jobs(lambda: deploy(researcher))
    workload.refresh_from_db()
    assert workload.kind == "deployment"
    assert workload.state == S.RUNNING
    assert workload.mig_profile == "3g.40gb"  # 27.76 GB fits a 3g.40gb slice, the cheapest fit
    assert workload.access.startswith("https://dep-vision-llama8b-")
    serving = Serving.objects.get(workload=workload)
    assert serving.command[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
    assert serving.ready_replicas == 1
    allocation = Allocation.objects.get(workload=workload)
    assert (allocation.share_numerator, allocation.share_denominator) == (3, 7)
    assert AuditEvent.objects.filter(object_type="deployment", action="deployment.running").exists()
    # the model cache fits the bf16 checkpoint: 8.03B x 2 bytes, plus 10 %, plus 10 GB
    assert workload.storage_gb == 28


def test_deploy_on_one_whole_h100_is_approved_by_policy(run_jobs, fleet, catalog, researcher):
    workload = run_jobs(lambda: deploy(researcher, gpu_type="h100-80gb", count=1))
    workload.refresh_from_db()
    assert workload.state == S.RUNNING and workload.gpu_count == 1 and workload.mig_profile == ""
    kinds = {obj.kind for obj in SimulatedObject.objects.filter(namespace=workload.namespace)}
    assert {"Deployment", "Service", "ResourceQuota"} <= kinds


def test_more_gpus_than_the_model_needs_are_given_as_asked_when_they_split_it_evenly(
    fleet, catalog, researcher
):
    workload = deploy(researcher, gpu_type="h100-80gb", count=2)  # fits one; two split its heads
    assert workload.gpu_count == 2 and workload.mig_profile == ""


def test_a_gpu_the_model_does_not_fit_is_refused_with_what_it_needs(fleet, catalog, researcher):
    with pytest.raises(ValidationFailed) as refused:
        deploy(researcher, name="big", model="llama-3.1-70b-instruct", gpu_type="h100-80gb", count=2)
    assert refused.value.fields["gpu.count"] == [
        "Llama 3.1 70B Instruct needs at least 4 h100-80gb GPUs at these settings."
    ]
    assert not Workload.objects.exists()


def test_unknown_model_and_bad_sizing_inputs_name_the_field(fleet, catalog, researcher):
    with pytest.raises(ValidationFailed) as unknown:
        deploy(researcher, model="gpt-5")
    assert "model" in unknown.value.fields
    with pytest.raises(ValidationFailed) as bad:
        deploy(researcher, dtype="int3", context=0)
    assert {"dtype", "context"} <= set(bad.value.fields)


def test_several_replicas_of_whole_gpus_wait_for_a_lead_then_each_is_placed(
    run_jobs, fleet, catalog, researcher, lead
):
    workload = deploy(researcher, gpu_type="h100-80gb", count=1, replicas=2)
    assert workload.state == S.PENDING_APPROVAL
    approval = Approval.objects.get(workload=workload)
    assert "more than 1 whole GPU" in approval.why_needed
    run_jobs(lambda: approval_decide(user=lead, approval_id=approval.pk, approve=True))
    workload.refresh_from_db()
    assert workload.state == S.RUNNING
    assert sorted(Allocation.objects.filter(workload=workload).values_list("replica", flat=True)) == [0, 1]
    assert Serving.objects.get(workload=workload).ready_replicas == 2


def test_quota_counts_sandboxes_and_deployments_together(fleet, catalog, team, researcher):
    team.quota_gpus = Decimal(1)
    team.save()
    sandbox_request(user=researcher, team="vision", name="box", gpu_type="h100-80gb", count=1, ttl_hours=1)
    with pytest.raises(QuotaExceeded):
        deploy(researcher, gpu_type="h100-80gb", count=1)


def test_scaling_up_beyond_policy_needs_a_lead_and_down_releases_at_once(
    run_jobs, fleet, catalog, researcher, lead
):
    workload = run_jobs(lambda: deploy(researcher))
    run_jobs(lambda: deployment_scale(user=researcher, deployment_id=workload.pk, replicas=2))
    workload.refresh_from_db()
    assert workload.replicas == 1
    approval = Approval.objects.get(workload=workload, kind=Approval.Kind.SCALE)
    assert approval.replicas == 2 and "more than one MIG slice" in approval.why_needed

    run_jobs(lambda: approval_decide(user=lead, approval_id=approval.pk, approve=True))
    workload.refresh_from_db()
    assert workload.replicas == 2 and workload.state == S.RUNNING
    assert Allocation.objects.filter(workload=workload, released_at__isnull=True).count() == 2

    run_jobs(lambda: deployment_scale(user=researcher, deployment_id=workload.pk, replicas=1))
    workload.refresh_from_db()
    assert workload.replicas == 1 and workload.state == S.RUNNING
    released = Allocation.objects.get(workload=workload, replica=1)
    assert released.ended_at is not None and released.released_at is not None
    assert SimulatedObject.objects.filter(kind="Deployment", namespace=workload.namespace).count() == 1


def test_scaling_needs_a_live_deployment_and_a_sane_count(run_jobs, fleet, catalog, researcher):
    workload = run_jobs(lambda: deploy(researcher))
    for bad in (-1, 17, "2", True, None):
        with pytest.raises(ValidationFailed):
            deployment_scale(user=researcher, deployment_id=workload.pk, replicas=bad)
    run_jobs(lambda: workload_terminate(user=researcher, workload_id=workload.pk, kind="deployment"))
    assert Workload.objects.get(pk=workload.pk).state == S.TERMINATED
    with pytest.raises(Conflict):
        deployment_scale(user=researcher, deployment_id=workload.pk, replicas=2)


def test_deployments_are_not_listed_as_sandboxes(run_jobs, fleet, catalog, researcher):
    workload = run_jobs(lambda: deploy(researcher))
    assert not workloads_visible_to(researcher, kind=WorkloadKind.SANDBOX).filter(pk=workload.pk).exists()
    assert workloads_visible_to(researcher, kind="deployment").filter(pk=workload.pk).exists()


def test_scaling_down_stops_billing_at_once_but_frees_the_gpu_only_after_teardown(
    run_jobs, fleet, catalog, researcher, lead
):
    workload = run_jobs(lambda: deploy(researcher, gpu_type="h100-80gb", count=1, replicas=2))
    approval = Approval.objects.get(workload=workload)
    run_jobs(lambda: approval_decide(user=lead, approval_id=approval.pk, approve=True))

    deployment_scale(user=researcher, deployment_id=workload.pk, replicas=1)  # its reconcile has not run
    scaled_away = Allocation.objects.get(workload=workload, replica=1)
    assert scaled_away.ended_at is not None
    assert scaled_away.released_at is None  # the pod may still be on the GPU

    from workers.reconcile.workloads import reconcile_workload

    reconcile_workload(workload.pk)
    scaled_away.refresh_from_db()
    assert scaled_away.released_at is not None


def test_scaling_down_then_up_before_the_reconciler_runs_frees_the_old_replica(
    run_jobs, fleet, catalog, team, researcher, lead
):
    workload = run_jobs(lambda: deploy(researcher, gpu_type="h100-80gb", count=1, replicas=2))
    run_jobs(
        lambda: approval_decide(
            user=lead, approval_id=Approval.objects.get(workload=workload).pk, approve=True
        )
    )
    deployment_scale(user=lead, deployment_id=workload.pk, replicas=1)  # no reconcile yet
    deployment_scale(user=lead, deployment_id=workload.pk, replicas=2)

    from workers.reconcile.workloads import reconcile_workload

    reconcile_workload(workload.pk)
    live = Allocation.objects.filter(workload=workload, released_at__isnull=True)
    assert live.count() == 2
    assert sorted(live.values_list("replica", flat=True)) == [0, 1]


def test_approving_a_scale_request_checks_the_quota_again(run_jobs, fleet, catalog, team, researcher, lead):
    workload = run_jobs(lambda: deploy(researcher))  # a 3g slice: 3/7
    deployment_scale(user=researcher, deployment_id=workload.pk, replicas=3)  # needs a lead
    team.quota_gpus = Decimal("0.5")  # room for one slice now, not three
    team.save()
    approval = Approval.objects.get(workload=workload, kind=Approval.Kind.SCALE)
    with pytest.raises(QuotaExceeded):
        approval_decide(user=lead, approval_id=approval.pk, approve=True)
    assert Approval.objects.get(pk=approval.pk).state == Approval.State.PENDING
    assert Workload.objects.get(pk=workload.pk).replicas == 1


def test_a_scale_waiting_for_a_lead_is_withdrawn_or_made_moot_by_scaling_at_once(
    run_jobs, fleet, catalog, team, researcher, lead, django_capture_on_commit_callbacks
):
    from portal.workloads.selectors import workload_allowed_actions
    from portal.workloads.services import workload_scale_withdraw

    workload = run_jobs(lambda: deploy(researcher))  # a 3g slice
    assert "withdraw_scale" not in workload_allowed_actions(Workload.objects.get(pk=workload.pk))
    with pytest.raises(Conflict, match="No scale of deployment"):
        workload_scale_withdraw(user=researcher, workload_id=workload.pk)
    with django_capture_on_commit_callbacks(execute=True):
        deployment_scale(user=researcher, deployment_id=workload.pk, replicas=3)  # needs a lead
    waiting = Approval.objects.get(workload=workload, kind=Approval.Kind.SCALE)
    assert "withdraw_scale" in workload_allowed_actions(Workload.objects.get(pk=workload.pk))
    from django.core import mail

    assert f"alice asks to scale deployment {workload.name} (team Vision): your approval" in [
        m.subject for m in mail.outbox
    ]  # whose ask, for what: several in an inbox tell apart

    workload_scale_withdraw(user=researcher, workload_id=workload.pk)
    waiting.refresh_from_db()
    assert (waiting.state, waiting.comment) == (Approval.State.CANCELLED, "Withdrawn by the requester.")
    assert AuditEvent.objects.get(action="deployment.scale_withdrawn").detail == "to 3 replicas withdrawn"
    assert Workload.objects.get(pk=workload.pk).replicas == 1

    # scaled to zero while a scale up waits: approving it later must not start billing again
    deployment_scale(user=researcher, deployment_id=workload.pk, replicas=3)
    waiting = Approval.objects.get(workload=workload, kind=Approval.Kind.SCALE, state=Approval.State.PENDING)
    deployment_scale(user=researcher, deployment_id=workload.pk, replicas=0)
    waiting.refresh_from_db()
    assert waiting.state == Approval.State.CANCELLED
    assert waiting.comment == "Withdrawn: the deployment was scaled to 0 instead."
    with pytest.raises(Conflict):
        approval_decide(user=lead, approval_id=waiting.pk, approve=True)
    assert Workload.objects.get(pk=workload.pk).replicas == 0
    assert not Allocation.objects.filter(workload=workload, ended_at__isnull=True).exists()


def test_scaling_up_within_policy_or_to_the_replicas_it_has_withdraws_a_waiting_scale(
    run_jobs, fleet, catalog, team, researcher
):
    team.auto_approve_max_gpus = 2
    team.save()
    workload = run_jobs(lambda: deploy(researcher, gpu_type="h100-80gb", count=1))  # a whole GPU a replica
    for direct in (2, 1):  # 2: up within policy, placed at once; then 1: down
        deployment_scale(user=researcher, deployment_id=workload.pk, replicas=3)  # beyond policy
        waiting = Approval.objects.get(
            workload=workload, kind=Approval.Kind.SCALE, state=Approval.State.PENDING
        )
        run_jobs(lambda: deployment_scale(user=researcher, deployment_id=workload.pk, replicas=direct))  # noqa: B023
        waiting.refresh_from_db()
        assert waiting.state == Approval.State.CANCELLED, direct
        assert waiting.comment == f"Withdrawn: the deployment was scaled to {direct} instead."
    deployment_scale(user=researcher, deployment_id=workload.pk, replicas=3)
    waiting = Approval.objects.get(workload=workload, kind=Approval.Kind.SCALE, state=Approval.State.PENDING)
    deployment_scale(user=researcher, deployment_id=workload.pk, replicas=1)  # the replicas it has
    waiting.refresh_from_db()
    assert waiting.state == Approval.State.CANCELLED
    assert Workload.objects.get(pk=workload.pk).replicas == 1


@pytest.mark.django_db(transaction=True)
def test_withdrawing_a_scale_outside_a_test_transaction_works(run_jobs, fleet, catalog, team, researcher):
    """As a request runs it (no transaction around it): the row lock needs the service's own."""
    from tests.conftest import token_client

    workload = run_jobs(lambda: deploy(researcher))
    deployment_scale(user=researcher, deployment_id=workload.pk, replicas=3)
    api = token_client(researcher, "workloads")
    response = api.post(f"/api/v1/deployments/{workload.number}/scale/withdraw", format="json")
    assert response.status_code == 200, response.content
    assert not Approval.objects.filter(state=Approval.State.PENDING).exists()


def test_a_deployment_whose_objects_went_missing_is_applied_again_and_audited_as_a_deployment(
    run_jobs, fleet, catalog, researcher
):
    workload = Workload.objects.get(pk=run_jobs(lambda: deploy(researcher)).pk)
    assert workload.state == "running"
    get_driver(cluster_config(workload.cluster)).store.delete_namespace(
        workload.namespace
    )  # kubectl delete ns

    report = repair_drift(workload.cluster_id)

    assert report.repaired == [workload.pk]
    event = AuditEvent.objects.get(action="deployment.drift_repaired")
    assert (event.object_type, event.object_id) == ("deployment", str(workload.pk))
