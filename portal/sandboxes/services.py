"""The sandbox kind's entry points: a request and its estimate in the flat fields of the request
form and the API body, on top of the workload services."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import NotRequired, TypedDict, Unpack

from django.db import transaction

from portal.accounts.models import User
from portal.audit.services import audit_record
from portal.core.errors import NotAllowed, ValidationFailed
from portal.workloads.models import Workload, WorkloadKind
from portal.workloads.selectors import workload_get_for
from portal.workloads.services import (
    Estimate,
    GpuAsk,
    Lifetime,
    WorkloadAsk,
    workload_estimate,
    workload_request,
)


class _SandboxAsk(TypedDict):
    team: str
    gpu_type: str
    count: NotRequired[int | None]
    mig_profile: NotRequired[str | None]
    ttl_hours: NotRequired[Decimal | float | None]
    expires_at: NotRequired[datetime | None]
    image: NotRequired[str | None]
    cpu: NotRequired[int | None]
    memory_gb: NotRequired[int | None]
    storage_gb: NotRequired[int | None]
    purpose: NotRequired[str]


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
    *, user: User, now: datetime | None = None, **fields: Unpack[SandboxEstimateFields]
) -> Estimate:
    """What a sandbox request would cost, whether it is approved at once and fits now."""
    return workload_estimate(user=user, ask=_ask(fields), now=now)


def sandbox_request(*, user: User, now: datetime | None = None, **fields: Unpack[SandboxFields]) -> Workload:
    """Request a sandbox: checked, counted against quota, then approved at once or sent to a lead."""
    return workload_request(user=user, ask=_ask(fields), now=now)


@transaction.atomic
def sandbox_share(*, user: User, sandbox_id: int, usernames: list[str]) -> Workload:
    """Set who besides its owner may open a sandbox: members of its team, chosen by its owner
    alone. The list replaces the previous one (empty: nobody); the change is audited, and the
    sandbox's route follows it within seconds."""
    sandbox = workload_get_for(user=user, workload_id=sandbox_id, lock=True, kind=WorkloadKind.SANDBOX)
    if sandbox.owner_id != user.pk:
        raise NotAllowed("Only the sandbox's owner may share it.")
    wanted = sorted({name.strip() for name in usernames if name.strip()} - {user.username})
    members = {
        member.username: member
        for member in User.objects.filter(
            username__in=wanted, is_active=True, memberships__team_id=sandbox.team_id
        )
    }
    unknown = [name for name in wanted if name not in members]
    if unknown:
        raise ValidationFailed(
            f"Not members of team {sandbox.team.slug}: {', '.join(unknown)}.", fields={"users": unknown}
        )
    before = sorted(sandbox.shared_with.values_list("username", flat=True))
    if before != wanted:
        sandbox.shared_with.set(members.values())
        audit_record(
            actor=user,
            action="share",
            obj=sandbox,
            team=sandbox.team,
            detail=f"shared with {', '.join(wanted) or 'nobody'} (was {', '.join(before) or 'nobody'})",
        )
    return sandbox
