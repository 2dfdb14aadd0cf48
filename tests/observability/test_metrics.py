"""/metrics: the platform's figures for Prometheus, for its token or a platform admin only, with
bounded labels and a bounded number of queries whatever the fleet's size."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from portal.fleet.models import GpuMinute
from portal.workloads.models import WorkloadState
from tests.conftest import signed_in
from tests.rows import make_sandbox

pytestmark = pytest.mark.django_db


def families(text: str) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_the_metrics_need_the_token_or_an_admin(settings, researcher, admin_user, fleet):
    settings.PORTAL_METRICS_TOKEN = "s3cret-scrape-token"
    assert Client().get("/metrics").status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert signed_in(researcher).get("/metrics").status_code == 403
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scrape-token").status_code == 200
    assert signed_in(admin_user).get("/metrics").status_code == 200


def test_the_figures_say_what_the_database_holds(settings, fleet, h100, researcher, team, whole_gpus):
    settings.PORTAL_METRICS_TOKEN = "t"
    now = timezone.now()
    running = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0])
    make_sandbox(owner=researcher, team=team, state=WorkloadState.QUEUED, gpu_type=h100, hours_ago=1)
    minute = (now - timedelta(minutes=1)).replace(second=0, microsecond=0)
    GpuMinute.objects.create(gpu=whole_gpus[0], device=whole_gpus[0].uuid, minute=minute, samples=2,
                             utilization_sum=150.0, utilization_samples=2)  # fmt: skip
    text = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    got = families(text)
    workloads = {(s.labels["kind"], s.labels["state"]): s.value for s in got["gpu_portal_workloads"]}
    assert workloads[("sandbox", "running")] == 1 and workloads[("sandbox", "queued")] == 1
    (depth,) = got["gpu_portal_queue_depth"]
    assert depth.labels == {"gpu_type": "h100-80gb"} and depth.value == 1
    (wait,) = got["gpu_portal_queue_oldest_wait_seconds"]
    assert 3500 < wait.value < 3700
    gpus = {(s.labels["gpu_type"], s.labels["use"]): s.value for s in got["gpu_portal_gpus"]}
    assert gpus == {("h100-80gb", "whole_held"): 1, ("h100-80gb", "free"): 7, ("h100-80gb", "mig"): 8}
    (rate,) = got["gpu_portal_spend_rate_dollars_per_hour"]
    assert rate.labels == {"team": "vision"} and rate.value == pytest.approx(6.88)
    (busy,) = got["gpu_portal_gpu_utilization_percent"]
    assert busy.labels == {"node": "gpu-h100-a", "gpu": "0", "team": "vision"} and busy.value == 75.0
    label_names = {name for samples in got.values() for sample in samples for name in sample.labels}
    assert label_names <= {
        "kind", "state", "gpu_type", "use", "profile", "health", "node", "gpu", "team",
        "model", "runtime", "since", "window", "quantile", "reason", "stage",
    }  # fmt: skip
    assert running.name not in text  # no workload or user in any label


def test_a_scrape_costs_the_same_few_queries_for_a_bigger_fleet(settings, fleet, h100, researcher, team, whole_gpus,
                                                                django_assert_max_num_queries):  # fmt: skip
    settings.PORTAL_METRICS_TOKEN = "t"
    for index in range(6):
        make_sandbox(owner=researcher, team=team, gpu=whole_gpus[index])
    with django_assert_max_num_queries(
        26
    ):  # a grouped query or two a figure, however many GPUs and sandboxes
        assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer t").status_code == 200
