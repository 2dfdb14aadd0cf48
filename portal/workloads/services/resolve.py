"""Checking a request (a sandbox or a deployment) against the catalogue, the fleet and the team's
policy.

`resolve_request` gathers every field error before raising, so a form or an API client sees all
that is wrong at once, and nothing is written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from portal.accounts.models import Membership, Team, User
from portal.core.errors import ValidationFailed
from portal.fleet.geometry import ProfileShape
from portal.fleet.models import Gpu, GpuType
from portal.fleet.selectors import max_gpus_per_node, price_per_hour
from portal.workloads.models import LIVE_STATES, Image, Workload, WorkloadKind, project_label_error
from portal.workloads.policy import request_share, share_hourly_cost, within_max_lifetime

NAME_MAX = 40  # a workload's name goes into cluster object names
NAME_RE = re.compile(rf"^[a-z0-9]([a-z0-9-]{{0,{NAME_MAX - 2}}}[a-z0-9])?$")
NAME_RULE = (
    f"Use 1-{NAME_MAX} lowercase letters, digits and hyphens, starting and ending with a letter or digit."
)
MIN_LEAD_TIME = timedelta(minutes=1)
# A scheduled start is at least this far ahead (sooner: request it now) and at most this far.
START_MIN_AHEAD = timedelta(minutes=5)
START_MAX_AHEAD = timedelta(days=30)
MAX_ANY_LIFETIME_HOURS = 24 * 366  # a bound for the date arithmetic when no team is known
MAX_REPLICAS = 16
# CPU, memory and scratch storage of one serving replica (no image template to take them from).
DEPLOYMENT_DEFAULTS = (8, 64, 100)
LIMITS = {"cpu": (1, 256), "memory_gb": (1, 2048), "storage_gb": (1, 10240)}


@dataclass(frozen=True)
class GpuAsk:
    """The GPUs asked for, per replica: `count` whole GPUs of `type` (1 when left out), or one MIG
    slice of `mig_profile`."""

    type: str
    count: int | None = None
    mig_profile: str | None = None


@dataclass(frozen=True)
class Lifetime:
    """How long it lives: `ttl_hours` from when it starts running (fractions allowed), or until
    `expires_at`, one of the two."""

    ttl_hours: Decimal | float | None = None
    expires_at: datetime | None = None


@dataclass(frozen=True)
class WorkloadAsk:
    """A request as a user makes it, before any check: what kind, for which team, named what, on
    which GPUs, for how long, with what resources (None: the image's or the kind's defaults)."""

    kind: str
    team: str
    gpu: GpuAsk
    lifetime: Lifetime
    name: str = ""
    image: str | None = None
    cpu: int | None = None
    memory_gb: int | None = None
    storage_gb: int | None = None
    purpose: str = ""
    replicas: int = 1
    project: str = ""
    start_at: datetime | None = None  # a scheduled start; None: as soon as it is approved and fits


@dataclass(frozen=True)
class ResolvedRequest:
    kind: str
    team: Team
    name: str
    image: Image | None
    gpu_type: GpuType
    count: int
    mig_profile: str
    shape: ProfileShape | None
    expires_at: datetime | None  # None: set when it starts running
    lifetime_hours: Decimal
    share: Fraction
    price_per_gpu_hour: Decimal
    hourly_cost: Decimal
    cpu: int
    memory_gb: int
    storage_gb: int
    purpose: str
    replicas: int = 1
    project: str = ""
    start_at: datetime | None = None


def _decimal(value: object) -> Decimal | None:
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() else None


def resolve_start(
    *, start_at: datetime | None, now: datetime, errors: dict[str, list[str]]
) -> datetime | None:
    """A scheduled start, checked: between START_MIN_AHEAD and START_MAX_AHEAD from now."""
    if start_at is None:
        return None
    if start_at < now + START_MIN_AHEAD:
        minutes = int(START_MIN_AHEAD.total_seconds() // 60)
        errors["start_at"] = [
            f"A scheduled start must be at least {minutes} minutes from now; leave it out to start at once."
        ]
        return None
    if start_at > now + START_MAX_AHEAD:
        errors["start_at"] = [f"A scheduled start may be at most {START_MAX_AHEAD.days} days ahead."]
        return None
    return start_at


def resolve_lifetime(
    *,
    team: Team | None,
    kind: str,
    lifetime: Lifetime,
    now: datetime,
    errors: dict[str, list[str]],
    scheduled: bool = False,
) -> tuple[datetime | None, Decimal | None]:
    """The fixed expiry (None for `ttl_hours`: it is set when the workload starts running) and the
    length in hours of `lifetime`; (None, None) with the error in `errors`. With a scheduled
    start, `now` is that start: an end time counts from it."""
    ttl_hours, expires_at = lifetime.ttl_hours, lifetime.expires_at
    if ttl_hours in (None, "") and expires_at is None:
        errors["ttl_hours"] = ["Give ttl_hours or expires_at."]
        return None, None
    if ttl_hours not in (None, "") and expires_at is not None:
        errors["ttl_hours"] = ["Give either ttl_hours or expires_at, not both."]
        return None, None
    if expires_at is None:
        field = "ttl_hours"
        hours = _decimal(ttl_hours)
        if hours is None or hours <= 0:
            errors[field] = ["Must be a number of hours above zero."]
            return None, None
        if hours * 60 < 1:
            errors[field] = ["Must be at least one minute (0.0167 hours)."]
            return None, None
    else:
        field = "expires_at"
        if expires_at < now + MIN_LEAD_TIME:
            errors[field] = [
                "Must be at least one minute after its scheduled start."
                if scheduled
                else "Must be at least one minute from now."
            ]
            return None, None
        hours = Decimal((expires_at - now).total_seconds()) / Decimal(3600)
    # Checked before any date arithmetic, so an absurd value is an error, never an overflow.
    if team is not None and not within_max_lifetime(team=team, lifetime_hours=hours):
        errors[field] = [
            f"Team {team.name} allows at most {team.max_lifetime_hours.normalize():f} hours per {kind}."
        ]
        return None, None
    if hours > MAX_ANY_LIFETIME_HOURS:
        errors[field] = [f"At most {MAX_ANY_LIFETIME_HOURS} hours."]
        return None, None
    # A lifetime in hours counts from when it starts running: no expiry until then. An end the
    # request named stays where it was put.
    return expires_at, hours


def resolve_request(
    *, user: User, ask: WorkloadAsk, check_name: bool = True, now: datetime
) -> ResolvedRequest:
    """Check a request and work out what it stands for. `check_name=False` (estimates) skips
    the name, which a form may not have yet."""
    errors: dict[str, list[str]] = {}
    kind, team, name, gpu, lifetime = ask.kind, ask.team, ask.name, ask.gpu, ask.lifetime
    image, cpu, memory_gb, storage_gb = ask.image, ask.cpu, ask.memory_gb, ask.storage_gb
    purpose, replicas = ask.purpose, ask.replicas
    gpu_type, count, mig_profile = gpu.type, gpu.count, gpu.mig_profile
    team_obj = Team.objects.select_related("default_image").filter(slug=team).first()
    if team_obj is None or not Membership.objects.filter(user=user, team=team_obj).exists():
        errors["team"] = [f"You are not a member of a team called {team!r}."]
        team_obj = None

    name = (name or "").strip()
    if not check_name:
        pass
    elif not NAME_RE.match(name):
        errors["name"] = [NAME_RULE]
    elif Workload.objects.filter(owner=user, kind=kind, name=name, state__in=LIVE_STATES).exists():
        errors["name"] = [f"You already have a live {kind} called {name!r}."]

    project = (ask.project or "").strip()
    if problem := project_label_error(project):
        errors["project"] = [problem]

    if not isinstance(replicas, int) or not 1 <= replicas <= MAX_REPLICAS:
        errors["replicas"] = [f"Must be a whole number from 1 to {MAX_REPLICAS}."]
        replicas = 1

    gpu_type_obj = GpuType.objects.filter(slug=gpu_type).first()
    shape = None
    mig_profile = (mig_profile or "").strip()
    if gpu_type_obj is None:
        known = ", ".join(GpuType.objects.values_list("slug", flat=True))
        errors["gpu.type"] = [f"Unknown GPU type {gpu_type!r}. Known types: {known}."]
    elif mig_profile:
        shape = (
            gpu_type_obj.model.profile(mig_profile)
            if gpu_type_obj.model and gpu_type_obj.mig_capable
            else None
        )
        if shape is None:
            offered = ", ".join(gpu_type_obj.profile_names) or "none"
            errors["gpu.mig_profile"] = [
                f"{gpu_type_obj.slug} offers no MIG profile {mig_profile!r} (offers: {offered})."
            ]
        elif not Gpu.objects.filter(gpu_type=gpu_type_obj, mig_enabled=True).exists():
            elsewhere = ", ".join(
                sorted(set(Gpu.objects.filter(mig_enabled=True).values_list("gpu_type__slug", flat=True)))
            )
            errors["gpu.mig_profile"] = [
                f"No cluster has a MIG-enabled {gpu_type_obj.slug} GPU, so a {mig_profile} slice could never "
                f"be placed; ask for a whole GPU, or a slice of {elsewhere or 'no type here'}."
            ]
        elif count not in (None, 1):
            errors["gpu.count"] = ["A MIG request is for exactly one slice; leave count out."]
    else:
        if count is None:
            count = 1
        per_node = max_gpus_per_node(gpu_type=gpu_type_obj)
        if not isinstance(count, int) or count < 1:
            errors["gpu.count"] = ["Ask for at least one GPU."]
        elif per_node == 0:
            errors["gpu.count"] = [
                f"No cluster has a whole (non-MIG) {gpu_type_obj.slug} GPU, so this could never be placed; "
                "ask for a MIG slice of it, or another GPU type."
            ]
        elif count > per_node:
            errors["gpu.count"] = [f"At most {per_node} {gpu_type_obj.slug} GPUs fit on one node."]

    start_at = resolve_start(start_at=ask.start_at, now=now, errors=errors)
    resolved_expires, lifetime_hours = resolve_lifetime(
        team=team_obj,
        kind=kind,
        lifetime=lifetime,
        now=start_at or now,
        errors=errors,
        scheduled=bool(start_at),
    )

    image_obj = None
    if kind != WorkloadKind.SANDBOX:
        pass  # deployments run their runtime's image
    elif image:
        image_obj = Image.objects.filter(slug=image).first()
        if image_obj is None:
            known = ", ".join(Image.objects.values_list("slug", flat=True))
            errors["image"] = [f"Unknown image {image!r}. Known images: {known}."]
    elif team_obj is not None:
        image_obj = team_obj.default_image or Image.objects.order_by("slug").first()
        if image_obj is None:
            errors["image"] = ["No sandbox images are configured; ask an admin to add one."]

    sizes = {"cpu": cpu, "memory_gb": memory_gb, "storage_gb": storage_gb}
    for field, value in sizes.items():
        low, high = LIMITS[field]
        if value is not None and (not isinstance(value, int) or not low <= value <= high):
            errors[field] = [f"Must be a whole number from {low} to {high}."]

    if errors:
        first = next(iter(errors.values()))[0]
        raise ValidationFailed(first, fields=errors)

    assert team_obj and gpu_type_obj and lifetime_hours is not None
    count = 1 if shape is not None else int(count or 1)
    share = request_share(count=count, shape=shape, replicas=replicas)
    price = price_per_hour(gpu_type=gpu_type_obj, at=now)
    # A slice gets a quarter of the default CPUs (at least 2): it shares the node.
    base_cpu, base_memory, base_storage = (
        (image_obj.default_cpu, image_obj.default_memory_gb, image_obj.default_storage_gb)
        if image_obj
        else DEPLOYMENT_DEFAULTS
    )
    default_cpu = base_cpu if shape is None else max(2, base_cpu // 4)
    hourly = share_hourly_cost(price_per_gpu_hour=price, share=share)  # all replicas
    return ResolvedRequest(
        team=team_obj,
        name=name,
        image=image_obj,
        gpu_type=gpu_type_obj,
        count=count,
        mig_profile=mig_profile if shape else "",
        shape=shape,
        expires_at=resolved_expires,
        lifetime_hours=lifetime_hours,
        share=share,
        price_per_gpu_hour=price,
        hourly_cost=hourly,
        cpu=cpu if cpu is not None else default_cpu,
        memory_gb=memory_gb if memory_gb is not None else base_memory,
        storage_gb=storage_gb if storage_gb is not None else base_storage,
        purpose=(purpose or "")[:300],
        kind=kind,
        replicas=replicas,
        project=project,
        start_at=start_at,
    )
