"""A sandbox's restart (a new pod on the same placement, its home claim kept), its events and
log tail, and its owner's kubeconfig, end to end over HTTP against the fake API server."""

from __future__ import annotations

import base64

import pytest
import yaml

from portal.audit.models import AuditEvent
from portal.core.errors import Conflict, NotAllowed, NotFound
from portal.sandboxes.models import KubeAccess
from portal.sandboxes.selectors import kubeconfig_text, sandbox_kube_access_for
from portal.sandboxes.services import sandbox_insight_request, sandbox_kube_access_request, sandbox_restart
from portal.workloads.models import Workload, WorkloadInsight, WorkloadState
from portal.workloads.services import workload_terminate
from tests.conftest import signed_in
from tests.factories import UserFactory
from tests.fakekube import FakeKube
from tests.workers.conftest import WHOLE
from workers.drivers.factory import get_driver
from workers.reconcile.workloads import reconcile_workload

pytestmark = pytest.mark.django_db


def test_a_restart_replaces_the_pod_on_the_same_node_and_keeps_the_home_claim(
    fake_kube: FakeKube, running_on_kube, researcher
):
    sandbox = running_on_kube(**WHOLE)
    namespace = sandbox.namespace
    pod_before = fake_kube.get("Pod", "sandbox-0", namespace)
    claim_before = fake_kube.get("PersistentVolumeClaim", "home", namespace)
    assert pod_before is not None and claim_before is not None

    sandbox_restart(user=researcher, sandbox_id=sandbox.pk)
    with pytest.raises(Conflict, match="already under way"):  # asked, not yet carried out
        sandbox_restart(user=researcher, sandbox_id=sandbox.pk)
    reconcile_workload(sandbox.pk)  # the worker replaces the pod
    pod_after = fake_kube.get("Pod", "sandbox-0", namespace)
    assert pod_after["metadata"]["uid"] != pod_before["metadata"]["uid"]  # a new pod
    assert pod_after["spec"]["affinity"] == pod_before["spec"]["affinity"]  # on the same node
    claim_after = fake_kube.get("PersistentVolumeClaim", "home", namespace)
    assert claim_after["metadata"]["uid"] == claim_before["metadata"]["uid"]  # the same home
    deletes = [r for r in fake_kube.requests if r.verb == "delete" and r.resource == "pods"]
    assert [(r.name, r.status) for r in deletes] == [("sandbox-0", 200)]

    reconcile_workload(sandbox.pk)  # the new pod is not ready yet: restarting, not degraded
    sandbox.refresh_from_db()
    assert sandbox.restarted_at == sandbox.restart_requested_at  # that request, carried out
    assert sandbox.state == WorkloadState.RUNNING and sandbox.degraded_since is None
    assert sandbox.message.startswith("Restarting: ")

    fake_kube.pod_running(namespace)
    reconcile_workload(sandbox.pk)
    sandbox.refresh_from_db()
    assert sandbox.message == "Running." and sandbox.degraded_since is None
    actions = list(AuditEvent.objects.filter(object_id=str(sandbox.pk)).values_list("action", flat=True))
    assert "sandbox.restart" in actions and "sandbox.restarted" in actions


def test_only_those_who_manage_a_running_sandbox_restart_it(
    run_jobs, running_on_kube, researcher, lead, other_researcher
):
    sandbox = running_on_kube(**WHOLE)
    with pytest.raises(NotFound):
        sandbox_restart(user=other_researcher, sandbox_id=sandbox.pk)
    run_jobs(lambda: sandbox_restart(user=lead, sandbox_id=sandbox.pk))  # a lead of the team may
    Workload.objects.filter(pk=sandbox.pk).update(state=WorkloadState.TERMINATED)
    with pytest.raises(Conflict, match="Only a running sandbox"):
        sandbox_restart(user=researcher, sandbox_id=sandbox.pk)
    sandbox.shared_with.add(other_researcher)  # sharing lets people in, not act on it
    with pytest.raises((NotFound, NotAllowed)):
        sandbox_restart(user=other_researcher, sandbox_id=sandbox.pk)


def test_events_and_the_end_of_the_log_are_read_when_asked(
    run_jobs, fake_kube: FakeKube, running_on_kube, researcher
):
    sandbox = running_on_kube(**WHOLE)
    fake_kube.set_pod_log(sandbox.namespace, "".join(f"step {n}\n" for n in range(250)))
    before = len(fake_kube.requests)
    insight = run_jobs(lambda: sandbox_insight_request(user=researcher, sandbox_id=sandbox.pk))
    insight = WorkloadInsight.objects.get(pk=insight.pk)
    assert not insight.pending and insight.error == ""
    lines = insight.log_tail.splitlines()
    assert len(lines) == 100 and lines[0] == "step 150" and lines[-1] == "step 249"
    assert any(event["reason"] == "SuccessfulCreate" for event in insight.events)
    assert all({"at", "type", "reason", "message", "object"} <= set(event) for event in insight.events)
    seen = {(r.resource, r.verb) for r in fake_kube.requests[before:]}
    assert seen == {("events", "list"), ("pods/log", "get")}  # two reads, nothing else


def test_a_failed_read_says_why_and_keeps_what_was_read_before(
    run_jobs, fake_kube: FakeKube, running_on_kube, researcher
):
    sandbox = running_on_kube(**WHOLE)
    fake_kube.set_pod_log(sandbox.namespace, "hello\n")
    run_jobs(lambda: sandbox_insight_request(user=researcher, sandbox_id=sandbox.pk))
    fake_kube.fail_next(403, method="GET", path_contains=f"/namespaces/{sandbox.namespace}/events")
    WorkloadInsight.objects.filter(workload=sandbox).update(requested_at=None)
    run_jobs(lambda: sandbox_insight_request(user=researcher, sandbox_id=sandbox.pk))
    insight = WorkloadInsight.objects.get(workload=sandbox)
    assert "may not list events" in insight.error
    assert insight.log_tail == "hello\n"  # the last good read stays


def test_a_kubeconfig_carries_a_token_of_the_sandboxs_account_that_dies_with_the_sandbox(
    run_jobs, fake_kube: FakeKube, running_on_kube, researcher, kube_cluster
):
    kube_cluster.user_api_url = "https://k8s.example.internal:6443"
    kube_cluster.user_ca_data = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    kube_cluster.save()
    get_driver.cache_clear()
    sandbox = running_on_kube(**WHOLE)  # 2 hours
    account = fake_kube.get("ServiceAccount", "sandbox-user", sandbox.namespace)
    assert account["automountServiceAccountToken"] is False
    binding = fake_kube.get("RoleBinding", "sandbox-kubectl", sandbox.namespace)
    assert binding["roleRef"]["name"] == "gpu-portal-sandbox-user"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "sandbox-user", "namespace": sandbox.namespace}
    ]

    access = run_jobs(lambda: sandbox_kube_access_request(user=researcher, sandbox_id=sandbox.pk))
    access = KubeAccess.objects.get(pk=access.pk)
    assert not access.pending and access.error == ""
    ((namespace, name, seconds),) = fake_kube.api.issued_tokens
    assert (namespace, name) == (sandbox.namespace, "sandbox-user") and 7000 < seconds <= 7200  # until expiry
    assert access.expires_at <= sandbox.expires_at
    text = kubeconfig_text(access, sandbox)
    config = yaml.safe_load(text)
    assert config["clusters"][0]["cluster"]["server"] == "https://k8s.example.internal:6443"
    ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
    assert ca == kube_cluster.user_ca_data
    assert config["users"][0]["user"]["token"].startswith(f"fake-token.{sandbox.namespace}.sandbox-user.")
    assert config["contexts"][0]["context"]["namespace"] == sandbox.namespace
    assert text.startswith("# GPU Portal: kubectl access to sandbox")

    with pytest.raises(NotAllowed, match="owner's alone"):
        sandbox_kube_access_request(user=UserFactory(is_staff=True, is_superuser=True), sandbox_id=sandbox.pk)
    run_jobs(lambda: workload_terminate(user=researcher, workload_id=sandbox.pk, kind="sandbox"))
    assert fake_kube.get("ServiceAccount", "sandbox-user", sandbox.namespace) is None  # the tokens are void
    assert not KubeAccess.objects.filter(workload=sandbox).exists()  # and forgotten
    get_driver.cache_clear()


@pytest.mark.parametrize(
    ("shut_out", "why"),
    [
        ("deactivated", "alice is deactivated"),
        ("removed from the team", "alice is no longer in team vision"),
    ],
)
def test_deactivating_the_owner_or_removing_them_from_the_team_voids_the_kubeconfig(
    run_jobs, fake_kube: FakeKube, running_on_kube, researcher, shut_out, why
):
    """The gate and the ssh keys shut for a deactivated user, or one no longer in the team; the
    kubeconfig's token would have opened a shell in the sandbox until it expired. The next watch
    makes the ServiceAccount anew (its tokens name the old one's uid) and forgets the kubeconfig,
    and the owner may not ask for another."""
    sandbox = running_on_kube(**WHOLE)
    run_jobs(lambda: sandbox_kube_access_request(user=researcher, sandbox_id=sandbox.pk))
    before = fake_kube.get("ServiceAccount", "sandbox-user", sandbox.namespace)["metadata"]["uid"]
    reconcile_workload(sandbox.pk)  # an active owner: nothing is voided
    assert KubeAccess.objects.filter(workload=sandbox).exists()
    assert fake_kube.get("ServiceAccount", "sandbox-user", sandbox.namespace)["metadata"]["uid"] == before

    if shut_out == "deactivated":
        researcher.is_active = False
        researcher.save()
    else:
        researcher.memberships.filter(team=sandbox.team).delete()
        with pytest.raises(NotAllowed, match="no longer a member of team Vision: kubectl access"):
            sandbox_kube_access_request(user=researcher, sandbox_id=sandbox.pk)
        # nor is the kubeconfig issued before handed out again, on the page, for download or in the API
        with pytest.raises(NotAllowed, match="no longer a member"):
            sandbox_kube_access_for(user=researcher, sandbox_id=sandbox.pk)
        download = signed_in(researcher).get(f"/sandboxes/{sandbox.number}/kubeconfig/")
        assert download.status_code == 403 and b"no longer a member" in download.content
    reconcile_workload(sandbox.pk)
    account = fake_kube.get("ServiceAccount", "sandbox-user", sandbox.namespace)
    assert account is not None and account["metadata"]["uid"] != before
    assert not KubeAccess.objects.filter(workload=sandbox).exists()
    event = AuditEvent.objects.get(action="sandbox.kubectl_revoked")
    assert event.detail == why and event.object_id == str(sandbox.pk)
    reconcile_workload(sandbox.pk)  # voided once: the account is not made anew at each watch
    assert (
        fake_kube.get("ServiceAccount", "sandbox-user", sandbox.namespace)["metadata"]["uid"]
        == (account["metadata"]["uid"])
    )
    assert Workload.objects.get(pk=sandbox.pk).state == WorkloadState.RUNNING  # the sandbox itself runs on


def test_a_kubeconfig_asked_for_before_the_owner_left_the_team_is_not_issued_after(
    fake_kube: FakeKube, running_on_kube, researcher
):
    from workers.reconcile.kube_access import issue_kube_access

    sandbox = running_on_kube(**WHOLE)
    access = sandbox_kube_access_request(user=researcher, sandbox_id=sandbox.pk)  # its job not run yet
    researcher.memberships.filter(team=sandbox.team).delete()
    issue_kube_access(access.pk)
    access = KubeAccess.objects.get(pk=access.pk)
    assert access.error == "kubectl access to a sandbox is for members of its team" and not access.token
    assert fake_kube.api.issued_tokens == []


def test_an_owner_removed_while_their_sandbox_crashes_is_shut_out_all_the_same(
    fake_kube: FakeKube, running_on_kube, researcher
):
    """A degraded sandbox (its pod crash-looping) is watched too: its owner's own binding goes
    and its kubeconfigs are voided once they leave the team, not when it next runs well."""
    researcher.cluster_identity = "alice@firm.example"
    researcher.save(update_fields=["cluster_identity"])
    from workers.reconcile.kube_access import issue_kube_access

    sandbox = running_on_kube(**WHOLE)
    issue_kube_access(sandbox_kube_access_request(user=researcher, sandbox_id=sandbox.pk).pk)
    reconcile_workload(sandbox.pk)
    assert fake_kube.get("RoleBinding", "sandbox-owner", sandbox.namespace) is not None
    fake_kube.pod_oom_killed(sandbox.namespace)
    researcher.memberships.filter(team=sandbox.team).delete()
    reconcile_workload(sandbox.pk)
    assert Workload.objects.get(pk=sandbox.pk).degraded_since is not None
    assert fake_kube.get("RoleBinding", "sandbox-owner", sandbox.namespace) is None
    assert not KubeAccess.objects.filter(workload=sandbox).exists()
