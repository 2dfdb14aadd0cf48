"""Deployment jobs: reading each running deployment's runtime metrics once a minute, and
forgetting old readings. Each takes ids, calls one reconcile or service function, and returns."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from portal.deployments.serving_stats import deployments_to_read, serving_minutes_prune
from workers.reconcile.serving_metrics import read_deployment_metrics


@shared_task(name="deployments.read_serving_metrics", ignore_result=True)
def read_serving_metrics(deployment_id: int) -> None:
    """One read of one deployment's runtime metrics (tokens, requests, latency)."""
    read_deployment_metrics(deployment_id)


@shared_task(name="deployments.read_serving_metrics_all", ignore_result=True)
def read_serving_metrics_all() -> None:
    """One job per running deployment, so one slow server never holds up the others."""
    for deployment_id in deployments_to_read():
        read_serving_metrics.delay(deployment_id)


@shared_task(name="deployments.prune_serving_metrics", ignore_result=True)
def prune_serving_metrics() -> None:
    """Forget serving minutes past PORTAL_TELEMETRY_MINUTE_DAYS, as the GPUs' minutes are."""
    serving_minutes_prune(now=timezone.now(), minute_days=settings.PORTAL_TELEMETRY_MINUTE_DAYS)
