"""Deployment API: request bodies checked for shape and type (the rules live in the services), and
the deployment as the API shows it: a sandbox's fields plus what it serves and where."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.core.serializers import HoursField, StrictCharField, StrictIntegerField, validated
from portal.deployments.selectors import (
    deployment_endpoint,
    deployment_example,
    deployment_placements,
    deployment_serving,
)
from portal.workloads.models import Workload, WorkloadState
from portal.workloads.selectors import workload_latest_approval
from portal.workloads.serializers import (
    WORKLOAD_COST_FIELDS,
    WORKLOAD_IDENTITY_FIELDS,
    WORKLOAD_STATUS_FIELDS,
    ApprovalBriefSerializer,
    GpuRequestSerializer,
    WorkloadRequestSerializer,
    WorkloadSerializer,
    approval_brief,
)


class DeploymentRequestSerializer(WorkloadRequestSerializer):
    model = StrictCharField(max_length=100, help_text="Catalog model slug, e.g. llama-3.1-8b-instruct.")
    gpu = GpuRequestSerializer(
        required=False,
        allow_null=True,
        help_text="`{type, count}` or `{type, mig_profile}`; left out: the cheapest GPU or slice that fits.",
    )
    replicas = StrictIntegerField(required=False, default=1, help_text="Copies of the server.")
    ttl_hours = HoursField(
        required=False, allow_null=True, help_text="Lifetime in hours (fractions allowed); 24 when left out."
    )
    dtype = StrictCharField(
        required=False, allow_null=True, allow_blank=True, max_length=20, help_text="Default: the model's."
    )
    context = StrictIntegerField(
        required=False, allow_null=True, help_text="Tokens per sequence; default 8192 or the model's maximum."
    )
    concurrency = StrictIntegerField(
        required=False, allow_null=True, help_text="Concurrent sequences the server is sized for; default 8."
    )

    def service_kwargs(self) -> dict[str, Any]:
        """The validated body as keyword arguments of `deployment_request`."""
        data = validated(self)
        gpu = data.get("gpu") or {}
        return {
            **self.common_kwargs(data),
            "model": data["model"],
            "gpu_type": gpu.get("type") or None,
            "count": gpu.get("count"),
            "mig_profile": gpu.get("mig_profile") or None,
            "replicas": data.get("replicas", 1),
            "dtype": data.get("dtype") or None,
            "context": data.get("context"),
            "concurrency": data.get("concurrency"),
        }


class ScaleSerializer(serializers.Serializer):
    replicas = StrictIntegerField(
        help_text="The number of replicas wanted; 0 keeps the deployment with nothing running or billed."
    )


class ReplicaPlacementSerializer(serializers.Serializer):
    """One replica: whole GPUs as `node` and `gpus`, or a slice as `node`, `gpu`, `mig_profile`,
    `start` (its first memory slot)."""

    replica = StrictIntegerField()
    node = StrictCharField()
    gpus = serializers.ListField(child=StrictIntegerField(), required=False)
    gpu = StrictIntegerField(required=False)
    mig_profile = StrictCharField(required=False)
    start = StrictIntegerField(required=False, allow_null=True)


class DeploymentApprovalSerializer(ApprovalBriefSerializer):
    kind = StrictCharField(help_text="create, extend or scale.")
    replicas = StrictIntegerField(allow_null=True, help_text="A scale request's target.")


class DeploymentSerializer(WorkloadSerializer):
    """A deployment as the API shows it. Expects the joins and prefetches of
    `deployments_with_details` and an optional `queue_positions` dict in the context."""

    model = StrictCharField(source="serving.model.slug", read_only=True)
    runtime = StrictCharField(source="serving.runtime.slug", read_only=True)
    api = StrictCharField(source="serving.api", read_only=True, help_text="openai or kserve-v2.")
    precision = StrictCharField(source="serving.precision", read_only=True)
    context = StrictIntegerField(source="serving.context", read_only=True)
    concurrency = StrictIntegerField(source="serving.concurrency", read_only=True)
    # Labelled by value, so the schema names this enum DeploymentStateEnum instead of colliding
    # with the sandbox's (same states, two components).
    # Running while a running deployment is rescaled (see scaling_from and scaling_to).
    state = serializers.ChoiceField(
        source="shown_state", choices=[(s.value, s.value) for s in WorkloadState], read_only=True
    )
    ready_replicas = serializers.SerializerMethodField()
    endpoint = serializers.SerializerMethodField()
    example = serializers.SerializerMethodField()

    class Meta:
        model = Workload
        fields = [
            *WORKLOAD_IDENTITY_FIELDS,
            "model",
            "runtime",
            "api",
            "precision",
            "context",
            "concurrency",
            "gpu",
            "replicas",
            "ready_replicas",
            "idle_parked_replicas",
            *WORKLOAD_STATUS_FIELDS,
            "endpoint",
            "example",
            *WORKLOAD_COST_FIELDS,
        ]
        read_only_fields = fields

    @extend_schema_field(StrictIntegerField())
    def get_ready_replicas(self, workload: Workload) -> int:
        serving = deployment_serving(workload)
        if serving is None or not workload.is_live:
            return 0
        return min(serving.ready_replicas, workload.replicas)  # not the ones being scaled away

    @extend_schema_field(DeploymentApprovalSerializer(allow_null=True))
    def get_approval(self, workload: Workload) -> dict[str, Any] | None:
        approval = workload_latest_approval(workload)
        return None if approval is None else {**approval_brief(approval), "replicas": approval.replicas}

    @extend_schema_field(ReplicaPlacementSerializer(many=True))
    def get_placement(self, workload: Workload) -> list[dict[str, Any]]:
        return deployment_placements(workload)

    @extend_schema_field(StrictCharField(allow_null=True, help_text="The URL clients call."))
    def get_endpoint(self, workload: Workload) -> str | None:
        return deployment_endpoint(workload)

    @extend_schema_field(
        StrictCharField(allow_null=True, help_text="A curl command that works against the endpoint.")
    )
    def get_example(self, workload: Workload) -> str | None:
        return deployment_example(workload)


class ServingFiguresSerializer(serializers.Serializer):
    seconds = serializers.FloatField(help_text="The span the figures cover.")
    tokens_per_second = serializers.FloatField(allow_null=True, help_text="Generated tokens per second.")
    prompt_tokens_per_second = serializers.FloatField(allow_null=True)
    requests_per_second = serializers.FloatField(allow_null=True)
    time_to_first_token_seconds = serializers.FloatField(allow_null=True, help_text="Mean.")
    request_latency_seconds = serializers.FloatField(allow_null=True, help_text="Mean, end to end.")
    cost_per_million_tokens = serializers.DecimalField(
        max_digits=16,
        decimal_places=2,
        allow_null=True,
        help_text="USD for a million generated tokens at the deployment's GPU price.",
    )
    cost_per_million_prompt_tokens = serializers.DecimalField(
        max_digits=16,
        decimal_places=2,
        allow_null=True,
        help_text="USD for a million prompt (input) tokens at the deployment's GPU price: the figure "
        "for an embedding model, which generates no tokens.",
    )


class ServingPointSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    tokens_per_second = serializers.FloatField(allow_null=True, help_text="Generated tokens per second.")
    prompt_tokens_per_second = serializers.FloatField(allow_null=True)
    requests_per_second = serializers.FloatField(allow_null=True)
    time_to_first_token_seconds = serializers.FloatField(allow_null=True)
    request_latency_seconds = serializers.FloatField(allow_null=True)


class ServingSerializer(serializers.Serializer):
    runtime = StrictCharField(help_text="vllm, tgi or triton.")
    not_reported = serializers.ListField(
        child=StrictCharField(),
        help_text="Figures the runtime's reads of the last hour did not carry (TGI: time to first token; "
        "Triton: tokens, unless its vLLM backend reports them). Null figures elsewhere mean nothing happened.",
    )
    read_error = StrictCharField(help_text="Why the last read failed, if it did.")
    last_minute = ServingFiguresSerializer(allow_null=True, help_text="The last read (about a minute).")
    last_hour = ServingFiguresSerializer(allow_null=True)
    points = ServingPointSerializer(many=True, help_text="Per `step` within [from, to).")
