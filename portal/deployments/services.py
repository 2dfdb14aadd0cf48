"""Deployments: serve a catalog model on the fleet, through the same quota, approval, placement,
metering and audit path as sandboxes, counting every replica."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from decimal import ROUND_UP, Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone

from portal.accounts.models import Team, User
from portal.accounts.selectors import can_manage, is_lead, refuse_owner_who_left
from portal.audit.services import audit_record
from portal.catalog.models import CatalogModel
from portal.catalog.runtimes import RUNTIMES, UnsupportedChoice, container_spec
from portal.catalog.selectors import entry_sizing, fleet_offers, sizing_request
from portal.catalog.sizing import Fit, Sizing, cache_gb
from portal.core.errors import Conflict, NotAllowed, ValidationFailed
from portal.core.jobs import enqueue
from portal.core.serializers import flat_errors
from portal.core.text import counted
from portal.deployments.models import Serving
from portal.fleet.models import Allocation, GpuType
from portal.fleet.placement import NoFit, place
from portal.fleet.selectors import gpu_snapshot
from portal.fleet.services import allocation_record, mig_layouts_free, placement_request
from portal.workloads.models import Approval, Workload, WorkloadKind, WorkloadState
from portal.workloads.policy import equivalents_text, fraction_to_decimal, replica_share, scale_verdict
from portal.workloads.presets import known_fields, register_preset_check
from portal.workloads.selectors import workload_get_for
from portal.workloads.services import (
    DRAIN_TASK,
    MAX_REPLICAS,
    RECONCILE_TASK,
    GpuAsk,
    Lifetime,
    WorkloadAsk,
    common_body,
    move,
    tell_deciders,
    workload_request,
    workload_scale_superseded,
)

DEFAULT_TTL_HOURS = 24
S = WorkloadState


def _entry(slug: str) -> CatalogModel:
    entry = CatalogModel.objects.select_related("runtime").filter(slug=slug, enabled=True).first()
    if entry is None:
        raise ValidationFailed(
            f"No catalog model {slug!r}.", fields={"model": [f"No catalog model {slug!r}."]}
        )
    return entry


def _choose_fit(
    entry: CatalogModel, sizing: Sizing, *, gpu_type: str | None, count: int | None, mig_profile: str | None
) -> Fit:
    """The GPU choice: the one asked for if the model fits it, else the cheapest fit."""
    if not sizing.fits:
        message = f"{entry.name} does not fit any GPU or MIG slice in the fleet at these settings."
        raise ValidationFailed(message, fields={"model": [message]})
    if not gpu_type:
        return sizing.fits[0]
    for fit in sizing.fits:
        if fit.gpu_type != gpu_type:
            continue
        if mig_profile and fit.mig_profile == mig_profile:
            return fit
        if not mig_profile and fit.mig_profile is None:
            if count is None or count == fit.gpus:
                return fit
            if count > fit.gpus and count in entry.shape().tensor_parallel_sizes():
                return replace(fit, gpus=count)
    fewest = next((f for f in sizing.fits if f.gpu_type == gpu_type and f.mig_profile is None), None)
    if mig_profile:
        message = f"{entry.name} does not fit a {gpu_type} {mig_profile} slice at these settings."
        field = "gpu.mig_profile"
    elif fewest is not None:
        message = f"{entry.name} needs at least {fewest.gpus} {gpu_type} GPUs at these settings."
        field = "gpu.count"
    else:
        message = f"{entry.name} does not fit on {gpu_type} at these settings."
        field = "gpu.type"
    raise ValidationFailed(message, fields={field: [message]})


def deployment_request(
    *,
    user: User,
    team: str,
    name: str,
    model: str,
    gpu_type: str | None = None,
    count: int | None = None,
    mig_profile: str | None = None,
    replicas: int = 1,
    ttl_hours: Decimal | float | None = None,
    expires_at: datetime | None = None,
    start_at: datetime | None = None,
    dtype: str | None = None,
    context: int | None = None,
    concurrency: int | None = None,
    purpose: str = "",
    project: str = "",
    now: datetime | None = None,
) -> Workload:
    """Deploy a catalog model: sized, placed (default: the cheapest fit) and served by replicas.

    Without a lifetime it lives DEFAULT_TTL_HOURS hours, like any other request it can be
    extended within the team's policy.
    """
    now = now or timezone.now()
    entry = _entry(model)
    request = sizing_request(entry, dtype=dtype, context=context, concurrency=concurrency)
    sizing = entry_sizing(entry, request, fleet_offers())
    fit = _choose_fit(entry, sizing, gpu_type=gpu_type, count=count, mig_profile=mig_profile)
    choice = entry.serving_choice(
        precision=request.precision, tensor_parallel=fit.gpus, context=request.context
    )
    try:
        container = container_spec(RUNTIMES[entry.runtime.slug], choice)
    except UnsupportedChoice as error:
        raise ValidationFailed(str(error), fields={"gpu": [str(error)]}) from None
    if ttl_hours in (None, "") and expires_at is None:
        ttl_hours = DEFAULT_TTL_HOURS

    def add_serving(workload: Workload) -> None:
        Serving.objects.create(
            workload=workload,
            model=entry,
            runtime=entry.runtime,
            precision=request.precision,
            context=request.context,
            concurrency=request.concurrency,
            image=container.image,
            command=container.command,
            port=container.port,
            health_path=container.health_path,
            readiness_path=container.readiness_path,
            api=entry.runtime.api,
        )

    ask = WorkloadAsk(
        kind=WorkloadKind.DEPLOYMENT,
        team=team,
        name=name,
        gpu=GpuAsk(
            type=fit.gpu_type, count=None if fit.mig_profile else fit.gpus, mig_profile=fit.mig_profile
        ),
        lifetime=Lifetime(ttl_hours=ttl_hours, expires_at=expires_at),
        purpose=purpose,
        project=project,
        replicas=replicas,
        start_at=start_at,
        # The cache the checkpoint downloads into: in its own dtype or the one served, the larger.
        storage_gb=cache_gb(entry.shape(), (request.precision, choice.default_dtype)),
    )
    return workload_request(user=user, ask=ask, now=now, before_placing=add_serving)


def deployment_request_body(*, user: User, deployment_id: int) -> dict[str, Any]:
    """The body of `POST /api/v1/deployments` that asks for this deployment again (any state),
    named `<name>-2`: same team, model, precision, context, concurrency, GPU, replicas, lifetime
    and project. A deployment scaled to zero by idle reclaim asks for the replicas it had."""
    workload = workload_get_for(user=user, workload_id=deployment_id, kind=WorkloadKind.DEPLOYMENT)
    serving = Serving.objects.select_related("model").get(workload=workload)
    return {
        **common_body(workload),
        "model": serving.model.slug,
        "dtype": serving.precision,
        "context": serving.context,
        "concurrency": serving.concurrency,
        "replicas": max(1, workload.idle_parked_replicas or workload.replicas),
    }


@transaction.atomic
def deployment_scale(
    *, user: User, deployment_id: int, replicas: int, now: datetime | None = None
) -> Workload:
    """Scale a live deployment. Up re-checks quota and policy (a lead decides beyond it) and
    needs free capacity now; down releases the extra replicas' GPUs at once; to zero keeps the
    deployment (its endpoint, its expiry) with no replica running and nothing billed."""
    now = now or timezone.now()
    workload = workload_get_for(user=user, workload_id=deployment_id, lock=True, kind=WorkloadKind.DEPLOYMENT)
    if not can_manage(user=user, team=workload.team, owner=workload.owner):
        raise NotAllowed("Only the owner, a lead of the team or an admin may scale this deployment.")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or not 0 <= replicas <= MAX_REPLICAS:
        message = f"Must be a whole number from 0 to {MAX_REPLICAS}."
        raise ValidationFailed(f"replicas: {message}", fields={"replicas": [message]})
    if workload.state not in (S.PROVISIONING, S.RUNNING):
        raise Conflict(
            f"Deployment {workload.name} is {workload.get_state_display().lower()}; only a live, placed one can be scaled."
        )
    if replicas == workload.replicas:  # what it has: nothing to do, but a waiting scale is undone
        workload_scale_superseded(workload=workload, actor=user, replicas=replicas, now=now)
        return workload
    if replicas < workload.replicas:
        deployment_apply_scale(workload=workload, replicas=replicas, actor=user, now=now)
        return workload
    refuse_owner_who_left(user=user, team=workload.team, owner=workload.owner, doing="scale up")
    team = _lock_team(workload)
    decision = scale_verdict(workload=workload, team=team, replicas=replicas, now=now).enforce()
    deciding_lead = user.pk != workload.owner_id and (user.is_platform_admin or is_lead(user=user, team=team))
    if decision.auto_approved or deciding_lead:
        deployment_apply_scale(workload=workload, replicas=replicas, actor=user, now=now)
        return workload
    if Approval.objects.filter(
        workload=workload, kind=Approval.Kind.SCALE, state=Approval.State.PENDING
    ).exists():
        raise Conflict("A scale request for this deployment already waits for a lead.")
    share = replica_share(workload) * replicas
    approval = Approval.objects.create(
        workload=workload,
        team=team,
        kind=Approval.Kind.SCALE,
        requested_by=user,
        why_needed=decision.why_needed,
        replicas=replicas,
    )
    audit_record(
        actor=user,
        action="deployment.scale_requested",
        obj=workload,
        team=team,
        detail=f"{workload.replicas} → {replicas} replicas ({equivalents_text(fraction_to_decimal(share), ROUND_UP)} GPU equivalents)",
    )
    tell_deciders(
        approval=approval,
        message=f"{user.username} asks to scale {workload.name} to {counted(replicas, 'replica')}. {decision.why_needed}",
    )
    return workload


def _lock_team(workload: Workload) -> Team:
    """Lock the team row: quota checks of one team run one at a time."""
    return Team.objects.select_for_update(no_key=True).get(pk=workload.team_id)


def deployment_apply_scale(*, workload: Workload, replicas: int, actor: User | None, now: datetime) -> None:
    """Place the added replicas now (all or none) and hand the deployment to the reconciler.
    Quota is checked again here: a lead may approve long after the request was made. Any scale
    still waiting for a lead is withdrawn: what is applied now supersedes it (the one a lead
    approves is no longer waiting)."""
    workload_scale_superseded(workload=workload, actor=actor, replicas=replicas, now=now)
    if replicas <= workload.replicas:
        _scale_down(workload, replicas=replicas, actor=actor, now=now)
        return
    scale_verdict(workload=workload, team=_lock_team(workload), replicas=replicas, now=now).enforce()
    gpu_type = GpuType.objects.select_for_update().get(pk=workload.gpu_type_id)
    request = placement_request(gpu_type=gpu_type, count=workload.gpu_count, mig_profile=workload.mig_profile)
    for replica in range(workload.replicas, replicas):
        decision = place(gpu_snapshot(gpu_type=gpu_type, now=now), request)
        if isinstance(decision, NoFit):
            raise Conflict(
                f"No capacity for {counted(replicas - workload.replicas, 'more replica')} now: {decision.reason}."
            )
        allocation_record(
            holder=workload, gpu_type=gpu_type, request=request, decision=decision, now=now, replica=replica
        )
    _rescaled(workload, replicas=replicas, actor=actor, now=now)


def _scale_down(workload: Workload, *, replicas: int, actor: User | None, now: datetime) -> None:
    # Billing of the replicas scaled away stops now; their GPUs are freed once the reconciler
    # has removed their objects from the cluster (deployment_release_scaled_away).
    Allocation.objects.filter(
        workload=workload, replica__gte=replicas, released_at__isnull=True, ended_at__isnull=True
    ).update(ended_at=now)
    _rescaled(workload, replicas=replicas, actor=actor, now=now)


def _rescaled(workload: Workload, *, replicas: int, actor: User | None, now: datetime) -> None:
    previous = workload.replicas
    if workload.idle_warned_at is not None:  # a scale is its owner's word on it, as Keep it is
        Workload.objects.filter(pk=workload.pk).update(idle_warned_at=None, idle_kept_at=now)
        workload.idle_warned_at, workload.idle_kept_at = None, now
    if replicas and workload.idle_parked_replicas is not None:
        Workload.objects.filter(pk=workload.pk).update(idle_parked_replicas=None)  # serving again
        workload.idle_parked_replicas = None
    # A running deployment keeps serving while its replicas change: it shows as running, scaling
    # from the replicas it served (kept across a second scale before the first is done).
    scaling_from = previous if workload.state == S.RUNNING else workload.scaling_from
    move(
        workload=workload,
        to=S.PROVISIONING,
        from_states=[S.PROVISIONING, S.RUNNING],
        actor=actor,
        event="scaled",
        detail=f"{previous} → {replicas} replicas",
        replicas=replicas,
        scaling_from=scaling_from,
        message=f"Scaling from {scaling_from if scaling_from is not None else previous} to {counted(replicas, 'replica')}.",
        attempts=0,
        next_attempt_at=None,  # due at once
    )
    enqueue(RECONCILE_TASK, workload.pk)


def deployment_observed(
    *,
    deployment_id: int,
    ready_replicas: int,
    now: datetime,
    message: str | None = None,
    recheck_seconds: float | None = None,
) -> None:
    """Record what the cluster says of a deployment's replicas (and when to look again)."""
    Serving.objects.filter(workload_id=deployment_id).update(ready_replicas=ready_replicas, checked_at=now)
    changes: dict = {}
    if message is not None:
        changes["message"] = message[:500]
    if recheck_seconds is not None:
        changes["next_attempt_at"] = now + timedelta(seconds=recheck_seconds)
    if changes:
        Workload.objects.filter(pk=deployment_id, state=S.RUNNING).update(**changes)


@transaction.atomic
def deployment_release_scaled_away(*, deployment_id: int, now: datetime) -> int:
    """The cluster no longer runs the replicas scaled away: free their GPUs for others.

    Its own transaction, as the GPU type lock needs one (the worker calls it outside any). Lock
    order, as everywhere: the workload row (a scale in flight waits), then the GPU type.
    """
    workload = Workload.objects.select_for_update(of=("self",)).get(pk=deployment_id)
    # On a live deployment an ended but unreleased hold is a replica scaled away (even if the
    # deployment was scaled up again meanwhile and its replica number reused).
    extra = Allocation.objects.filter(workload=workload, ended_at__isnull=False, released_at__isnull=True)
    if not extra.exists():
        return 0
    GpuType.objects.select_for_update().filter(pk=workload.gpu_type_id).first()
    gpu_ids = list(extra.values_list("gpu_id", flat=True))
    released = extra.update(released_at=now)
    mig_layouts_free(gpu_ids=gpu_ids)  # hands any freed MIG layout to the nodes' MIG job
    enqueue(DRAIN_TASK)
    return released


def deployment_body_check(user: User, body: dict[str, Any]) -> dict[str, Any]:
    """A deployment preset's body checked as far as a request can be without placing it: its
    shape, the team (one of the user's), the catalog model, the GPU type; without a start time."""
    from portal.deployments.serializers import DeploymentRequestSerializer

    serializer = DeploymentRequestSerializer(data={"name": "", **body})
    if not serializer.is_valid():
        errors = flat_errors(serializer.errors)
        field, problems = next(iter(errors.items()), ("body", ["is not valid"]))
        raise ValidationFailed(f"{field}: {problems[0]}", fields=errors)
    kwargs = serializer.service_kwargs()
    if not user.memberships.filter(team__slug=kwargs["team"]).exists():
        message = f"You are not a member of a team called {kwargs['team']!r}."
        raise ValidationFailed(message, fields={"team": [message]})
    _entry(kwargs["model"])
    if kwargs["gpu_type"] and not GpuType.objects.filter(slug=kwargs["gpu_type"]).exists():
        message = f"Unknown GPU type {kwargs['gpu_type']!r}."
        raise ValidationFailed(message, fields={"gpu.type": [message]})
    return known_fields(serializer.fields, body, leave_out=("start_at",))


register_preset_check(WorkloadKind.DEPLOYMENT, deployment_body_check)
