"""The orphan reconcile: what the portal made on a cluster (found by its labels) that the database
does not know, as after a restore from an older backup.

Orphans are a namespace naming a workload id the database has no row for (or whose row has
another namespace: ids are issued again after a restore), a read-only dataset volume copy of a
workload that is unknown or ended, and a home volume no home in the database uses. They are
recorded and told to admins; a confirmed one is removed once its grace period has passed; home
volumes (users' files) are only ever reported. Lost workloads (known to the database, gone from
the cluster) are drift repair's (workers/reconcile/drift.py): re-created, or failed saying why.
Running it twice changes nothing the second time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection
from django.utils import timezone

from portal.fleet.models import Cluster, ClusterOrphan
from portal.fleet.orphans import OrphanSeen, orphan_removed, orphans_due, orphans_observed
from portal.sandboxes.models import Home
from portal.workloads.models import END_STATES, Workload, WorkloadState
from workers.drivers.base import ClusterDriver, DriverError, ManagedNamespace, ManagedVolume
from workers.reconcile.clusters import driver_for
from workers.reconcile.drift import ROW_KINDS, namespace_only_spec, owns_namespace

log = logging.getLogger(__name__)
Kind = ClusterOrphan.Kind
LIVE = (WorkloadState.PROVISIONING, WorkloadState.RUNNING)


@dataclass
class OrphanReport:
    cluster: str
    orphans: list[OrphanSeen] = field(default_factory=list)  # what the database does not know
    new: list[str] = field(default_factory=list)  # recorded (and told to admins) on this run
    removed: list[str] = field(default_factory=list)  # confirmed, past their grace, removed now
    lost: list[str] = field(default_factory=list)  # live in the database, absent from the cluster
    highest_id: int = 0  # the highest workload id the portal's labels on the cluster name
    errors: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.new or self.removed)


def find_orphans(
    cluster: Cluster, namespaces: list[ManagedNamespace], volumes: list[ManagedVolume]
) -> list[OrphanSeen]:
    """The labelled objects of one look at the cluster that the database does not know."""
    ids = {ns.workload_id for ns in namespaces if ns.workload_id is not None}
    ids |= {volume.workload_id for volume in volumes if volume.workload_id is not None}
    workloads = {w.pk: w for w in Workload.objects.select_related("team").filter(pk__in=ids)}
    homes = set(
        Home.objects.filter(cluster=cluster)
        .exclude(state=Home.State.DELETED)
        .exclude(volume_name="")
        .values_list("volume_name", flat=True)
    )
    found: list[OrphanSeen] = []
    for namespace in namespaces:
        if namespace.kind not in ROW_KINDS or namespace.workload_id is None:
            continue  # not made by the portal's workload path
        workload = workloads.get(namespace.workload_id)
        if workload is None:
            why = f"names {namespace.kind} {namespace.workload_id}, which the database does not know"
        elif not owns_namespace(workload, namespace.name):
            why = (
                f"names {namespace.kind} {namespace.workload_id}, but that id is now "
                f"{workload.kind} {workload.name} (ids are issued again after a restore)"
            )
        else:
            continue  # known: ended ones are drift repair's to delete
        found.append(
            OrphanSeen(
                kind=Kind.NAMESPACE, name=namespace.name, reason=why, workload_id=namespace.workload_id
            )
        )
    for volume in volumes:
        if volume.home_owner:
            if volume.name not in homes:
                why = f"a home volume (of {volume.home_owner}) no home in the database uses; it may hold their files"
                found.append(OrphanSeen(kind=Kind.HOME_VOLUME, name=volume.name, reason=why))
            continue
        if volume.workload_id is None:
            continue
        workload = workloads.get(volume.workload_id)
        claim_namespace = volume.claim.partition("/")[0]
        if workload is None:
            why = f"a dataset volume copy for workload {volume.workload_id}, which the database does not know"
        elif workload.state in END_STATES:
            why = f"a dataset volume copy for {workload.kind} {workload.number}, which is {workload.state}"
        elif claim_namespace and not owns_namespace(workload, claim_namespace):
            why = f"a dataset volume copy for {claim_namespace}, not {workload.kind} {workload.number}'s namespace"
        else:
            continue
        found.append(
            OrphanSeen(kind=Kind.VOLUME, name=volume.name, reason=why[:300], workload_id=volume.workload_id)
        )
    return found


def lost_workloads(cluster: Cluster, namespaces: list[ManagedNamespace]) -> list[str]:
    """Workloads the database holds as running or provisioning here whose namespace the cluster
    does not have (drift repair re-creates them, or fails them saying why)."""
    present = {ns.name for ns in namespaces}
    lost = []
    for workload in (
        Workload.objects.select_related("team").filter(cluster=cluster, state__in=LIVE).order_by("pk")
    ):
        name = workload.namespace or ""
        if name and name not in present:
            lost.append(f"{workload.kind} {workload.number} ({workload.state}, namespace {name})")
    return lost


def reconcile_orphans(
    cluster_id: int, *, apply: bool = True, now: datetime | None = None
) -> OrphanReport | None:
    """One look at the cluster. With `apply`, record what it shows and remove confirmed orphans
    whose grace has passed; without, only say what it found (nothing is written anywhere).
    None for an unknown cluster; a failing cluster is noted in the report, never raised."""
    now = now or timezone.now()
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return None
    report = OrphanReport(cluster=cluster.name)
    try:
        driver = driver_for(cluster)
        namespaces = driver.managed_namespaces()
        volumes = driver.managed_volumes()
    except DriverError as error:
        report.errors.append(f"listing the portal's objects: {error.message}")
        log.warning("orphan reconcile on cluster %s: %s", cluster.name, error.message)
        return report
    report.orphans = find_orphans(cluster, namespaces, volumes)
    named = [item.workload_id for item in (*namespaces, *volumes) if item.workload_id is not None]
    report.highest_id = max(named, default=0)
    report.lost = lost_workloads(cluster, namespaces)
    if not apply:
        return report
    seen = {(item.kind, item.name) for item in report.orphans}
    for orphan in orphans_due(cluster_id=cluster.pk, now=now):
        _remove(driver, orphan, (orphan.kind, orphan.name) in seen, report, now)
    still = [item for item in report.orphans if item.name not in report.removed]
    report.new = [orphan.name for orphan in orphans_observed(cluster_id=cluster.pk, seen=still, now=now)]
    if report.changed or report.errors:
        log.info(
            "orphan reconcile on cluster %s: new %s, removed %s, errors %s",
            cluster.name,
            report.new,
            report.removed,
            report.errors,
        )
    return report


def _remove(
    driver: ClusterDriver, orphan: ClusterOrphan, present: bool, report: OrphanReport, now: datetime
) -> None:
    """Remove one confirmed orphan, if it is still one (a workload may have claimed it since)."""
    if not present:  # gone already (deleted on an earlier run, or by hand): it is removed
        orphan_removed(orphan_id=orphan.pk, now=now)
        report.removed.append(orphan.name)
        return
    try:
        if orphan.kind == Kind.NAMESPACE:
            namespace = ManagedNamespace(name=orphan.name, workload_id=orphan.workload_id)
            gone = driver.delete_workload(namespace_only_spec(namespace, now))
        else:
            gone = driver.delete_volume(orphan.name)
    except DriverError as error:
        report.errors.append(f"removing {orphan.name}: {error.message}")
        orphan_removed(orphan_id=orphan.pk, now=now, error=error.message)
        return
    if not gone:  # a namespace takes a while to go: done on the run that finds it gone
        orphan_removed(orphan_id=orphan.pk, now=now, error="being deleted by the cluster")
        return
    orphan_removed(orphan_id=orphan.pk, now=now)
    report.removed.append(orphan.name)


def clusters_to_check() -> list[int]:
    return list(Cluster.objects.order_by("pk").values_list("pk", flat=True))


def workload_ids_advance(*, past: int) -> bool:
    """Make the next workload id higher than `past` (the highest the cluster's labels name), so
    that a database restored from an older backup never issues again an id that objects on the
    cluster carry. True when the sequence moved."""
    table = Workload._meta.db_table
    newest = Workload.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    if past <= newest:
        return False
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)", [table, past])
        elif connection.vendor == "sqlite":
            cursor.execute("UPDATE sqlite_sequence SET seq = MAX(seq, %s) WHERE name = %s", [past, table])
            if cursor.rowcount == 0:
                cursor.execute("INSERT INTO sqlite_sequence (name, seq) VALUES (%s, %s)", [table, past])
        else:  # pragma: no cover - the portal runs on PostgreSQL or SQLite only
            return False
    return True
