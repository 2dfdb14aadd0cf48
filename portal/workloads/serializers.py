"""The API shape every workload shares (a sandbox's or a deployment's serializer builds on it), the
GPU part of a request, and /me with the quota and budget left in each team."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.accounts.selectors import member_team_ids
from portal.core.serializers import HoursField, StrictBooleanField, StrictCharField, StrictIntegerField, money
from portal.workloads.models import PROJECT_HELP, PROJECT_MAX_LENGTH, Approval, Workload, WorkloadState
from portal.workloads.selectors import (
    TeamStanding,
    workload_actions_for,
    workload_allowed_actions,
    workload_cost_so_far,
    workload_hourly_cost,
    workload_latest_approval,
)

ACTIONS = [
    "withdraw", "withdraw_extension", "withdraw_scale", "extend", "scale", "restart", "terminate", "keep",
    "scale_back",
]  # fmt: skip


class ExtendSerializer(serializers.Serializer):
    hours = HoursField(help_text="Hours to add to the expiry.")


class GpuSerializer(serializers.Serializer):
    type = StrictCharField()
    count = StrictIntegerField()
    mig_profile = StrictCharField(allow_null=True)
    label = StrictCharField()


class ApprovalBriefSerializer(serializers.Serializer):
    id = StrictIntegerField()
    kind = StrictCharField()
    state = StrictCharField()
    decided_by = StrictCharField(allow_null=True)
    comment = StrictCharField()


class PlacementSerializer(serializers.Serializer):
    """Whole GPUs: `node` and `gpus` (indexes). A slice: `node`, `gpu`, `mig_profile`, `start`."""

    node = StrictCharField()
    gpus = serializers.ListField(child=StrictIntegerField(), required=False)
    gpu = StrictIntegerField(required=False)
    mig_profile = StrictCharField(required=False)
    start = StrictIntegerField(required=False, allow_null=True)


def gpu_summary(sandbox: Workload) -> dict[str, Any]:
    return {
        "type": sandbox.gpu_type.slug,
        "count": sandbox.gpu_count,
        "mig_profile": sandbox.mig_profile or None,
        "label": sandbox.gpu_label,
    }


def approval_brief(approval: Approval) -> dict[str, Any]:
    return {
        "id": approval.pk,
        "kind": approval.kind,
        "state": approval.state,
        "decided_by": approval.decided_by.username if approval.decided_by else None,
        "comment": approval.comment,
    }


# Fields every workload shows, in this order, between its kind's own: where it stands (state, times,
# approval, placement, access), then what it costs with its notes (message, purpose, why placed).
WORKLOAD_IDENTITY_FIELDS = ["id", "name", "team", "owner"]
WORKLOAD_STATUS_FIELDS = [
    "state",
    "scaling_from",
    "scaling_to",
    "allowed_actions",
    "lifetime_hours",
    "expires_at",
    "start_at",
    "created_at",
    "started_at",
    "degraded_since",
    "idle_warned_at",
    "idle_reclaim_at",
    "ended_at",
    "approval",
    "placement",
    "access",
    "access_problem",
]


WORKLOAD_COST_FIELDS = [
    "cost_so_far",
    "hourly_cost",
    "message",
    "queue_position",
    "estimated_wait_seconds",
    "estimated_start_at",
    "purpose",
    "project",
    "placement_reason",
]


class WorkloadSerializer(serializers.ModelSerializer):
    """What a sandbox and a deployment show alike: who, which GPU, the latest approval, access,
    cost and queue place. A subclass declares its Meta and `get_placement`."""

    id = serializers.IntegerField(
        source="number",
        read_only=True,
        help_text="Its number within its kind (sandbox 12, deployment 3): the {id} of its paths and its page.",
    )
    team = StrictCharField(source="team.slug", read_only=True)
    owner = StrictCharField(source="owner.username", read_only=True)
    state = serializers.ChoiceField(
        source="shown_state",
        choices=WorkloadState.choices,
        read_only=True,
        help_text="Where it stands; a running deployment being scaled stays running (see scaling_from).",
    )
    scaling_from = serializers.SerializerMethodField()
    scaling_to = serializers.SerializerMethodField()
    access_problem = serializers.SerializerMethodField()
    idle_reclaim_at = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text=(
            "Warned of idleness (idle_warned_at): when a sandbox is ended, or a deployment scaled to "
            "zero, unless kept (POST .../keep); null otherwise."
        ),
    )
    allowed_actions = serializers.SerializerMethodField()
    lifetime_hours = serializers.DecimalField(
        max_digits=12,
        decimal_places=2,
        read_only=True,
        help_text="How long it runs, counted from when it starts running (extensions included).",
    )
    expires_at = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text="When it ends: null until it starts running (then started_at + lifetime_hours), "
        "unless the request named its end.",
    )
    start_at = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text="A scheduled start: it waits `queued` (its quota held) and is not placed before then.",
    )
    gpu = serializers.SerializerMethodField()
    approval = serializers.SerializerMethodField()
    placement = serializers.SerializerMethodField()
    access = serializers.SerializerMethodField()
    cost_so_far = serializers.SerializerMethodField()
    hourly_cost = serializers.SerializerMethodField()
    queue_position = serializers.SerializerMethodField()
    estimated_wait_seconds = serializers.SerializerMethodField()
    estimated_start_at = serializers.SerializerMethodField()

    @extend_schema_field(StrictIntegerField(allow_null=True))
    def get_scaling_from(self, workload: Workload) -> int | None:
        """While a running deployment is rescaled: the replicas it served before."""
        return workload.scaling_from if workload.is_scaling else None

    @extend_schema_field(StrictCharField())
    def get_access_problem(self, workload: Workload) -> str:
        """While it runs: why the worker's last update of its route, quota or SSH keys failed
        (tried again every 30 s); empty when it went well."""
        return workload.shown_access_problem

    @extend_schema_field(StrictIntegerField(allow_null=True))
    def get_scaling_to(self, workload: Workload) -> int | None:
        """While a running deployment is rescaled: the replicas it goes to."""
        return workload.replicas if workload.is_scaling else None

    @extend_schema_field(serializers.ListField(child=serializers.ChoiceField(choices=ACTIONS)))
    def get_allowed_actions(self, workload: Workload) -> list[str]:
        """What can be done to it now and succeed (the others answer 409; 403 for an owner no
        longer in the team, who is not offered what only spends)."""
        actions = workload_allowed_actions(workload)
        request = self.context.get("request")
        if request is None or not request.user.is_authenticated or request.user.pk != workload.owner_id:
            return actions
        if "member_team_ids" not in self.context:  # read once for a whole list
            self.context["member_team_ids"] = member_team_ids(request.user)
        return workload_actions_for(
            actions, user=request.user, workload=workload, team_ids=self.context["member_team_ids"]
        )

    @extend_schema_field(GpuSerializer)
    def get_gpu(self, workload: Workload) -> dict[str, Any]:
        return gpu_summary(workload)

    @extend_schema_field(ApprovalBriefSerializer(allow_null=True))
    def get_approval(self, workload: Workload) -> dict[str, Any] | None:
        approval = workload_latest_approval(workload)
        return None if approval is None else approval_brief(approval)

    @extend_schema_field(StrictCharField(allow_null=True))
    def get_access(self, workload: Workload) -> str | None:
        return workload.access or None

    @extend_schema_field(money())
    def get_cost_so_far(self, workload: Workload) -> str:
        return str(workload_cost_so_far(workload))

    @extend_schema_field(money())
    def get_hourly_cost(self, workload: Workload) -> str:
        return str(workload_hourly_cost(workload))

    @extend_schema_field(StrictIntegerField(allow_null=True))
    def get_queue_position(self, workload: Workload) -> int | None:
        return self.context.get("queue_positions", {}).get(workload.pk)

    @extend_schema_field(StrictIntegerField(allow_null=True))
    def get_estimated_wait_seconds(self, workload: Workload) -> int | None:
        """While queued: about how long until it is placed, from the queue ahead of it and the
        expiries of what holds its GPUs; null when not queued or when nothing scheduled frees room."""
        wait = self.context.get("queue_waits", {}).get(workload.pk)
        return None if wait is None else wait.seconds

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_estimated_start_at(self, workload: Workload) -> str | None:
        """While queued: when it is likely to be placed (now + estimated_wait_seconds), or null."""
        wait = self.context.get("queue_waits", {}).get(workload.pk)
        if wait is None or wait.start_at is None:
            return None
        return serializers.DateTimeField().to_representation(wait.start_at)


class GpuRequestSerializer(serializers.Serializer):
    """`{"type", "count"}` for whole GPUs or `{"type", "mig_profile"}` for one MIG slice."""

    type = StrictCharField(max_length=50, help_text="GPU type slug, e.g. h100-80gb.")
    count = StrictIntegerField(
        required=False, allow_null=True, help_text="Whole GPUs (default 1). Leave out for a MIG slice."
    )
    mig_profile = StrictCharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=30,
        help_text="A MIG profile of the type, e.g. 1g.10gb, for one slice.",
    )


class WorkloadRequestSerializer(serializers.Serializer):
    """What every request body has: a name, a team, a lifetime (ttl_hours or expires_at) and a
    purpose. A kind's serializer adds its own fields and turns the body into its service's
    arguments with `common_kwargs` and its own."""

    name = StrictCharField(max_length=63, allow_blank=True)
    team = StrictCharField(max_length=50, help_text="Team slug.")
    ttl_hours = HoursField(
        required=False, allow_null=True, help_text="Lifetime in hours (fractions allowed)."
    )
    expires_at = serializers.DateTimeField(
        required=False, allow_null=True, help_text="Or: when it ends, at least a minute ahead."
    )
    start_at = serializers.DateTimeField(
        required=False,
        allow_null=True,
        help_text="Start later: not placed before this time (5 minutes to 30 days ahead). Its quota "
        "is held from the request; the lifetime counts from when it starts running.",
    )
    purpose = StrictCharField(required=False, allow_blank=True, max_length=300, default="")
    project = StrictCharField(
        required=False, allow_blank=True, max_length=PROJECT_MAX_LENGTH, default="", help_text=PROJECT_HELP
    )

    @staticmethod
    def common_kwargs(data: dict[str, Any]) -> dict[str, Any]:
        return {
            "team": data["team"],
            "name": data["name"],
            "ttl_hours": data.get("ttl_hours"),
            "expires_at": data.get("expires_at"),
            "start_at": data.get("start_at"),
            "purpose": data.get("purpose") or "",
            "project": data.get("project") or "",
        }


class QuotaSerializer(serializers.Serializer):
    """GPU equivalents: a whole GPU is 1, a MIG slice its share by PORTAL_MIG_SHARE_RULE."""

    total = serializers.DecimalField(max_digits=10, decimal_places=3, source="quota_total")
    used = serializers.DecimalField(max_digits=10, decimal_places=3, source="quota_used")
    left = serializers.DecimalField(max_digits=10, decimal_places=3, source="quota_left")


class BudgetSerializer(serializers.Serializer):
    """This calendar month (UTC), in USD."""

    currency = serializers.SerializerMethodField()
    monthly = serializers.DecimalField(max_digits=14, decimal_places=2, source="budget_monthly")
    spent = serializers.DecimalField(max_digits=14, decimal_places=2, source="budget_spent")
    left = serializers.DecimalField(max_digits=14, decimal_places=2, source="budget_left")

    def get_currency(self, standing: TeamStanding) -> str:
        return "USD"


class PolicySerializer(serializers.Serializer):
    max_lifetime_hours = serializers.DecimalField(max_digits=8, decimal_places=2)
    auto_approve_max_gpus = StrictIntegerField()
    auto_approve_max_hours = serializers.DecimalField(max_digits=8, decimal_places=2)


class TeamStandingSerializer(serializers.Serializer):
    slug = StrictCharField(source="team.slug")
    name = StrictCharField(source="team.name")
    role = StrictCharField()
    quota = serializers.SerializerMethodField()
    budget = serializers.SerializerMethodField()
    policy = PolicySerializer(source="team")
    projects = serializers.ListField(
        child=StrictCharField(),
        help_text="Project labels the team uses, to use the same: of its project budgets and of the work you may see in it.",
    )

    @extend_schema_field(QuotaSerializer)
    def get_quota(self, standing: TeamStanding) -> dict[str, Any]:
        return QuotaSerializer(standing).data

    @extend_schema_field(BudgetSerializer)
    def get_budget(self, standing: TeamStanding) -> dict[str, Any]:
        return BudgetSerializer(standing).data


class MeSerializer(serializers.Serializer):
    id = StrictIntegerField()
    username = StrictCharField()
    name = StrictCharField(source="get_full_name")
    email = serializers.EmailField()
    is_platform_admin = StrictBooleanField()
    teams = serializers.SerializerMethodField()

    @extend_schema_field(TeamStandingSerializer(many=True))
    def get_teams(self, user: Any) -> list[dict[str, Any]]:
        return TeamStandingSerializer(self.context["standings"], many=True).data


class PresetSerializer(serializers.Serializer):
    """A saved request form: `team` is null for a personal one."""

    id = StrictIntegerField()
    kind = StrictCharField()
    name = StrictCharField()
    team = StrictCharField(source="team.slug", allow_null=True, default=None)
    created_by = StrictCharField(source="created_by.username")
    created_at = serializers.DateTimeField()
    body = serializers.JSONField(help_text="A request body of its kind, without a name or start time.")


class PresetCreateSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["sandbox", "deployment"])
    name = StrictCharField(max_length=60)
    team = StrictCharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=50,
        help_text="Team-wide (its leads only).",
    )
    body = serializers.JSONField(
        help_text="What `POST /api/v1/sandboxes` (or deployments) takes; a name is not kept."
    )
