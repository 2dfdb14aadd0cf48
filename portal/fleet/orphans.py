"""Orphans: objects the portal made on a cluster that its database does not know.

After a restore from an older backup the cluster holds namespaces (and volumes) of workloads made
after the backup was taken. The orphan reconcile (in the workers) finds them by the portal's
labels and records them here; admins see them on the fleet page and confirm each removal; the
reconcile removes a confirmed orphan once the grace period (PORTAL_ORPHAN_GRACE_MINUTES) from the
confirmation has passed, so a confirmation given by mistake can be withdrawn. Home volumes hold
users' files: they are reported and never removed by the portal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from portal.accounts.models import User
from portal.accounts.selectors import platform_admins
from portal.accounts.services import notify
from portal.audit.services import audit_record
from portal.core.errors import Conflict, NotAllowed, NotFound
from portal.fleet.models import Cluster, ClusterOrphan

FOUND = "cluster.orphan_found"
CONFIRMED = "cluster.orphan_confirmed"
WITHDRAWN = "cluster.orphan_confirmation_withdrawn"
REMOVED = "cluster.orphan_removed"
CLEARED = "cluster.orphan_cleared"


@dataclass(frozen=True)
class OrphanSeen:
    """One object of the portal's on the cluster that the database does not know."""

    kind: str  # a ClusterOrphan.Kind value
    name: str
    reason: str
    namespace: str = ""
    workload_id: int | None = None


def orphan_grace() -> timedelta:
    return timedelta(minutes=settings.PORTAL_ORPHAN_GRACE_MINUTES)


# --- reads ----------------------------------------------------------------------------------------


def orphans_open() -> QuerySet[ClusterOrphan]:
    """Orphans still on their clusters, oldest first, with what the fleet page shows of them."""
    return (
        ClusterOrphan.objects.filter(removed_at__isnull=True)
        .select_related("cluster", "confirmed_by")
        .order_by("first_seen", "pk")
    )


@dataclass(frozen=True)
class OrphanRow:
    orphan: ClusterOrphan
    removal_at: datetime | None


def orphan_rows() -> list[OrphanRow]:
    """What the fleet page lists: each open orphan with when it goes, if confirmed (one query)."""
    return [OrphanRow(orphan=orphan, removal_at=orphan_removal_at(orphan)) for orphan in orphans_open()]


def orphans_due(*, cluster_id: int, now: datetime) -> list[ClusterOrphan]:
    """Confirmed orphans of the cluster whose grace period has passed (never a home volume)."""
    return list(
        ClusterOrphan.objects.filter(
            cluster_id=cluster_id,
            removed_at__isnull=True,
            confirmed_at__isnull=False,
            confirmed_at__lte=now - orphan_grace(),
        )
        .exclude(kind=ClusterOrphan.Kind.HOME_VOLUME)
        .order_by("pk")
    )


def orphan_removal_at(orphan: ClusterOrphan) -> datetime | None:
    """When a confirmed orphan is removed at the earliest; None while unconfirmed or for data."""
    if orphan.confirmed_at is None or orphan.keeps_data:
        return None
    return orphan.confirmed_at + orphan_grace()


# --- writes ---------------------------------------------------------------------------------------


@transaction.atomic
def orphans_observed(
    *, cluster_id: int, seen: Iterable[OrphanSeen], now: datetime | None = None
) -> list[ClusterOrphan]:
    """Record one complete look at the cluster: new orphans are recorded, audited and told to
    admins; known ones are marked seen; open ones not seen any more (deleted by hand, or known to
    the database again) are closed. Returns the new ones. Running it twice changes nothing but
    `last_seen`."""
    now = now or timezone.now()
    cluster = Cluster.objects.get(pk=cluster_id)
    known = {
        (orphan.kind, orphan.name): orphan
        for orphan in ClusterOrphan.objects.select_for_update().filter(
            cluster=cluster, removed_at__isnull=True
        )
    }
    new: list[ClusterOrphan] = []
    still: list[int] = []
    for item in seen:
        orphan = known.pop((item.kind, item.name), None)
        if orphan is not None:
            still.append(orphan.pk)
            continue
        orphan = ClusterOrphan.objects.create(
            cluster=cluster,
            kind=item.kind,
            name=item.name,
            namespace=item.namespace,
            workload_id=item.workload_id,
            reason=item.reason[:300],
            first_seen=now,
            last_seen=now,
        )
        audit_record(actor=None, action=FOUND, obj=orphan, detail=f"{orphan}: {orphan.reason}")
        new.append(orphan)
    if still:
        ClusterOrphan.objects.filter(pk__in=still).update(last_seen=now)
    for orphan in known.values():
        ClusterOrphan.objects.filter(pk=orphan.pk, removed_at__isnull=True).update(
            removed_at=now, outcome=ClusterOrphan.Outcome.GONE
        )
        audit_record(
            actor=None, action=CLEARED, obj=orphan, detail=f"{orphan}: gone from the cluster, or known again"
        )
    if new:
        _tell_admins(cluster, new)
    return new


def _tell_admins(cluster: Cluster, new: list[ClusterOrphan]) -> None:
    names = ", ".join(orphan.name for orphan in new[:5]) + (
        f" and {len(new) - 5} more" if len(new) > 5 else ""
    )
    message = (
        f"Cluster {cluster.name} holds {len(new)} object(s) the portal's database does not know: {names}. "
        "Review them on the fleet page; nothing is removed until an admin confirms."
    )
    for admin in platform_admins():
        notify(
            kind="fleet",
            user=admin,
            message=message,
            link="/fleet/#orphans",
            email_subject="Unknown objects on a cluster",
        )


def _open_orphan(orphan_id: int, user: User) -> ClusterOrphan:
    if not user.is_platform_admin:
        raise NotAllowed("Only platform admins review objects on clusters.")
    orphan = ClusterOrphan.objects.select_for_update().select_related("cluster").filter(pk=orphan_id).first()
    if orphan is None:
        raise NotFound(f"No orphan {orphan_id}.")
    if orphan.removed_at is not None:
        raise Conflict(f"{orphan} is already gone from the cluster.")
    return orphan


@transaction.atomic
def orphan_confirm(*, user: User, orphan_id: int, now: datetime | None = None) -> ClusterOrphan:
    """An admin agrees the object may go: it is removed once the grace period has passed (and
    only if it is still unknown then). Home volumes are refused: they hold a user's files."""
    now = now or timezone.now()
    orphan = _open_orphan(orphan_id, user)
    if orphan.keeps_data:
        raise Conflict(
            f"{orphan.name} is a home volume and may hold a user's files: the portal never removes it. "
            "Check its data, then delete it with kubectl (see docs/backup-restore.md)."
        )
    if orphan.confirmed_at is not None:
        return orphan  # confirmed already: the first confirmation's clock stands
    orphan.confirmed_by = user
    orphan.confirmed_at = now
    orphan.save(update_fields=["confirmed_by", "confirmed_at"])
    audit_record(
        actor=user,
        action=CONFIRMED,
        obj=orphan,
        detail=f"{orphan}: removed after {now + orphan_grace():%Y-%m-%d %H:%M} UTC; {orphan.reason}",
    )
    return orphan


@transaction.atomic
def orphan_keep(*, user: User, orphan_id: int) -> ClusterOrphan:
    """Withdraw a confirmation before the removal: the object stays, reported."""
    orphan = _open_orphan(orphan_id, user)
    if orphan.confirmed_at is None:
        return orphan
    orphan.confirmed_by = None
    orphan.confirmed_at = None
    orphan.save(update_fields=["confirmed_by", "confirmed_at"])
    audit_record(actor=user, action=WITHDRAWN, obj=orphan, detail=f"{orphan}: kept")
    return orphan


def orphan_removed(*, orphan_id: int, now: datetime | None = None, error: str = "") -> None:
    """What the removal of a confirmed orphan came to: gone (audited), or the cluster's error
    (kept for the next run)."""
    now = now or timezone.now()
    orphan = (
        ClusterOrphan.objects.select_related("confirmed_by")
        .filter(pk=orphan_id, removed_at__isnull=True)
        .first()
    )
    if orphan is None:
        return
    if error:
        ClusterOrphan.objects.filter(pk=orphan.pk).update(last_error=error[:500])
        return
    ClusterOrphan.objects.filter(pk=orphan.pk, removed_at__isnull=True).update(
        removed_at=now, outcome=ClusterOrphan.Outcome.REMOVED, last_error=""
    )
    who = orphan.confirmed_by.username if orphan.confirmed_by else "an admin"
    when = f"{orphan.confirmed_at:%Y-%m-%d %H:%M} UTC" if orphan.confirmed_at else "earlier"
    audit_record(
        actor=None, action=REMOVED, obj=orphan, detail=f"{orphan}: removed, as {who} confirmed at {when}"
    )
