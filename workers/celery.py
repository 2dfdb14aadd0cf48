"""The Celery app: `celery -A workers worker` and `celery -A workers beat` run it in production."""

from __future__ import annotations

import os

from celery import Celery
from django.conf import settings  # lazy: read only when the schedule is built

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("gpu_portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.imports = (
    "workers.tasks.workloads",
    "workers.tasks.fleet",
    "workers.tasks.sandboxes",
    "workers.tasks.deployments",
    "workers.tasks.spend",
    "workers.tasks.notify",
)
app.set_default()


def _schedule() -> dict:
    return {
        "sweep-workloads": {
            "task": "workloads.sweep",
            "schedule": settings.PORTAL_SWEEP_SECONDS,
        },
        "reconcile-workloads": {
            "task": "workloads.reconcile_due",
            "schedule": settings.PORTAL_RECONCILE_SECONDS,
        },
        "apply-mig-layouts": {
            "task": "fleet.apply_mig_layouts_due",
            "schedule": settings.PORTAL_RECONCILE_SECONDS,
        },
        "discover-gpu-nodes": {
            "task": "fleet.discover_all",
            "schedule": settings.PORTAL_DISCOVERY_SECONDS,
        },
        "repair-drift": {
            "task": "fleet.repair_drift_all",
            "schedule": settings.PORTAL_DRIFT_SECONDS,
        },
        "reconcile-orphans": {  # objects the database does not know: reported; removed once confirmed
            "task": "fleet.reconcile_orphans_all",
            "schedule": settings.PORTAL_DRIFT_SECONDS,
        },
        "simulate-telemetry": {  # only simulated clusters: real ones have node agents
            "task": "fleet.simulate_telemetry",
            "schedule": settings.PORTAL_SIM_TELEMETRY_SECONDS,
        },
        "prune-telemetry": {
            "task": "fleet.prune_telemetry",
            "schedule": 3600.0,
        },
        "read-serving-metrics": {  # each running deployment's runtime: tokens, requests, latency
            "task": "deployments.read_serving_metrics_all",
            "schedule": 60.0,
        },
        "prune-serving-metrics": {
            "task": "deployments.prune_serving_metrics",
            "schedule": 3600.0,
        },
        "idle-sweep": {
            "task": "workloads.idle_sweep",
            "schedule": 60.0,
        },
        "budget-watch": {  # threshold alerts, and the stop policy of teams over budget
            "task": "workloads.budget_watch",
            "schedule": 300.0,
        },
        "roll-up-spend": {  # closed hours and days into spend roll-ups; stale ones again
            "task": "spend.rollup_due",
            "schedule": 300.0,
        },
        "redrive-deliveries": {  # e-mails and webhook messages whose job was lost are queued again
            "task": "notifications.redrive",
            "schedule": 600.0,
        },
        "prune-deliveries": {  # records of e-mails and webhook messages sent or failed 90 days ago
            "task": "notifications.prune",
            "schedule": 86400.0,
        },
        "warn-expiring-tokens": {  # users of tokens in use that expire within a week
            "task": "accounts.warn_expiring_tokens",
            "schedule": 3600.0,
        },
        "remind-approvals": {  # leads reminded of requests waiting past the team's reminder hours
            "task": "approvals.remind_waiting",
            "schedule": 600.0,
        },
        "prune-ssh-host-keys": {  # the host keys of ssh sandboxes that ended
            "task": "sandboxes.ssh_host_keys_prune",
            "schedule": 3600.0,
        },
        "delete-homes": {  # homes whose deletion failed (a volume still releasing) are tried again
            "task": "sandboxes.home_delete_due",
            "schedule": settings.PORTAL_DRIFT_SECONDS,
        },
    }


@app.on_after_configure.connect
def _setup_periodic_tasks(sender: Celery, **kwargs: object) -> None:
    sender.conf.beat_schedule = _schedule()
