"""The sandbox kind's entry points: a request and its estimate in the flat fields of the request
form and the API body, on top of the workload services; sharing, restart, and asking a worker
for its events and log."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import NotRequired, TypedDict, Unpack

from django.db import transaction
from django.utils import timezone

from portal.accounts.models import Membership, User
from portal.accounts.selectors import can_manage, owner_shut_out, refuse_owner_who_left
from portal.audit.services import audit_record
from portal.core.errors import Conflict, NotAllowed, ValidationFailed
from portal.core.jobs import enqueue
from portal.sandboxes.models import Dataset, KubeAccess
from portal.sandboxes.selectors import refuse_kubectl_to_the_shut_out
from portal.workloads.models import Workload, WorkloadInsight, WorkloadKind, WorkloadState
from portal.workloads.selectors import workload_get_for
from portal.workloads.services import (
    RECONCILE_TASK,
    RESTARTING,
    Estimate,
    GpuAsk,
    Lifetime,
    WorkloadAsk,
    workload_estimate,
    workload_request,
)

INSIGHT_PATIENCE = timedelta(seconds=15)  # a request not answered in this long is asked again
LOG_TAIL_CHARS = 20_000  # the end of a log kept for the page


class _SandboxAsk(TypedDict):
    team: str
    gpu_type: str
    count: NotRequired[int | None]
    mig_profile: NotRequired[str | None]
    ttl_hours: NotRequired[Decimal | float | None]
    expires_at: NotRequired[datetime | None]
    start_at: NotRequired[datetime | None]
    image: NotRequired[str | None]
    cpu: NotRequired[int | None]
    memory_gb: NotRequired[int | None]
    storage_gb: NotRequired[int | None]
    purpose: NotRequired[str]
    project: NotRequired[str]


class SandboxFields(_SandboxAsk):
    """A sandbox request as the form and the API body give it (`gpu_type`, `count` or
    `mig_profile`, `ttl_hours` or `expires_at`)."""

    name: str


class SandboxEstimateFields(_SandboxAsk):
    """The same for an estimate, which may come before the name."""

    name: NotRequired[str]


def _ask(fields: SandboxFields | SandboxEstimateFields) -> WorkloadAsk:
    """The sandbox request as the workload services take it."""
    flat = dict(fields)
    gpu = GpuAsk(
        type=flat.pop("gpu_type"), count=flat.pop("count", None), mig_profile=flat.pop("mig_profile", None)
    )
    lifetime = Lifetime(ttl_hours=flat.pop("ttl_hours", None), expires_at=flat.pop("expires_at", None))
    return WorkloadAsk(kind=WorkloadKind.SANDBOX, gpu=gpu, lifetime=lifetime, **flat)


def sandbox_estimate(
    *,
    user: User,
    now: datetime | None = None,
    datasets: list[str] | None = None,
    **fields: Unpack[SandboxEstimateFields],
) -> Estimate:
    """What a sandbox request would cost, whether it is approved at once and fits now (datasets
    cost nothing, but one the team may not mount is refused here as in the request)."""
    _datasets(user, fields["team"], datasets or [])
    return workload_estimate(user=user, ask=_ask(fields), now=now)


def _datasets(user: User, team_slug: str, slugs: list[str]) -> list[Dataset]:
    """The datasets asked for, each one the team may mount; else a field error naming the rest.
    Nothing is checked for a team the user is not in: the request is refused for the team, and
    an answer here would tell a stranger which datasets the team has."""
    wanted = sorted({slug.strip() for slug in slugs if slug.strip()})
    if not wanted or not Membership.objects.filter(user=user, team__slug=team_slug).exists():
        return []
    found = {d.slug: d for d in Dataset.objects.filter(slug__in=wanted, teams__slug=team_slug)}
    refused = [slug for slug in wanted if slug not in found]
    if refused:
        raise ValidationFailed(
            f"Team {team_slug} may not mount: {', '.join(refused)}.",
            fields={"datasets": [f"not a dataset of team {team_slug}: {', '.join(refused)}"]},
        )
    return [found[slug] for slug in wanted]


@transaction.atomic
def sandbox_request(
    *,
    user: User,
    now: datetime | None = None,
    datasets: list[str] | None = None,
    **fields: Unpack[SandboxFields],
) -> Workload:
    """Request a sandbox: checked, counted against quota, then approved at once or sent to a
    lead; with the team datasets it mounts read-only at /data/<slug>."""
    chosen = _datasets(user, fields["team"], datasets or [])
    sandbox = workload_request(user=user, ask=_ask(fields), now=now)
    if chosen:
        for dataset in chosen:
            dataset.sandboxes.add(sandbox)
    return sandbox


@transaction.atomic
def sandbox_share(*, user: User, sandbox_id: int, usernames: list[str], may_add: bool = True) -> Workload:
    """Set who besides its owner may open a sandbox: members of its team, chosen by its owner
    alone. The list replaces the previous one (empty: nobody); the change is audited, and the
    sandbox's route follows it within seconds. Without `may_add` (a token short of the admin
    scope: the access it would give outlives it, into the owner's home too) it may only shrink."""
    sandbox = workload_get_for(user=user, workload_id=sandbox_id, lock=True, kind=WorkloadKind.SANDBOX)
    if sandbox.owner_id != user.pk:
        raise NotAllowed("Only the sandbox's owner may share it.")
    if sandbox.is_ssh_sandbox and usernames:
        raise Conflict(
            "An ssh sandbox lets in its owner's SSH keys only, so it cannot be shared: share a "
            "JupyterLab or VS Code sandbox instead."
        )
    wanted = sorted({name.strip() for name in usernames if name.strip()} - {user.username})
    kept = {member.username: member for member in sandbox.shared_with.all()}
    before = sorted(kept)
    added = [name for name in wanted if name not in kept]
    if added and not may_add:
        raise NotAllowed(
            "Sharing a sandbox with more people lets them in after the token is revoked: it needs a "
            "token with the admin scope (any token may stop sharing)."
        )
    if added and owner_shut_out(user, team_id=sandbox.team_id):
        raise NotAllowed(
            f"You are no longer a member of team {sandbox.team.name}: you may stop sharing this "
            "sandbox, not share it with more people."
        )
    # Those added must be active members of its team now. Those it stays shared with may have left
    # the team since (the gate lets them in only while members): no reason to refuse the change.
    members = {
        member.username: member
        for member in User.objects.filter(
            username__in=added, is_active=True, memberships__team_id=sandbox.team_id
        )
    }
    members.update({name: kept[name] for name in wanted if name in kept})
    unknown = [name for name in wanted if name not in members]
    if unknown:
        raise ValidationFailed(
            f"Not members of team {sandbox.team.slug}: {', '.join(unknown)}.", fields={"users": unknown}
        )
    if before != wanted:
        sandbox.shared_with.set(members.values())
        audit_record(
            actor=user,
            action="sandbox.share",
            obj=sandbox,
            team=sandbox.team,
            detail=f"shared with {', '.join(wanted) or 'nobody'} (was {', '.join(before) or 'nobody'})",
        )
    return sandbox


OBSERVE_TASK = "sandboxes.observe"


@transaction.atomic
def sandbox_restart(*, user: User, sandbox_id: int, now: datetime | None = None) -> Workload:
    """A new pod for a running sandbox on the same placement: its home volume is kept, its GPUs
    stay held and billed, and what ran in the old pod stops. The worker deletes the pod, and its
    StatefulSet makes the new one."""
    now = now or timezone.now()
    sandbox = workload_get_for(user=user, workload_id=sandbox_id, lock=True, kind=WorkloadKind.SANDBOX)
    if not can_manage(user=user, team=sandbox.team, owner=sandbox.owner):
        raise NotAllowed("Only the owner, a lead of the team or an admin may restart this sandbox.")
    refuse_owner_who_left(user=user, team=sandbox.team, owner=sandbox.owner, doing="restart")
    if sandbox.state != WorkloadState.RUNNING:
        raise Conflict(
            f"Only a running sandbox can be restarted; this one is {sandbox.get_state_display().lower()}."
        )
    if sandbox.restart_requested_at and (
        sandbox.restarted_at is None or sandbox.restarted_at < sandbox.restart_requested_at
    ):
        raise Conflict("A restart of this sandbox is already under way.")
    Workload.objects.filter(pk=sandbox.pk).update(
        restart_requested_at=now,
        message=f"{RESTARTING}: a new pod on {sandbox.node_name}; the home volume is kept.",
        next_attempt_at=now,
    )
    audit_record(actor=user, action="sandbox.restart", obj=sandbox, team=sandbox.team, detail="restart asked")
    enqueue(RECONCILE_TASK, sandbox.pk)
    sandbox.refresh_from_db()
    return sandbox


def sandbox_insight_request(*, user: User, sandbox_id: int, now: datetime | None = None) -> WorkloadInsight:
    """Ask a worker to read the sandbox's recent events and the end of its log (shown on its
    page). A request while one is being answered is the same request."""
    now = now or timezone.now()
    sandbox = workload_get_for(user=user, workload_id=sandbox_id, kind=WorkloadKind.SANDBOX)
    if sandbox.state not in (WorkloadState.PROVISIONING, WorkloadState.RUNNING):
        raise Conflict("Events and the log are there only while the sandbox is starting or running.")
    insight, _ = WorkloadInsight.objects.get_or_create(workload=sandbox)
    if insight.pending and insight.requested_at and now - insight.requested_at < INSIGHT_PATIENCE:
        return insight
    WorkloadInsight.objects.filter(pk=insight.pk).update(requested_at=now)
    enqueue(OBSERVE_TASK, sandbox.pk)
    insight.refresh_from_db()
    return insight


def sandbox_insight_record(
    *, sandbox_id: int, events: list[dict], log_tail: str, error: str = "", now: datetime | None = None
) -> None:
    """What a worker read of the sandbox's pod (or why it could not), for its page."""
    now = now or timezone.now()
    fields = {"read_at": now, "error": error[:500]}
    if not error:
        fields.update(events=events, log_tail=log_tail[-LOG_TAIL_CHARS:])
    WorkloadInsight.objects.update_or_create(workload_id=sandbox_id, defaults=fields)


KUBE_ACCESS_TASK = "sandboxes.kube_access"
KUBE_TOKEN_MAX = timedelta(hours=24)  # a kubeconfig is asked for again after a day at most


@transaction.atomic
def sandbox_kube_access_request(*, user: User, sandbox_id: int, now: datetime | None = None) -> KubeAccess:
    """Ask a worker for a kubeconfig of the sandbox for its owner: a fresh token of the sandbox's
    ServiceAccount, good until the sandbox expires (a day at most)."""
    now = now or timezone.now()
    sandbox = workload_get_for(user=user, workload_id=sandbox_id, kind=WorkloadKind.SANDBOX)
    if sandbox.owner_id != user.pk:
        raise NotAllowed("kubectl access to a sandbox is its owner's alone.")
    refuse_kubectl_to_the_shut_out(user=user, sandbox=sandbox)
    if sandbox.state != WorkloadState.RUNNING:
        raise Conflict(
            f"A kubeconfig is issued for a running sandbox; this one is {sandbox.get_state_display().lower()}."
        )
    access, _ = KubeAccess.objects.select_for_update().get_or_create(
        workload=sandbox, user=user, defaults={"requested_at": now}
    )
    KubeAccess.objects.filter(pk=access.pk).update(requested_at=now, error="")
    audit_record(
        actor=user, action="sandbox.kubeconfig", obj=sandbox, team=sandbox.team, detail="kubeconfig asked"
    )
    enqueue(KUBE_ACCESS_TASK, access.pk)
    access.refresh_from_db()
    return access


def sandbox_kube_access_issued(
    *,
    access_id: int,
    token: str = "",
    expires_at: datetime | None = None,
    server: str = "",
    ca_pem: str = "",
    namespace: str = "",
    simulated: bool = False,
    error: str = "",
    now: datetime | None = None,
) -> None:
    """What the worker got from the cluster for a kubeconfig (or why it got nothing)."""
    now = now or timezone.now()
    fields: dict = {"issued_at": now, "error": error[:500]}
    if not error:
        fields.update(
            token=token,
            expires_at=expires_at,
            server=server,
            ca_pem=ca_pem,
            namespace=namespace,
            simulated=simulated,
        )
    KubeAccess.objects.filter(pk=access_id).update(**fields)


def sandbox_kube_access_held(*, sandbox_id: int) -> bool:
    """Whether a kubeconfig of the sandbox was asked for (issued, or on its way)."""
    return KubeAccess.objects.filter(workload_id=sandbox_id).exists()


def sandbox_kube_access_voided(*, sandbox: Workload, why: str) -> None:
    """The cluster voided the running sandbox's kubectl tokens (its account made anew): forget
    its kubeconfigs and say why in its audit trail."""
    if sandbox_kube_access_revoke(sandbox_id=sandbox.pk):
        audit_record(actor=None, action="sandbox.kubectl_revoked", obj=sandbox, team=sandbox.team, detail=why)


def sandbox_kube_access_revoke(*, sandbox_id: int) -> int:
    """Forget every kubeconfig of a sandbox: ended (its ServiceAccount went with its namespace,
    which revoked the tokens on the cluster), or whose owner was deactivated or left its team (the
    account made anew, which revoked them too)."""
    deleted, _ = KubeAccess.objects.filter(workload_id=sandbox_id).delete()
    return deleted
