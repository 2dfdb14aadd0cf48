"""Users' persistent homes: made by their first sandbox on a cluster, mounted into each new
sandbox of theirs while no other live sandbox holds them, grown within the team's policy,
deleted only on a typed confirmation, billed per GB-month from the moment they exist (to the
team of the sandbox that last took them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.accounts.models import Team, User
from portal.accounts.selectors import owner_left_team
from portal.audit.services import audit_record
from portal.core.errors import Conflict, NotAllowed, NotFound, ValidationFailed
from portal.core.jobs import enqueue
from portal.fleet.services import storage_hold_end, storage_hold_start
from portal.sandboxes.models import Home
from portal.workloads.models import LIVE_STATES, Workload, WorkloadKind, WorkloadState
from portal.workloads.services import RECONCILE_TASK

HOME_DELETE_TASK = "sandboxes.home_delete"


@dataclass(frozen=True)
class HomeClaim:
    """A sandbox's hold on its owner's home, as the worker builds the sandbox from it."""

    home_id: int
    size_gb: int
    provisioned_gb: int
    volume_name: str
    owner: str
    settled: bool  # bound to its volume at its full size: nothing left to watch
    used_at: datetime | None = None


def _key(home: Home) -> str:
    return f"home:{home.pk}"


def _what(user: User) -> str:
    return f"home of {user.username}"


def _claim(home: Home, owner: User) -> HomeClaim:
    settled = (
        bool(home.volume_name) and home.state == Home.State.READY and home.provisioned_gb >= home.size_gb
    )
    return HomeClaim(
        home.pk, home.size_gb, home.provisioned_gb, home.volume_name, owner.username, settled, home.used_at
    )


def home_of(*, user: User) -> Home | None:
    """The user's home, unless deleted."""
    return (
        Home.objects.filter(user=user)
        .exclude(state=Home.State.DELETED)
        .select_related("cluster", "team", "attached_to")
        .first()
    )


def home_attached(*, workload: Workload) -> HomeClaim | None:
    """The home a sandbox holds, if it holds one (what its pod mounts at /home)."""
    home = Home.objects.filter(attached_to=workload, state__in=(Home.State.NEW, Home.State.READY)).first()
    return _claim(home, workload.owner) if home is not None else None


@transaction.atomic
def home_claim(*, workload: Workload, now: datetime | None = None) -> HomeClaim | None:
    """Give a sandbox being provisioned its owner's home: made on its cluster the first time
    (the team's default size, billed from now), else taken when no other live sandbox holds it.
    None: a scratch /home (the home is in another sandbox, on another cluster, or going)."""
    now = now or timezone.now()
    if workload.kind != WorkloadKind.SANDBOX or workload.cluster_id is None:
        return None
    owner = workload.owner
    home = Home.objects.select_for_update().filter(user=owner).exclude(state=Home.State.DELETED).first()
    if home is not None and home.attached_to_id == workload.pk:
        return _claim(home, owner) if home.state != Home.State.DELETING else None
    if workload.state != WorkloadState.PROVISIONING:
        return None  # only a sandbox being made takes the home
    if home is None:
        team = workload.team
        try:
            with transaction.atomic():  # two first sandboxes at once: one makes the home
                home = Home.objects.create(
                    user=owner,
                    team=team,
                    cluster_id=workload.cluster_id,
                    size_gb=team.home_gb_default,
                    attached_to=workload,
                )
        except IntegrityError:
            return None  # the other one made it, and holds it
        storage_hold_start(
            user=owner, team=team, key=_key(home), what=_what(owner), size_gb=home.size_gb, at=now
        )
        audit_record(actor=None, action="home.created", obj=home, team=team, detail=f"{home.size_gb} GB")
        return _claim(home, owner)
    holder = Workload.objects.filter(pk=home.attached_to_id).values_list("state", flat=True).first()
    if home.state == Home.State.DELETING or home.cluster_id != workload.cluster_id or holder in LIVE_STATES:
        return None
    Home.objects.filter(pk=home.pk).update(attached_to=workload)
    home.attached_to = workload
    if home.team_id != workload.team_id and not owner_left_team(
        user=owner, team_id=workload.team_id, owner_id=owner.pk
    ):  # (work asked for before its owner left that team does not take the billing there)
        _bill_to(home, workload.team, owner, now)
    return _claim(home, owner)


def _bill_to(home: Home, team: Team, owner: User, now: datetime) -> None:
    """The home is billed from now to the team of the sandbox that takes it (its owner has moved
    teams, or works in two): the team that uses it pays for it, not one they may have left."""
    before = home.team
    Home.objects.filter(pk=home.pk).update(team=team)
    home.team = team
    storage_hold_end(key=_key(home), at=now)
    storage_hold_start(user=owner, team=team, key=_key(home), what=_what(owner), size_gb=home.size_gb, at=now)
    detail = f"billed to team {team.name} from now, no longer to team {before.name}"
    for paying in (before, team):  # both teams' leads see it in their audit log
        audit_record(actor=None, action="home.team_changed", obj=home, team=paying, detail=detail)


def home_observed(
    *,
    home_id: int,
    volume_name: str,
    provisioned_gb: int,
    used_gb: float | None = None,
    use_asked: bool = False,
    now: datetime | None = None,
) -> None:
    """What the cluster says of a home: its volume and size, and its use where it says. An
    unanswered question about its use keeps the last figure but counts as asked (`used_at`), so
    a Prometheus that is down is not asked on every pass."""
    now = now or timezone.now()
    fields: dict = {"volume_name": volume_name, "provisioned_gb": provisioned_gb, "last_error": ""}
    if used_gb is not None:
        fields["used_gb"] = Decimal(str(used_gb)).quantize(Decimal("0.01"))
    if used_gb is not None or use_asked:
        fields["used_at"] = now
    Home.objects.filter(pk=home_id).exclude(state__in=(Home.State.DELETING, Home.State.DELETED)).update(
        state=Home.State.READY, **fields
    )


@transaction.atomic
def home_resize(*, user: User, size_gb: int, now: datetime | None = None) -> Home:
    """Grow the user's home within the team's policy (volumes only grow). Billing follows at
    once; the volume grows when a sandbox next holds it (at once if one does)."""
    now = now or timezone.now()
    home = Home.objects.select_for_update().filter(user=user).exclude(state=Home.State.DELETED).first()
    if home is None:
        raise NotFound("You have no home yet: your first sandbox makes it.")
    if home.state == Home.State.DELETING:
        raise Conflict("Your home is being deleted.")
    team = home.team
    if owner_left_team(user=user, team_id=team.pk, owner_id=user.pk):
        raise NotAllowed(
            f"Your home is billed to team {team.name}, which you are no longer in: it is billed to the "
            "team of the next sandbox that holds it, and may grow then within that team's policy."
        )
    if size_gb <= home.size_gb:
        raise ValidationFailed(
            f"A home only grows: it is {home.size_gb} GB, so ask for more than that.",
            fields={"size_gb": [f"more than {home.size_gb}"]},
        )
    if size_gb > team.home_gb_max:
        raise ValidationFailed(
            f"Team {team.name} lets a home grow to {team.home_gb_max} GB at most.",
            fields={"size_gb": [f"at most {team.home_gb_max}"]},
        )
    before = home.size_gb
    Home.objects.filter(pk=home.pk).update(size_gb=size_gb)
    storage_hold_end(key=_key(home), at=now)
    storage_hold_start(user=user, team=team, key=_key(home), what=_what(user), size_gb=size_gb, at=now)
    audit_record(actor=user, action="home.resize", obj=home, team=team, detail=f"{before} GB -> {size_gb} GB")
    if home.attached_to_id:
        enqueue(RECONCILE_TASK, home.attached_to_id)
    home.refresh_from_db()
    return home


@transaction.atomic
def home_delete(*, user: User, confirm: str, now: datetime | None = None) -> Home:
    """Delete the user's home and everything in it, once they type their username; never while a
    live sandbox holds it. Billing stops now; the volume goes in the background."""
    now = now or timezone.now()
    home = Home.objects.select_for_update().filter(user=user).exclude(state=Home.State.DELETED).first()
    if home is None:
        raise NotFound("You have no home to delete.")
    if confirm.strip() != user.username:
        raise ValidationFailed(
            f"Type your username ({user.username}) to confirm: everything in your home is lost.",
            fields={"confirm": ["does not match your username"]},
        )
    if home.state == Home.State.DELETING:
        return home
    holder = Workload.objects.filter(pk=home.attached_to_id, state__in=LIVE_STATES).first()
    if holder is not None:
        raise Conflict(f"Sandbox {holder.name} uses your home: end it first.")
    Home.objects.filter(pk=home.pk).update(state=Home.State.DELETING, deleted_at=now)
    storage_hold_end(key=_key(home), at=now)
    audit_record(actor=user, action="home.delete", obj=home, team=home.team, detail=f"{home.size_gb} GB")
    enqueue(HOME_DELETE_TASK, home.pk)
    home.refresh_from_db()
    return home


def home_trouble(*, home_id: int, error: str) -> None:
    """What went wrong with a home on the cluster (growing it, say), shown on its page."""
    Home.objects.filter(pk=home_id).update(last_error=error[:500])


def home_deleted(*, home_id: int, error: str = "") -> None:
    """The worker removed the volume (or says why not: it tries again on the next sweep)."""
    if error:
        Home.objects.filter(pk=home_id).update(last_error=error[:500])
        return
    Home.objects.filter(pk=home_id, state=Home.State.DELETING).update(state=Home.State.DELETED, last_error="")
