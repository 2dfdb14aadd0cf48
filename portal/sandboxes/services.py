"""The sandbox kind's entry points: a request and its estimate in the flat fields of the request
form and the API body, on top of the workload services."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import NotRequired, TypedDict, Unpack

from portal.accounts.models import User
from portal.workloads.models import Workload, WorkloadKind
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
