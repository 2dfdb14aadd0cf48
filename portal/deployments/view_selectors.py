"""Reads the deployment pages need on top of the selectors: table rows with costs and replica
health, the detail row, the GPU choices of the deploy form and its estimate."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import QuerySet
from django.utils import timezone

from portal.accounts.models import Team, User
from portal.catalog.sizing import Fit
from portal.core.errors import ValidationFailed
from portal.deployments.models import Serving
from portal.deployments.selectors import (
    deployment_endpoint,
    deployment_example,
    deployment_get_for,
    deployment_placements,
    deployment_serving,
    deployments_visible_to,
    deployments_with_details,
)
from portal.fleet.models import GpuType
from portal.spend.selectors import team_month_spend, to_cents
from portal.workloads.models import Approval, Workload
from portal.workloads.policy import fraction_to_decimal, request_share, team_committed, verdict
from portal.workloads.selectors import common_row_fields, in_scope, placement_label


@dataclass(frozen=True)
class DeploymentRow:
    """One deployment as the list or the detail page shows it."""

    deployment: Workload
    serving: Serving | None
    cost_so_far: Decimal
    hourly_cost: Decimal
    placements: list[dict]
    queue_position: int | None
    approval: Approval | None
    endpoint: str | None
    example: str | None

    @property
    def ready_replicas(self) -> int:
        """Ready replicas of those wanted (ones being scaled away are not counted)."""
        if self.serving is None or not self.deployment.is_live:
            return 0
        return min(self.serving.ready_replicas, self.deployment.replicas)

    @property
    def all_ready(self) -> bool:
        return self.ready_replicas == self.deployment.replicas

    @property
    def replica_health(self) -> str:
        """'2 of 2 ready'."""
        return f"{self.ready_replicas} of {self.deployment.replicas} ready"

    @property
    def placement_labels(self) -> list[str]:
        return [f"replica {p['replica']}: {placement_label(p)}" for p in self.placements]

    @property
    def pending_scale(self) -> Approval | None:
        """A scale request that waits for a lead."""
        approval = self.approval
        if approval and approval.kind == Approval.Kind.SCALE and approval.state == Approval.State.PENDING:
            return approval
        return None


def dashboard_deployments(*, user: User, scope: str) -> QuerySet[Workload]:
    """The list's deployments in `scope` (see `in_scope`), with what their rows show joined."""
    return deployments_with_details(in_scope(deployments_visible_to(user), user=user, scope=scope))


def deployment_rows(workloads: list[Workload], *, now: datetime | None = None) -> list[DeploymentRow]:
    """Rows for deployments fetched with `deployments_with_details`: one more query for queue places."""
    return [
        DeploymentRow(
            deployment=workload,
            serving=deployment_serving(workload),
            placements=deployment_placements(workload),
            endpoint=deployment_endpoint(workload),
            example=deployment_example(workload),
            **costs,
        )
        for workload, costs in zip(workloads, common_row_fields(workloads, now=now), strict=True)
    ]


def deployment_row_for(*, user: User, deployment_id: int) -> DeploymentRow:
    """The detail page's deployment; NotFound when the user may not see it."""
    return deployment_rows([deployment_get_for(user=user, deployment_id=deployment_id)])[0]


# --- The deploy form: GPU choices and the estimate ------------------------------------------------


def fit_value(fit: Fit) -> str:
    """A fit as a form value: 'h100-80gb/2' (whole GPUs) or 'h100-80gb/3g.40gb' (a slice)."""
    return f"{fit.gpu_type}/{fit.mig_profile or fit.gpus}"


def fit_what(fit: Fit) -> str:
    """'1x h100-80gb (80 GB)' or '3g.40gb slice of h100-80gb'."""
    if fit.mig_profile:
        return f"{fit.mig_profile} slice of {fit.gpu_type}"
    return f"{fit.gpus}x {fit.gpu_type} ({fit.memory_gb} GB)"


def fit_label(fit: Fit) -> str:
    """'1x h100-80gb (80 GB) · $6.88/h per replica'."""
    return f"{fit_what(fit)} · ${fit.price_per_hour}/h per replica"


def parse_fit_value(value: str) -> tuple[str, int | None, str | None]:
    """(gpu_type, count, mig_profile) of a form value; ('', None, None) for the cheapest fit."""
    gpu_type, _, rest = (value or "").partition("/")
    if not gpu_type:
        return "", None, None
    if rest.isdigit():
        return gpu_type, int(rest), None
    return gpu_type, None, rest or None


def chosen_fit(fits: tuple[Fit, ...], value: str) -> Fit | None:
    """The fit a form value names, the cheapest for '', None when it no longer fits."""
    if not value:
        return fits[0] if fits else None
    return next((fit for fit in fits if fit_value(fit) == value), None)


@dataclass(frozen=True)
class DeployEstimate:
    """What a deployment of `replicas` copies of `fit` costs, and whether it is approved at once."""

    fit: Fit
    replicas: int
    lifetime_hours: Decimal
    hourly_cost: Decimal
    total_cost: Decimal
    gpu_equivalents: Decimal
    quota_left: Decimal
    fits_quota: bool
    auto_approved: bool
    why_needed: str

    @property
    def fit_what(self) -> str:
        return fit_what(self.fit)


def deploy_estimate(
    *, user: User, team: str, fit: Fit, replicas: int, lifetime_hours: Decimal, now: datetime | None = None
) -> DeployEstimate:
    """The fit's price x replicas, and the team's auto-approval lines applied as the service will."""
    now = now or timezone.now()
    team_obj = Team.objects.filter(slug=team, memberships__user=user).first()
    if team_obj is None:
        message = f"You are not a member of a team called {team!r}."
        raise ValidationFailed(message, fields={"team": [message]})
    if lifetime_hours > team_obj.max_lifetime_hours:
        message = f"Team {team_obj.slug} allows at most {team_obj.max_lifetime_hours.normalize():f} hours."
        raise ValidationFailed(message, fields={"ttl_hours": [message]})
    gpu_type = GpuType.objects.get(slug=fit.gpu_type)
    shape = gpu_type.model.profile(fit.mig_profile) if fit.mig_profile and gpu_type.model else None
    share = fraction_to_decimal(request_share(count=fit.gpus, shape=shape, replicas=replicas))
    quota_left = team_obj.quota_gpus - fraction_to_decimal(team_committed(team_obj))
    hourly = fit.price_per_hour * replicas
    decision = verdict(
        team=team_obj,
        count=fit.gpus,
        is_slice=fit.mig_profile is not None,
        lifetime_hours=lifetime_hours,
        hourly_cost=hourly,
        budget_left=team_obj.monthly_budget - team_month_spend(team=team_obj, now=now),
        replicas=replicas,
    )
    return DeployEstimate(
        fit=fit,
        replicas=replicas,
        lifetime_hours=lifetime_hours,
        hourly_cost=to_cents(hourly),
        total_cost=to_cents(hourly * lifetime_hours),
        gpu_equivalents=share,
        quota_left=quota_left,
        fits_quota=share <= quota_left,
        auto_approved=decision.auto_approved,
        why_needed=decision.why_needed,
    )
