"""The sandbox kind's entry points: a request and its estimate in the flat fields of the request
form and the API body, on top of the workload services."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from portal.accounts.models import User
from portal.workloads.models import Workload, WorkloadKind
from portal.workloads.services import Estimate, GpuAsk, Lifetime, workload_estimate, workload_request


def sandbox_estimate(
    *,
    user: User,
    team: str,
    gpu_type: str,
    name: str = "",
    count: int | None = None,
    mig_profile: str | None = None,
    ttl_hours: Decimal | float | None = None,
    expires_at: datetime | None = None,
    image: str | None = None,
    cpu: int | None = None,
    memory_gb: int | None = None,
    storage_gb: int | None = None,
    purpose: str = "",
    now: datetime | None = None,
) -> Estimate:
    """`workload_estimate` for a sandbox, in the flat fields of the request form and API body."""
    return workload_estimate(
        user=user,
        kind=WorkloadKind.SANDBOX,
        team=team,
        name=name,
        gpu=GpuAsk(type=gpu_type, count=count, mig_profile=mig_profile),
        lifetime=Lifetime(ttl_hours=ttl_hours, expires_at=expires_at),
        image=image,
        cpu=cpu,
        memory_gb=memory_gb,
        storage_gb=storage_gb,
        purpose=purpose,
        now=now,
    )


def sandbox_request(
    *,
    user: User,
    team: str,
    name: str,
    gpu_type: str,
    count: int | None = None,
    mig_profile: str | None = None,
    ttl_hours: Decimal | float | None = None,
    expires_at: datetime | None = None,
    image: str | None = None,
    cpu: int | None = None,
    memory_gb: int | None = None,
    storage_gb: int | None = None,
    purpose: str = "",
    now: datetime | None = None,
) -> Workload:
    """`workload_request` for a sandbox, in the flat fields of the request form and API body."""
    return workload_request(
        user=user,
        kind=WorkloadKind.SANDBOX,
        team=team,
        name=name,
        gpu=GpuAsk(type=gpu_type, count=count, mig_profile=mig_profile),
        lifetime=Lifetime(ttl_hours=ttl_hours, expires_at=expires_at),
        image=image,
        cpu=cpu,
        memory_gb=memory_gb,
        storage_gb=storage_gb,
        purpose=purpose,
        now=now,
    )
