"""Orphans: objects the portal made on a cluster that its database does not know are recorded and
told to admins, removed only after an admin confirmed and the grace period passed, and home
volumes are only ever reported; lost workloads are re-created or failed saying why."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal.accounts.models import Notification
from portal.audit.models import AuditEvent
from portal.core.errors import Conflict, NotAllowed
from portal.fleet.models import ClusterOrphan
from portal.fleet.orphans import (
    OrphanSeen,
    orphan_confirm,
    orphan_keep,
    orphans_due,
    orphans_observed,
)
from portal.workloads.models import Workload, WorkloadState
from tests.factories import ClusterFactory
from tests.workers import conftest as on_kube
from tests.workers.test_drift import add_namespace, managed
from workers.celery import _schedule
from workers.drivers.base import DriverError
from workers.reconcile.clusters import driver_for
from workers.reconcile.drift import repair_drift
from workers.reconcile.orphans import reconcile_orphans

pytestmark = pytest.mark.django_db
WHOLE = on_kube.WHOLE
# The worker tests' fixtures: the fake API server, a cluster row on it, sandboxes placed there.
fake_kube, kube_cluster = on_kube.fake_kube, on_kube.kube_cluster
request_on_kube, running_on_kube = on_kube.request_on_kube, on_kube.running_on_kube
Kind = ClusterOrphan.Kind
NS = OrphanSeen(kind=Kind.NAMESPACE, name="sbx-vision-later-41", reason="names sandbox 41", workload_id=41)
HOME = OrphanSeen(kind=Kind.HOME_VOLUME, name="pv-home-bob", reason="no home uses it")


# --- the records ----------------------------------------------------------------------------------


def test_a_new_orphan_is_recorded_audited_and_told_to_every_admin(admin_user, researcher):
    cluster = ClusterFactory()
    new = orphans_observed(cluster_id=cluster.pk, seen=[NS, HOME])
    assert [o.name for o in new] == [NS.name, HOME.name]
    assert ClusterOrphan.objects.filter(removed_at__isnull=True).count() == 2
    assert AuditEvent.objects.filter(action="cluster.orphan_found").count() == 2
    note = Notification.objects.get(user=admin_user)
    assert "2 object(s) the portal's database does not know" in note.message and NS.name in note.message
    assert not Notification.objects.filter(user=researcher).exists()


def test_looking_again_records_nothing_new_and_closes_what_went(admin_user):
    cluster = ClusterFactory()
    orphans_observed(cluster_id=cluster.pk, seen=[NS, HOME])
    later = timezone.now() + timedelta(minutes=5)
    assert orphans_observed(cluster_id=cluster.pk, seen=[NS], now=later) == []
    kept = ClusterOrphan.objects.get(name=NS.name)
    assert kept.removed_at is None and kept.last_seen == later
    went = ClusterOrphan.objects.get(name=HOME.name)
    assert went.removed_at == later and went.outcome == ClusterOrphan.Outcome.GONE
    assert Notification.objects.filter(user=admin_user).count() == 1


def test_only_admins_confirm_and_never_a_home_volume(admin_user, researcher):
    cluster = ClusterFactory()
    orphans_observed(cluster_id=cluster.pk, seen=[NS, HOME])
    namespace, home = ClusterOrphan.objects.get(name=NS.name), ClusterOrphan.objects.get(name=HOME.name)
    with pytest.raises(NotAllowed):
        orphan_confirm(user=researcher, orphan_id=namespace.pk)
    with pytest.raises(Conflict, match="home volume"):
        orphan_confirm(user=admin_user, orphan_id=home.pk)
    assert ClusterOrphan.objects.filter(confirmed_at__isnull=False).count() == 0


def test_a_confirmed_orphan_is_due_only_after_the_grace_period(admin_user, settings):
    settings.PORTAL_ORPHAN_GRACE_MINUTES = 60
    cluster = ClusterFactory()
    orphans_observed(cluster_id=cluster.pk, seen=[NS])
    orphan = ClusterOrphan.objects.get()
    now = timezone.now()
    assert orphans_due(cluster_id=cluster.pk, now=now + timedelta(days=1)) == []  # not confirmed
    orphan_confirm(user=admin_user, orphan_id=orphan.pk, now=now)
    orphan_confirm(user=admin_user, orphan_id=orphan.pk, now=now + timedelta(minutes=30))  # clock stands
    assert orphans_due(cluster_id=cluster.pk, now=now + timedelta(minutes=59)) == []
    assert orphans_due(cluster_id=cluster.pk, now=now + timedelta(minutes=60)) == [orphan]
    assert AuditEvent.objects.filter(action="cluster.orphan_confirmed", actor=admin_user).count() == 1


def test_keeping_withdraws_the_confirmation(admin_user):
    cluster = ClusterFactory()
    orphans_observed(cluster_id=cluster.pk, seen=[NS])
    orphan = ClusterOrphan.objects.get()
    now = timezone.now()
    orphan_confirm(user=admin_user, orphan_id=orphan.pk, now=now)
    orphan_keep(user=admin_user, orphan_id=orphan.pk)
    assert orphans_due(cluster_id=cluster.pk, now=now + timedelta(days=1)) == []
    assert AuditEvent.objects.filter(action="cluster.orphan_confirmation_withdrawn").exists()


def test_beat_looks_for_orphans_on_the_drift_interval():
    assert _schedule()["reconcile-orphans"] == {"task": "fleet.reconcile_orphans_all", "schedule": 120.0}


# --- against the fake Kubernetes API server -------------------------------------------------------


def test_an_unknown_namespace_is_reported_and_removed_only_after_confirmation_and_grace(
    fake_kube, request_on_kube, admin_user, settings
):
    settings.PORTAL_ORPHAN_GRACE_MINUTES = 60
    lost = request_on_kube(**WHOLE)
    request_on_kube(**{**WHOLE, "name": "kept"})
    Workload.objects.filter(pk=lost.pk).delete()  # its row is gone, its namespace stays

    assert repair_drift(lost.cluster_id).unknown == [lost.namespace]  # drift repair leaves it alone
    now = timezone.now()
    report = reconcile_orphans(lost.cluster_id, now=now)
    assert report.new == [lost.namespace] and report.removed == []
    orphan = ClusterOrphan.objects.get(name=lost.namespace)
    assert f"names sandbox {lost.pk}, which the database does not know" in orphan.reason
    assert reconcile_orphans(lost.cluster_id, now=now + timedelta(days=1)).removed == []  # unconfirmed
    assert fake_kube.get("Namespace", lost.namespace) is not None

    orphan_confirm(user=admin_user, orphan_id=orphan.pk, now=now)
    assert reconcile_orphans(lost.cluster_id, now=now + timedelta(minutes=59)).removed == []
    assert fake_kube.get("Namespace", lost.namespace) is not None
    assert reconcile_orphans(lost.cluster_id, now=now + timedelta(minutes=61)).removed == [lost.namespace]
    assert fake_kube.get("Namespace", lost.namespace) is None
    orphan.refresh_from_db()
    assert orphan.outcome == ClusterOrphan.Outcome.REMOVED
    assert AuditEvent.objects.filter(action="cluster.orphan_removed", object_id=str(orphan.pk)).exists()

    again = reconcile_orphans(lost.cluster_id, now=now + timedelta(minutes=62))
    assert not again.changed and again.orphans == []


def test_a_namespace_carrying_an_id_issued_again_is_an_orphan_not_deleted(fake_kube, request_on_kube):
    sandbox = request_on_kube(**WHOLE)
    other = f"sbx-vision-before-restore-{sandbox.pk}"
    add_namespace(fake_kube, other, managed(str(sandbox.pk)))
    assert repair_drift(sandbox.cluster_id).orphans_deleted == []
    report = reconcile_orphans(sandbox.cluster_id)
    assert report.new == [other]
    assert "ids are issued again after a restore" in report.orphans[0].reason
    assert fake_kube.get("Namespace", other) is not None


def test_a_home_volume_no_home_uses_is_reported_and_never_removed(fake_kube, kube_cluster, admin_user):
    driver = driver_for(kube_cluster)
    driver.api.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": "pv-home-bob",
                "labels": {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal/home-of": "bob"},
            },
            "spec": {
                "capacity": {"storage": "10Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "nfs": {"server": "nfs.example", "path": "/homes/bob"},
            },
        }
    )
    report = reconcile_orphans(kube_cluster.pk)
    assert report.new == ["pv-home-bob"]
    orphan = ClusterOrphan.objects.get(name="pv-home-bob")
    assert orphan.kind == Kind.HOME_VOLUME and "may hold their files" in orphan.reason
    with pytest.raises(Conflict):
        orphan_confirm(user=admin_user, orphan_id=orphan.pk)
    ClusterOrphan.objects.filter(pk=orphan.pk).update(confirmed_at=timezone.now() - timedelta(days=2))
    assert reconcile_orphans(kube_cluster.pk).removed == []  # even confirmed behind the portal's back
    assert fake_kube.get("PersistentVolume", "pv-home-bob") is not None


def test_a_failing_cluster_is_reported_and_closes_nothing(fake_kube, kube_cluster):
    orphans_observed(cluster_id=kube_cluster.pk, seen=[NS])
    fake_kube.fail_next(500, method="GET", path_contains="/api/v1/namespaces")
    report = reconcile_orphans(kube_cluster.pk)
    assert report.errors and report.errors[0].startswith("listing the portal's objects")
    assert ClusterOrphan.objects.get().removed_at is None


# --- lost workloads -------------------------------------------------------------------------------


def test_a_running_workload_lost_with_no_time_left_fails_saying_why(fake_kube, running_on_kube):
    sandbox = running_on_kube(**WHOLE)
    driver_for(sandbox.cluster).api.delete("Namespace", sandbox.namespace)
    Workload.objects.filter(pk=sandbox.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    report = repair_drift(sandbox.cluster_id)
    assert report.failed == [sandbox.pk] and report.repaired == []
    row = Workload.objects.get(pk=sandbox.pk)
    assert row.state in (WorkloadState.TERMINATING, WorkloadState.FAILED)
    assert row.message.startswith("Lost from the cluster") and "its time was up" in row.message


def test_a_lost_workload_the_cluster_refuses_for_good_fails_saying_why(
    fake_kube, running_on_kube, monkeypatch
):
    sandbox = running_on_kube(**WHOLE)
    driver = driver_for(sandbox.cluster)
    driver.api.delete("Namespace", sandbox.namespace)

    def refuse(spec):
        raise DriverError("the home volume pv-home-alice is gone from the cluster", retryable=False)

    monkeypatch.setattr(type(driver), "apply_workload", lambda self, spec: refuse(spec))
    report = repair_drift(sandbox.cluster_id)
    assert report.failed == [sandbox.pk]
    assert "the home volume pv-home-alice is gone" in Workload.objects.get(pk=sandbox.pk).message


# --- the fleet page -------------------------------------------------------------------------------


def test_the_fleet_page_lists_orphans_with_remove_and_home_volumes_as_reported_only(admin_client, fleet):
    cluster = ClusterFactory(name="gpu")
    orphans_observed(cluster_id=cluster.pk, seen=[NS, HOME])
    page = admin_client.get("/fleet/").content.decode()
    section = page.split('id="orphans"')[1]
    assert NS.name in section and HOME.name in section
    namespace = ClusterOrphan.objects.get(name=NS.name)
    assert f'action="/fleet/orphans/{namespace.pk}/remove/"' in section
    home = ClusterOrphan.objects.get(name=HOME.name)
    assert f"/fleet/orphans/{home.pk}/remove/" not in section
    assert "reported only: may hold a user's files" in section


def test_remove_on_the_fleet_page_confirms_and_keep_withdraws(admin_client, admin_user, fleet):
    cluster = ClusterFactory(name="gpu")
    orphans_observed(cluster_id=cluster.pk, seen=[NS])
    orphan = ClusterOrphan.objects.get()
    response = admin_client.post(f"/fleet/orphans/{orphan.pk}/remove/")
    assert response.status_code == 302 and response["Location"] == "/fleet/#orphans"
    orphan.refresh_from_db()
    assert orphan.confirmed_by == admin_user
    assert "removed after" in admin_client.get("/fleet/").content.decode().split('id="orphans"')[1]
    admin_client.post(f"/fleet/orphans/{orphan.pk}/keep/")
    orphan.refresh_from_db()
    assert orphan.confirmed_at is None


def test_a_researcher_cannot_confirm_a_removal(researcher_client, fleet):
    cluster = ClusterFactory(name="gpu")
    orphans_observed(cluster_id=cluster.pk, seen=[NS])
    researcher_client.post(f"/fleet/orphans/{ClusterOrphan.objects.get().pk}/remove/")
    assert ClusterOrphan.objects.get().confirmed_at is None


def test_the_orphan_section_queries_stay_bounded(admin_client, admin_user, fleet):
    cluster = ClusterFactory(name="gpu")
    orphans_observed(cluster_id=cluster.pk, seen=[NS])
    with CaptureQueriesContext(connection) as one:
        admin_client.get("/fleet/")
    many = [
        OrphanSeen(kind=Kind.NAMESPACE, name=f"sbx-x-{index}", reason="unknown", workload_id=index)
        for index in range(8)
    ]
    orphans_observed(cluster_id=cluster.pk, seen=[NS, *many])
    for orphan in ClusterOrphan.objects.all()[:4]:
        orphan_confirm(user=admin_user, orphan_id=orphan.pk)
    with CaptureQueriesContext(connection) as nine:
        admin_client.get("/fleet/")
    assert len(nine) == len(one)
