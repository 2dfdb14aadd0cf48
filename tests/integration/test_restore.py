"""Restore from an older backup, then converge: a real `pg_dump -Fc` of state A, more work done
(state B: a workload ended, new ones made), `pg_restore` of A, and the reconcile after restore
against the fake Kubernetes API server (which keeps B, as a real cluster would). B's objects are
reported as orphans and go only once an admin confirmed and the grace passed; A's workloads that
ended in B are re-created (time left) or failed saying why; a second reconcile changes nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from celery import current_app
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from portal.fleet.models import ClusterOrphan
from portal.fleet.orphans import orphan_confirm
from portal.workloads.models import Workload, WorkloadKind, WorkloadState
from portal.workloads.services import workload_terminate
from tests.fakekube import FakeKube
from tests.workers import conftest as on_kube
from workers.reconcile.drift import repair_drift
from workers.reconcile.orphans import reconcile_orphans
from workers.reconcile.workloads import reconcile_workload

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not shutil.which("pg_dump") or not shutil.which("pg_restore"), reason="no pg_dump"),
]
WHOLE = on_kube.WHOLE
fake_kube, kube_cluster = on_kube.fake_kube, on_kube.kube_cluster
request_on_kube, running_on_kube = on_kube.request_on_kube, on_kube.running_on_kube
S = WorkloadState


def pg(tool: str, *args: str) -> None:
    db = connection.settings_dict
    where = ["-h", db["HOST"] or "127.0.0.1", "-p", str(db["PORT"] or 5432), "-U", db["USER"] or "postgres"]
    env = {"PGPASSWORD": db["PASSWORD"] or ""}
    subprocess.run([tool, *where, *args], check=True, env={**os.environ, **env}, capture_output=True)


def dump(path: Path) -> None:
    pg("pg_dump", "-Fc", "-f", str(path), connection.settings_dict["NAME"])


def restore(path: Path) -> None:
    connection.close()  # pg_restore --clean drops the tables this connection holds
    pg(
        "pg_restore",
        "--clean",
        "--if-exists",
        "--no-owner",
        "-d",
        connection.settings_dict["NAME"],
        str(path),
    )


def namespaces(fake: FakeKube) -> set[str]:
    return {
        ns["metadata"]["name"] for ns in fake.list("Namespace") if ns["metadata"]["name"].startswith("sbx-")
    }


def test_a_restored_older_dump_converges_with_the_cluster(
    transactional_db, fake_kube, running_on_kube, researcher, admin_user, tmp_path, settings
):
    settings.PORTAL_ORPHAN_GRACE_MINUTES = 60
    current_app.conf.task_always_eager = True  # jobs run in-process: the restore is what is tested here
    # State A: three running sandboxes; one ends soon.
    kept = running_on_kube(**WHOLE)
    back = running_on_kube(**{**WHOLE, "name": "back"})
    soon = running_on_kube(**{**WHOLE, "name": "soon"})
    Workload.objects.filter(pk=soon.pk).update(expires_at=timezone.now() + timedelta(minutes=5))
    backup = tmp_path / "portal.dump"
    dump(backup)

    # State B: two of A's end; new sandboxes are made after the backup.
    for ended in (back, soon):
        workload_terminate(user=researcher, workload_id=ended.pk, kind=WorkloadKind.SANDBOX)
        reconcile_workload(ended.pk)
        assert Workload.objects.get(pk=ended.pk).state == S.TERMINATED
    later = running_on_kube(**{**WHOLE, "name": "later"})
    assert namespaces(fake_kube) == {kept.namespace, later.namespace}

    restore(backup)
    assert Workload.objects.get(pk=back.pk).state == S.RUNNING  # A's view again
    assert not Workload.objects.filter(pk=later.pk).exists()

    # Report only: says what differs, changes nothing.
    out = StringIO()
    call_command("cluster_reconcile", "--report", stdout=out)
    text = out.getvalue()
    assert f"orphan namespace {later.namespace}" in text
    assert f"lost sandbox {back.number}" in text and f"lost sandbox {soon.number}" in text
    assert not ClusterOrphan.objects.exists() and namespaces(fake_kube) == {kept.namespace, later.namespace}

    # Apply, ten minutes on: `back` has time left and comes back; `soon` has none and fails.
    now = timezone.now() + timedelta(minutes=10)
    drift = repair_drift(kube_cluster_id(kept), now=now)
    assert drift.repaired == [back.pk] and drift.failed == [soon.pk]
    failed = Workload.objects.get(pk=soon.pk)
    assert failed.message.startswith("Lost from the cluster") and "its time was up" in failed.message
    reconcile_workload(soon.pk)  # its ending runs through the normal path
    assert Workload.objects.get(pk=soon.pk).state == S.FAILED
    report = reconcile_orphans(kube_cluster_id(kept), now=now)
    assert report.new == [later.namespace]
    assert namespaces(fake_kube) == {kept.namespace, back.namespace, later.namespace}

    # New work after the restore never takes an id the cluster's objects carry.
    call_command("cluster_reconcile", "--apply", stdout=StringIO())
    fresh = running_on_kube(**{**WHOLE, "name": "fresh"})
    assert fresh.pk > later.pk

    # An admin confirms; the orphan goes once the grace has passed, not before.
    orphan = ClusterOrphan.objects.get(name=later.namespace)
    orphan_confirm(user=admin_user, orphan_id=orphan.pk, now=now)
    assert reconcile_orphans(kube_cluster_id(kept), now=now + timedelta(minutes=30)).removed == []
    assert reconcile_orphans(kube_cluster_id(kept), now=now + timedelta(minutes=61)).removed == [
        later.namespace
    ]
    assert namespaces(fake_kube) == {kept.namespace, back.namespace, fresh.namespace}

    # Converged: a second reconcile changes nothing.
    fake_kube.requests.clear()
    assert not repair_drift(kube_cluster_id(kept), now=now + timedelta(minutes=62)).changed
    assert not reconcile_orphans(kube_cluster_id(kept), now=now + timedelta(minutes=62)).changed
    assert [r for r in fake_kube.requests if r.verb in ("create", "update", "patch", "delete")] == []


def kube_cluster_id(workload: Workload) -> int:
    assert workload.cluster_id is not None
    return workload.cluster_id
