"""Drift repair: make a cluster hold exactly the workload namespaces the database intends.

Two kinds of drift are repaired. A namespace the portal labelled as its own whose workload (a
sandbox or a deployment) has ended or lives on another cluster is deleted. A running workload whose
objects are gone from the cluster (someone deleted the namespace by hand, or the database was
restored from a backup older than the workload's end) is applied again while it has time left, and
fails, saying why, when it cannot be. A namespace naming a workload the database does not know (or
another workload's id, after a restore) is no business of this repair: the orphan reconcile
(workers/reconcile/orphans.py) reports it and removes it only when an admin confirms. Workloads
that are starting or ending are left to their own reconciler. Running it twice changes nothing
the second time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Max
from django.utils import timezone

from portal.audit.models import AuditEvent
from portal.audit.services import audit_record
from portal.fleet.models import Cluster
from portal.workloads.models import END_STATES, Workload, WorkloadState
from portal.workloads.services import workload_mark_failed
from workers.drivers.base import ClusterDriver, DriverError, ManagedNamespace
from workers.reconcile.clusters import driver_for
from workers.reconcile.workloads import namespace_for, workload_spec
from workers.spec import GpuClaim, WorkloadSpec

log = logging.getLogger(__name__)

ORPHAN_ACTION = "namespace.orphan_deleted"
REPAIRED_EVENT = "drift_repaired"  # audited as <kind>.drift_repaired
# Namespace kinds (label gpu-portal/kind) whose id names a Workload row. Other kinds are left alone.
ROW_KINDS = frozenset({"sandbox", "deployment"})


@dataclass
class DriftReport:
    cluster: str
    orphans_deleted: list[str] = field(default_factory=list)  # namespaces asked to go
    repaired: list[int] = field(default_factory=list)  # workload ids applied again
    skipped: list[str] = field(default_factory=list)  # labelled namespaces of kinds not handled here
    unknown: list[str] = field(default_factory=list)  # namespaces left to the orphan reconcile
    failed: list[int] = field(default_factory=list)  # workload ids lost and not re-created
    errors: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.orphans_deleted or self.repaired or self.failed)


def clusters_to_repair() -> list[int]:
    return list(Cluster.objects.order_by("pk").values_list("pk", flat=True))


def repair_drift(cluster_id: int, *, now: datetime | None = None) -> DriftReport | None:
    """Delete orphaned workload namespaces and re-apply running workloads whose objects are gone.

    Each failure is noted in the report and the rest carries on; None for an unknown cluster.
    """
    now = now or timezone.now()
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return None
    report = DriftReport(cluster=cluster.name)
    try:
        driver = driver_for(cluster)
        namespaces = driver.managed_namespaces()
    except DriverError as error:
        report.errors.append(f"listing namespaces: {error.message}")
        log.warning("drift repair on cluster %s: %s", cluster.name, error.message)
        return report
    ids = {ns.workload_id for ns in namespaces if ns.workload_id is not None}
    workloads = {
        workload.pk: workload for workload in Workload.objects.select_related("team").filter(pk__in=ids)
    }
    newest = Workload.objects.aggregate(newest=Max("pk"))["newest"] or 0
    for namespace in namespaces:
        if namespace.kind not in ROW_KINDS or namespace.workload_id is None:
            report.skipped.append(namespace.name)  # not made by the portal's workload path
            continue
        if namespace.workload_id > newest:
            # Not a row deleted here: an id this database never issued. Another portal (or a
            # fresh database) on this cluster; deleting would destroy someone's live work.
            report.errors.append(
                f"namespace {namespace.name} names {namespace.kind} {namespace.workload_id}, newer than any this "
                "portal has made; is another portal managing this cluster? Left alone."
            )
            continue
        workload = workloads.get(namespace.workload_id)
        if workload is None or not owns_namespace(workload, namespace.name):
            report.unknown.append(namespace.name)  # the orphan reconcile's: removed on an admin's word
            continue
        why = _orphaned(namespace, workload, cluster)
        if why:
            _delete_orphan(driver, cluster, namespace, workload, why, report, now)
    running = (
        Workload.objects.select_related("team", "owner", "image", "cluster", "gpu_type", "serving__model")
        .filter(cluster=cluster, state=WorkloadState.RUNNING)
        .order_by("pk")
    )
    for workload in running:
        # workload_spec builds a sandbox's or a deployment's objects, by its kind.
        _restore(driver, workload, report, now)
    if report.changed or report.errors:
        log.info(
            "drift repair on cluster %s: deleted %s, re-applied %s, errors %s",
            cluster.name,
            report.orphans_deleted,
            report.repaired,
            report.errors,
        )
    return report


def owns_namespace(workload: Workload, name: str) -> bool:
    """Whether the namespace is the workload's own, not one of another workload that carried the
    same id (ids are issued again after a restore from an older backup)."""
    return name == (workload.namespace or namespace_for(workload))


def _orphaned(namespace: ManagedNamespace, workload: Workload, cluster: Cluster) -> str:
    """Why the namespace of a known workload should not exist, or "" when its workload wants it."""
    if workload.state in END_STATES:
        return f"{workload.kind} {workload.number} is {workload.state}"
    if workload.cluster_id is None:
        return f"{workload.kind} {workload.number} is {workload.state} and placed on no cluster"
    if workload.cluster_id != cluster.pk:
        return f"{workload.kind} {workload.number} is placed on another cluster"
    return ""  # live here: queued, starting, running or ending, each handled by its own reconciler


def _delete_orphan(
    driver: ClusterDriver,
    cluster: Cluster,
    namespace: ManagedNamespace,
    workload: Workload | None,
    why: str,
    report: DriftReport,
    now: datetime,
) -> None:
    try:
        driver.delete_workload(namespace_only_spec(namespace, now))
    except DriverError as error:
        report.errors.append(f"deleting namespace {namespace.name}: {error.message}")
        return
    report.orphans_deleted.append(namespace.name)
    detail = f"namespace {namespace.name}: {why}"
    # A namespace takes a while to go; audit the first request only, not every later run's.
    if not AuditEvent.objects.filter(
        action=ORPHAN_ACTION, detail__startswith=f"namespace {namespace.name}:"
    ).exists():
        audit_record(
            actor=None,
            action=ORPHAN_ACTION,
            obj=workload if workload is not None else cluster,
            team=workload.team if workload is not None else None,
            detail=detail,
        )


def namespace_only_spec(namespace: ManagedNamespace, now: datetime) -> WorkloadSpec:
    """A spec that names only the namespace: drivers delete a workload by deleting its namespace,
    and an orphan may have no row to build a full spec from."""
    return WorkloadSpec(
        workload_id=namespace.workload_id or 0,
        name=namespace.name,
        team="",
        owner="",
        namespace=namespace.name,
        image="",
        image_kind="shell",
        cpu=0,
        memory_gb=0,
        storage_gb=0,
        gpu=GpuClaim(resource="nvidia.com/gpu", count=0, node="", gpu_indices=()),
        expires_at=now,
        access_host="",
    )


def _restore(driver: ClusterDriver, workload: Workload, report: DriftReport, now: datetime) -> None:
    """Apply a running workload again when the cluster holds none of its objects; fail it, saying
    why, when it has no time left or the cluster refuses it for good (its home volume gone)."""
    try:
        spec = workload_spec(workload)
        status = driver.workload_status(spec)
        if status.phase != "absent":
            return  # present (or still being deleted by hand: applied on a later run, once gone)
        if not Workload.objects.filter(pk=workload.pk, state=WorkloadState.RUNNING).exists():
            return  # ended meanwhile: its teardown removed the objects on purpose
    except DriverError as error:
        report.errors.append(f"{workload.kind} {workload.number}: {error.message}")
        return
    if workload.expires_at <= now:
        _lost(workload, "its time was up", report, now)
        return
    try:
        driver.apply_workload(spec)
    except DriverError as error:
        if not error.retryable:  # refused for good (its home volume gone, say): it cannot come back
            _lost(workload, error.message, report, now)
            return
        report.errors.append(f"{workload.kind} {workload.number}: {error.message}")
        return
    report.repaired.append(workload.pk)
    Workload.objects.filter(pk=workload.pk, state=WorkloadState.RUNNING).update(
        message="Running; recreated after its objects went missing from the cluster."
    )
    audit_record(
        actor=None,
        action=f"{workload.kind}.{REPAIRED_EVENT}",
        obj=workload,
        team=workload.team,
        detail=f"{status.message}; applied namespace {spec.namespace} again",
    )


LOST = (
    "Lost from the cluster (its objects are gone, as after a restore from an older backup) "
    "and not re-created: {why}."
)


def _lost(workload: Workload, why: str, report: DriftReport, now: datetime) -> None:
    """A running workload that is gone from the cluster and cannot come back ends as failed,
    through the normal path (billing stops, its owner is told, its GPUs go back)."""
    report.failed.append(workload.pk)
    workload_mark_failed(workload_id=workload.pk, message=LOST.format(why=why.rstrip(".")), now=now)
