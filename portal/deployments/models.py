from __future__ import annotations

from django.db import models


class Serving(models.Model):
    """What a deployment serves and how: the catalog entry, the sizing it was deployed with, the
    container it runs, and what the cluster last said about its replicas.

    The deployment itself is a workload row (`workloads.Workload` with kind "deployment"), so it
    shares every workload's lifecycle, quota, approval, placement, metering and audit path.
    """

    workload = models.OneToOneField(
        "workloads.Workload", primary_key=True, on_delete=models.CASCADE, related_name="serving"
    )
    model = models.ForeignKey("catalog.CatalogModel", on_delete=models.PROTECT, related_name="deployments")
    runtime = models.ForeignKey("catalog.Runtime", on_delete=models.PROTECT, related_name="deployments")
    precision = models.CharField(max_length=20)
    context = models.PositiveIntegerField()
    concurrency = models.PositiveIntegerField()
    image = models.CharField(max_length=300)
    command = models.JSONField(help_text="The serving container's argv.")
    port = models.PositiveIntegerField()
    health_path = models.CharField(max_length=200)
    readiness_path = models.CharField(max_length=200)
    api = models.CharField(max_length=20)
    ready_replicas = models.PositiveSmallIntegerField(default=0)
    checked_at = models.DateTimeField(null=True, blank=True)
    # The worker's reads of the runtime's metrics (see runtime_metrics.serving_growth): each
    # replica's counters at the last read, when, and why the last read failed, if it did.
    metrics_state = models.JSONField(default=dict, blank=True)
    metrics_read_at = models.DateTimeField(null=True, blank=True)
    metrics_error = models.CharField(max_length=500, blank=True)

    def __str__(self) -> str:
        return f"{self.model} for deployment {self.workload_id}"


class ServingMinute(models.Model):
    """What a deployment's runtime served between two reads of its metrics (about a minute),
    filed under the minute of the later read: the growth of its counters, summed over replicas.

    A figure the runtime does not report stays null (TGI has no time to first token, Triton no
    tokens), never zero. Rates are the growth over `seconds`; means are sums over counts. Kept
    PORTAL_TELEMETRY_MINUTE_DAYS, like the GPUs' minutes.
    """

    workload = models.ForeignKey("workloads.Workload", on_delete=models.CASCADE, related_name="+")
    minute = models.DateTimeField()
    seconds = models.FloatField(help_text="The span the figures cover.")
    requests = models.FloatField(null=True, blank=True, help_text="Requests completed.")
    generated_tokens = models.FloatField(null=True, blank=True)
    prompt_tokens = models.FloatField(null=True, blank=True)
    ttft_sum = models.FloatField(null=True, blank=True, help_text="Seconds to first token, summed.")
    ttft_count = models.FloatField(null=True, blank=True)
    latency_sum = models.FloatField(null=True, blank=True, help_text="End-to-end seconds, summed.")
    latency_count = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["workload", "minute"]
        constraints = [models.UniqueConstraint(fields=["workload", "minute"], name="serving_minute_unique")]
        indexes = [models.Index(fields=["minute"])]

    def __str__(self) -> str:
        return f"deployment {self.workload_id} at {self.minute:%Y-%m-%d %H:%M}"
