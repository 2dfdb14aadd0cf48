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

    def __str__(self) -> str:
        return f"{self.model} for deployment {self.workload_id}"
