"""Rows written straight to the database (no services), for pages, lists and figures with known
values, and the header an htmx request carries."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from itertools import count

from django.utils import timezone

from portal.accounts.models import Team, User
from portal.fleet.models import Allocation, Gpu, GpuType
from portal.workloads.models import END_STATES, Image, Workload, WorkloadState

HTMX = {"HTTP_HX_REQUEST": "true"}
_names = count(1)


def make_sandbox(
    *,
    owner: User,
    team: Team,
    state: str = WorkloadState.RUNNING,
    name: str | None = None,
    gpu: Gpu | None = None,
    gpu_type: GpuType | None = None,
    hours_ago: float = 2,
    price: Decimal = Decimal("6.88"),
    **fields: object,
) -> Workload:
    """A sandbox row in `state` (ended now if that is an end state); with `gpu`, holding it whole
    since `hours_ago` at `price` an hour, else of `gpu_type` and holding nothing."""
    now = timezone.now()
    values = {
        "name": name or f"box-{next(_names)}",
        "team": team,
        "owner": owner,
        "image": team.default_image or Image.objects.first(),
        "gpu_type": gpu.gpu_type if gpu else gpu_type,
        "state": state,
        "expires_at": now + timedelta(hours=6),
        "node_name": gpu.node.name if gpu else "",
        "queued_at": now - timedelta(hours=hours_ago),
        "started_at": now - timedelta(hours=hours_ago) if gpu else None,
        "ended_at": now if state in END_STATES else None,
        **fields,
    }
    sandbox = Workload.objects.create(**values)
    if gpu is not None:
        make_hold(
            gpu=gpu,
            user=owner,
            team=team,
            workload=sandbox,
            price=price,
            started_at=now - timedelta(hours=hours_ago),
            ended_at=None,
        )
    return sandbox


def make_hold(
    *,
    gpu: Gpu,
    user: User,
    team: Team,
    started_at: datetime,
    ended_at: datetime | None,
    workload: Workload | None = None,
    mig_profile: str = "",
    share: tuple[int, int] = (1, 1),
    price: Decimal = Decimal("6.88"),
) -> Allocation:
    """An allocation with known times and price; released when it has ended."""
    return Allocation.objects.create(
        gpu=gpu,
        workload=workload,
        team=team,
        user=user,
        gpu_type=gpu.gpu_type,
        mig_profile=mig_profile,
        share_numerator=share[0],
        share_denominator=share[1],
        price_per_hour=price,
        started_at=started_at,
        ended_at=ended_at,
        released_at=ended_at,
    )


def make_deployment(
    *,
    owner: User,
    team: Team,
    model: str = "llama-3.1-8b-instruct",
    gpu: Gpu | None = None,
    gpu_type: GpuType | None = None,
    state: str = WorkloadState.RUNNING,
    hours_ago: float = 2,
    price: Decimal = Decimal("6.88"),
    **fields: object,
) -> Workload:
    """A deployment row of a catalog `model` (catalog_seed must have run) in `state`, with its
    serving row; with `gpu`, running on it whole since `hours_ago` at `price` an hour, else of
    `gpu_type` and holding nothing."""
    from portal.catalog.models import CatalogModel
    from portal.catalog.runtimes import RUNTIMES
    from portal.deployments.models import Serving

    entry = CatalogModel.objects.select_related("runtime").get(slug=model)
    spec = RUNTIMES[entry.runtime.slug]
    deployment = make_sandbox(
        owner=owner,
        team=team,
        state=state,
        gpu=gpu,
        gpu_type=gpu_type,
        hours_ago=hours_ago,
        price=price,
        kind="deployment",
        image=None,
        name=fields.pop("name", None) or f"serve-{next(_names)}",
        cluster=gpu.node.cluster if gpu else None,
        **fields,
    )
    Serving.objects.create(
        workload=deployment,
        model=entry,
        runtime=entry.runtime,
        precision=entry.default_dtype,
        context=entry.max_context or 0,
        concurrency=8,
        image=spec.image,
        command=["vllm", "serve", entry.source] if spec.slug == "vllm" else [spec.slug],
        port=spec.port,
        health_path=spec.health_path,
        readiness_path=spec.readiness_path,
        api=spec.api,
    )
    return deployment
