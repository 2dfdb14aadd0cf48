"""Sandbox API: the request body checked for shape and type (the rules live in the services), the
sandbox as the API shows it, and the estimate."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.core.serializers import StrictBooleanField, StrictCharField, StrictIntegerField, money, validated
from portal.sandboxes.gate import sandbox_app_url
from portal.sandboxes.selectors import home_monthly_cost, ssh_host_key_of
from portal.workloads.models import Workload
from portal.workloads.selectors import (
    workload_placement,
)
from portal.workloads.serializers import (
    WORKLOAD_COST_FIELDS,
    WORKLOAD_IDENTITY_FIELDS,
    WORKLOAD_STATUS_FIELDS,
    GpuRequestSerializer,
    PlacementSerializer,
    WorkloadRequestSerializer,
    WorkloadSerializer,
)


class SandboxRequestSerializer(WorkloadRequestSerializer):
    gpu = GpuRequestSerializer()
    image = StrictCharField(
        required=False, allow_null=True, allow_blank=True, max_length=50, help_text="Image slug."
    )
    cpu = StrictIntegerField(required=False, allow_null=True)
    memory_gb = StrictIntegerField(required=False, allow_null=True)
    storage_gb = StrictIntegerField(required=False, allow_null=True)
    datasets = serializers.ListField(
        child=serializers.SlugField(max_length=40),
        required=False,
        max_length=50,
        help_text="Slugs of team datasets to mount read-only at /data/<slug>.",
    )

    def service_kwargs(self) -> dict[str, Any]:
        """The validated body as keyword arguments of `sandbox_request` / `sandbox_estimate`."""
        data = validated(self)
        gpu = data["gpu"]
        return {
            **self.common_kwargs(data),
            "gpu_type": gpu["type"],
            "count": gpu.get("count"),
            "mig_profile": gpu.get("mig_profile") or "",
            "image": data.get("image") or None,
            "cpu": data.get("cpu"),
            "memory_gb": data.get("memory_gb"),
            "storage_gb": data.get("storage_gb"),
            "datasets": list(data.get("datasets") or []),
        }


class SshHostKeySerializer(serializers.Serializer):
    public_key = StrictCharField(help_text="ssh-ed25519 AAAA…")
    fingerprint = StrictCharField(help_text="SHA256:…")


class SandboxSerializer(WorkloadSerializer):
    """A sandbox as the API shows it. Expects the prefetches of `workloads_with_details` and an
    optional `queue_positions` dict in the context."""

    image = StrictCharField(source="image.slug", read_only=True)
    shared_with = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="username", help_text="Team members who may open it too."
    )
    datasets = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="slug", help_text="Team datasets mounted at /data/<slug>."
    )
    open_url = serializers.SerializerMethodField(
        help_text="Opens the sandbox's JupyterLab or VS Code in a browser, through the portal's sign-in; "
        "null unless it is running with a web app."
    )
    ssh_host_key = serializers.SerializerMethodField(
        help_text="An ssh sandbox's server host key (`public_key` as known_hosts holds it, `fingerprint` "
        "as ssh shows it on first connecting); null for a web sandbox, one not placed yet, or one ended."
    )

    class Meta:
        model = Workload
        fields = [
            *WORKLOAD_IDENTITY_FIELDS,
            "image",
            "gpu",
            *WORKLOAD_STATUS_FIELDS,
            *WORKLOAD_COST_FIELDS,
            "cpu",
            "memory_gb",
            "storage_gb",
            "shared_with",
            "datasets",
            "open_url",
            "ssh_host_key",
        ]
        read_only_fields = fields

    @extend_schema_field(SshHostKeySerializer(allow_null=True))
    def get_ssh_host_key(self, sandbox: Workload) -> dict[str, str] | None:
        key = ssh_host_key_of(sandbox)
        return None if key is None else {"public_key": key.public_key, "fingerprint": key.fingerprint}

    def get_open_url(self, sandbox: Workload) -> str | None:
        path = sandbox_app_url(sandbox)
        return f"{settings.PORTAL_BASE_URL}{path}" if path else None

    @extend_schema_field(PlacementSerializer(allow_null=True))
    def get_placement(self, sandbox: Workload) -> dict[str, Any] | None:
        return workload_placement(sandbox)


class EstimateSerializer(serializers.Serializer):
    hourly_cost = money()
    total_cost = money()
    gpu_equivalents = serializers.DecimalField(max_digits=10, decimal_places=3)
    quota_left = serializers.DecimalField(max_digits=10, decimal_places=3)
    fits_quota = StrictBooleanField()
    auto_approved = StrictBooleanField()
    why_needed = StrictCharField()
    capacity_free_now = StrictBooleanField()
    starts_at = serializers.DateTimeField(
        allow_null=True, help_text="A scheduled start; the quota is held from the request until it ends."
    )


class SharedSandboxSerializer(serializers.ModelSerializer):
    """A running sandbox its owner shares with you: what it is and where to open it."""

    id = serializers.IntegerField(
        source="number", read_only=True, help_text="Its number: the {id} of its paths."
    )
    team = StrictCharField(source="team.slug", read_only=True)
    owner = StrictCharField(source="owner.username", read_only=True)
    gpu = StrictCharField(source="gpu_label", read_only=True, help_text="What it holds, as its pages say it.")
    open_url = serializers.SerializerMethodField()

    class Meta:
        model = Workload
        fields = ["id", "name", "team", "owner", "gpu", "started_at", "expires_at", "open_url"]
        read_only_fields = fields

    @extend_schema_field(StrictCharField(allow_null=True))
    def get_open_url(self, sandbox: Workload) -> str | None:
        """Its app (JupyterLab, VS Code) through the portal's sign-in check, which lets you in."""
        path = sandbox_app_url(sandbox)
        return f"{settings.PORTAL_BASE_URL}{path}" if path else None


class SharingSerializer(serializers.Serializer):
    users = serializers.ListField(
        child=StrictCharField(max_length=150),
        max_length=200,
        help_text="Usernames of team members who may open the sandbox besides its owner; replaces the list.",
    )


class EventLineSerializer(serializers.Serializer):
    at = StrictCharField()
    type = StrictCharField()
    reason = StrictCharField()
    message = StrictCharField()
    object = StrictCharField()


class InsightSerializer(serializers.Serializer):
    """What a worker last read of a sandbox's pod."""

    requested_at = serializers.DateTimeField(allow_null=True)
    read_at = serializers.DateTimeField(allow_null=True)
    pending = StrictBooleanField(help_text="A fresh read was asked for and has not come yet.")
    events = EventLineSerializer(many=True, help_text="The newest events of its namespace, oldest first.")
    log_tail = StrictCharField(help_text="The last lines of the pod's log.")
    error = StrictCharField(help_text="Why the last read failed, if it did.")


class KubeconfigSerializer(serializers.Serializer):
    """The owner's kubeconfig for a sandbox: `pending` while a worker asks the cluster for a
    token, `ready` with the file, `failed` with the reason, `none` before any was asked for."""

    state = serializers.ChoiceField(choices=["none", "pending", "ready", "failed"])
    expires_at = serializers.DateTimeField(allow_null=True)
    error = StrictCharField()
    kubeconfig = StrictCharField(help_text="The file, when ready; empty otherwise.")


class HomeSerializer(serializers.Serializer):
    """The caller's persistent home volume."""

    state = StrictCharField(help_text="new, ready, deleting")
    size_gb = StrictIntegerField(help_text="What it is billed for; the volume grows to it.")
    provisioned_gb = StrictIntegerField(help_text="What the cluster's volume has now.")
    used_gb = serializers.DecimalField(
        max_digits=12, decimal_places=2, allow_null=True, help_text="null: not measured"
    )
    used_at = serializers.DateTimeField(allow_null=True)
    cluster = StrictCharField(source="cluster.name")
    team = StrictCharField(source="team.slug", help_text="The team it is billed to.")
    max_gb = StrictIntegerField(source="team.home_gb_max", help_text="How far it may grow.")
    sandbox = StrictIntegerField(
        source="attached_to.number",
        allow_null=True,
        help_text="The number of the sandbox it was last mounted in (its `id`).",
    )
    created_at = serializers.DateTimeField()
    price_per_gb_month = serializers.SerializerMethodField(
        help_text="Today's storage price in USD per GB-month, a decimal string."
    )
    monthly_cost = serializers.SerializerMethodField(
        help_text="What its size costs a month at today's price, USD with cents."
    )

    def get_price_per_gb_month(self, home: Any) -> str:
        return str(self.context["price_per_gb_month"])

    def get_monthly_cost(self, home: Any) -> str:
        price = self.context["price_per_gb_month"]
        return str(home_monthly_cost(price_per_gb_month=price, size_gb=home.size_gb))


class HomeResizeSerializer(serializers.Serializer):
    size_gb = StrictIntegerField(min_value=1, max_value=100_000)


class HomeDeleteSerializer(serializers.Serializer):
    confirm = StrictCharField(max_length=150, help_text="Your username: everything in the home is lost.")
