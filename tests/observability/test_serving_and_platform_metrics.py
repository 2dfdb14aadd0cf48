"""/metrics beyond the fleet: model serving by model, runtime and team; MIG changes waiting and
failed; time to running; failures by reason; time to a lead's decision; idle GPU-hours; budgets
against month-to-date spend. Each figure says what the rows hold; labels stay bounded."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from portal.audit.services import audit_record
from portal.deployments.models import ServingMinute
from portal.fleet.models import GpuMinute, MigSlice, Node
from portal.observability.platform import failure_reason, quantile
from portal.spend.selectors import month_start, to_cents
from portal.workloads.models import Approval, Workload, WorkloadState
from tests.deployments import conftest as deployment_fixtures
from tests.rows import make_deployment, make_sandbox

pytestmark = pytest.mark.django_db
catalog = deployment_fixtures.catalog


def scrape(settings) -> dict[str, list]:
    settings.PORTAL_METRICS_TOKEN = "t"
    text = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def by(samples: list, *names: str) -> dict:
    return {tuple(sample.labels[name] for name in names): sample.value for sample in samples}


def minute_row(deployment, *, minutes_ago: int = 1, **figures: float) -> ServingMinute:
    minute = (timezone.now() - timedelta(minutes=minutes_ago)).replace(second=0, microsecond=0)
    return ServingMinute.objects.create(workload=deployment, minute=minute, seconds=60.0, **figures)


def test_serving_figures_add_up_by_model_runtime_and_team_and_leave_out_what_is_not_reported(
    settings, catalog, researcher, team, h100, whole_gpus
):
    one = make_deployment(owner=researcher, team=team, gpu=whole_gpus[0])
    two = make_deployment(owner=researcher, team=team, gpu=whole_gpus[1])
    minute_row(
        one,
        generated_tokens=30000.0,
        requests=60.0,
        ttft_sum=6.0,
        ttft_count=60.0,
        latency_sum=240.0,
        latency_count=60.0,
    )
    minute_row(
        two,
        generated_tokens=15000.0,
        requests=30.0,
        ttft_sum=9.0,
        ttft_count=30.0,
        latency_sum=90.0,
        latency_count=30.0,
    )
    minute_row(two, minutes_ago=2, generated_tokens=999999.0)  # an older read of the same deployment
    tgi = make_deployment(owner=researcher, team=team, gpu=whole_gpus[2], model="mistral-7b-instruct-v0.3")
    minute_row(tgi, generated_tokens=6000.0, requests=20.0, latency_sum=60.0, latency_count=20.0)
    resnet = make_deployment(owner=researcher, team=team, gpu=whole_gpus[3], model="resnet-50")
    minute_row(resnet, requests=2400.0, latency_sum=19.2, latency_count=2400.0)
    bge = make_deployment(owner=researcher, team=team, gpu=whole_gpus[5], model="bge-large-en-v1.5")
    minute_row(bge, prompt_tokens=300000.0, generated_tokens=0.0, requests=1200.0)  # an embedding model
    stale = make_deployment(owner=researcher, team=team, gpu=whole_gpus[4])
    minute_row(stale, minutes_ago=10, generated_tokens=1.0)  # no read for ten minutes: not "now"
    ended = make_deployment(owner=researcher, team=team, gpu_type=h100, state=WorkloadState.TERMINATED)
    minute_row(ended, generated_tokens=1.0)
    got = scrape(settings)

    llama, mistral, triton = (
        ("llama-3.1-8b-instruct", "vllm", "vision"),
        ("mistral-7b-instruct-v0.3", "tgi", "vision"),
        ("resnet-50", "triton", "vision"),
    )
    embedder = ("bge-large-en-v1.5", "vllm", "vision")
    tokens = by(got["gpu_portal_serving_tokens_per_second"], "model", "runtime", "team")
    assert tokens == {llama: 750.0, mistral: 100.0, embedder: 0.0}  # no tokens from Triton, not even a zero
    prompt = by(got["gpu_portal_serving_prompt_tokens_per_second"], "model", "runtime", "team")
    assert prompt == {embedder: 5000.0}  # only the embedding model's reads carry prompt tokens here
    requests = by(got["gpu_portal_serving_requests_per_second"], "model", "runtime", "team")
    assert requests == {llama: 1.5, mistral: pytest.approx(1 / 3), triton: 40.0, embedder: 20.0}
    ttft = by(got["gpu_portal_serving_time_to_first_token_seconds"], "model", "runtime", "team")
    assert ttft == {llama: pytest.approx(15 / 90)}  # weighted by requests; TGI reports none
    latency = by(got["gpu_portal_serving_request_latency_seconds"], "model", "runtime", "team")
    assert latency == {llama: pytest.approx(330 / 90), mistral: 3.0, triton: pytest.approx(0.008)}
    cost = by(got["gpu_portal_serving_cost_per_million_tokens_dollars"], "model", "runtime", "team")
    # two H100s at $6.88 an hour make 750 tokens a second: 2.7 M tokens an hour
    assert cost == {
        llama: pytest.approx(float(Decimal("13.76") * 1_000_000 / (750 * 3600)), abs=1e-4),
        mistral: pytest.approx(float(Decimal("6.88") * 1_000_000 / (100 * 3600)), abs=1e-4),
    }


def test_mig_changes_waiting_failed_and_the_oldest_wait(settings, fleet):
    mig = fleet["mig"]
    Node.objects.filter(pk=mig.pk).update(mig_layout_wanted=3, mig_layout_applied=2)
    Node.objects.filter(pk=fleet["whole"].pk).update(
        mig_layout_wanted=5, mig_layout_applied=3, mig_config_state="failed", mig_layout_failed_version=5
    )
    gpu = mig.gpus.get(index=0)
    cut = MigSlice.objects.create(
        gpu=gpu, profile="1g.10gb", start=0, size=1, compute_slices=1, state="creating"
    )
    MigSlice.objects.filter(pk=cut.pk).update(created_at=timezone.now() - timedelta(minutes=10))
    got = scrape(settings)
    assert got["gpu_portal_mig_layout_changes_pending"][0].value == 2
    assert got["gpu_portal_mig_layout_changes_failed"][0].value == 1
    assert 590 < got["gpu_portal_mig_layout_change_oldest_seconds"][0].value < 700


def test_time_to_running_from_request_queue_and_placement(settings, catalog, researcher, team, whole_gpus):
    now = timezone.now()
    for minutes, gpu in ((5, whole_gpus[0]), (15, whole_gpus[1]), (25, whole_gpus[2])):
        sandbox = make_sandbox(
            owner=researcher, team=team, gpu=gpu, hours_ago=1,
            queued_at=now - timedelta(hours=1, minutes=minutes),
            provisioning_since=now - timedelta(hours=1, minutes=1),
        )  # fmt: skip
        # asked for 30 minutes before it was queued: a lead's approval
        Workload.objects.filter(pk=sandbox.pk).update(
            created_at=now - timedelta(hours=1, minutes=minutes + 30)
        )
    make_sandbox(owner=researcher, team=team, gpu=whole_gpus[3], hours_ago=30)  # longer ago than a day
    scaled = make_deployment(owner=researcher, team=team, gpu=whole_gpus[4], hours_ago=0.5,
                             provisioning_since=now - timedelta(minutes=32))  # fmt: skip
    audit_record(actor=None, action="deployment.scaled", obj=scaled, to_state="provisioning")
    got = scrape(settings)
    started = by(got["gpu_portal_workloads_started"], "kind", "window")
    assert started == {("sandbox", "24h"): 3, ("deployment", "24h"): 1}
    took = by(got["gpu_portal_time_to_running_seconds"], "kind", "since", "quantile")
    assert took[("sandbox", "queued", "0.5")] == pytest.approx(15 * 60, abs=2)
    assert took[("sandbox", "queued", "1")] == pytest.approx(25 * 60, abs=2)
    assert took[("sandbox", "request", "0.9")] == pytest.approx(55 * 60, abs=2)
    assert took[("sandbox", "placed", "1")] == pytest.approx(60, abs=2)
    # the rescaled deployment's started_at is its rescale's: timed only from its placement
    assert took[("deployment", "placed", "1")] == pytest.approx(120, abs=2)
    assert ("deployment", "request", "1") not in took and ("deployment", "queued", "1") not in took


def test_failures_are_counted_by_reason_stage_and_window(settings, researcher, team, h100):
    now = timezone.now()
    failed = [
        ("Not running 30 minutes after it was placed on gpu-h100-a (the cluster's provisioning deadline); "
         "last: Pulling image", None, 10),
        ("image pull failed: registry.local/nope:1 was not found", None, 90),
        ("Node gpu-h100-a is gone from the cluster.", now - timedelta(hours=5), 20),
        ("something nobody foresaw", None, 60 * 30),  # beyond the day
    ]  # fmt: skip
    for message, started, minutes_ago in failed:
        make_sandbox(owner=researcher, team=team, gpu_type=h100, state=WorkloadState.FAILED, message=message,
                     started_at=started, ended_at=now - timedelta(minutes=minutes_ago))  # fmt: skip
    make_sandbox(owner=researcher, team=team, gpu_type=h100, state=WorkloadState.TERMINATING,
                 ending_as=WorkloadState.FAILED, message="OOM-killed: the sandbox keeps using more memory",
                 started_at=now - timedelta(hours=2), ended_at=now)  # fmt: skip
    got = scrape(settings)
    counted = by(got["gpu_portal_workload_failures"], "kind", "stage", "reason", "window")
    assert counted == {
        ("sandbox", "provisioning", "deadline", "1h"): 1,
        ("sandbox", "provisioning", "deadline", "24h"): 1,
        ("sandbox", "provisioning", "image_pull", "24h"): 1,
        ("sandbox", "running", "node_gone", "1h"): 1,
        ("sandbox", "running", "node_gone", "24h"): 1,
        ("sandbox", "running", "oom", "1h"): 1,
        ("sandbox", "running", "oom", "24h"): 1,
    }


def test_failure_reasons_are_a_bounded_set():
    assert (
        failure_reason("the cluster rejected create deployments/serve-0: spec.x: Invalid")
        == "cluster_refused"
    )
    assert (
        failure_reason("the Kubernetes API failed to create namespaces (500): etcd") == "cluster_unreachable"
    )
    assert failure_reason("The MIG layout change on gpu-h100-b failed.") == "mig_layout"
    assert failure_reason("replica 1: the container could not start: exec format error") == "crash"
    assert failure_reason("") == "other"
    assert quantile([3.0, 1.0, 2.0, 4.0], 0.5) == 2.0 and quantile([5.0], 0.9) == 5.0


def test_approvals_decided_and_how_long_leads_took(settings, researcher, lead, team, h100):
    now = timezone.now()
    for state, kind, minutes in (
        ("approved", "create", 30),
        ("approved", "create", 90),
        ("rejected", "extend", 10),
    ):
        sandbox = make_sandbox(owner=researcher, team=team, gpu_type=h100, state=WorkloadState.QUEUED)
        approval = Approval.objects.create(workload=sandbox, team=team, kind=kind, requested_by=researcher,
                                           state=state, decided_by=lead, decided_at=now - timedelta(minutes=5))  # fmt: skip
        Approval.objects.filter(pk=approval.pk).update(created_at=now - timedelta(minutes=5 + minutes))
    waiting = make_sandbox(owner=researcher, team=team, gpu_type=h100, state=WorkloadState.PENDING_APPROVAL)
    Approval.objects.create(workload=waiting, team=team, requested_by=researcher)
    cancelled = make_sandbox(owner=researcher, team=team, gpu_type=h100, state=WorkloadState.EXPIRED)
    Approval.objects.create(
        workload=cancelled, team=team, requested_by=researcher, state="cancelled", decided_at=now
    )
    got = scrape(settings)
    decided = by(got["gpu_portal_approvals_decided"], "kind", "state", "window")
    assert decided == {("create", "approved", "24h"): 2, ("extend", "rejected", "24h"): 1}
    took = by(got["gpu_portal_approval_decision_seconds"], "kind", "quantile")
    assert took[("create", "0.5")] == pytest.approx(1800, abs=2) and took[("create", "1")] == pytest.approx(
        5400, abs=2
    )
    assert took[("extend", "0.9")] == pytest.approx(600, abs=2)
    assert got["gpu_portal_approvals_pending"][0].value == 1


def test_idle_gpu_hours_by_team_over_the_day(settings, researcher, team, whole_gpus):
    gpu = whole_gpus[0]
    make_sandbox(owner=researcher, team=team, gpu=gpu, hours_ago=3)
    start = (timezone.now() - timedelta(hours=2)).replace(second=0, microsecond=0)
    for minute in range(45):  # 30 idle minutes (under the team's 5 %), 15 busy
        utilization = 2.0 if minute < 30 else 80.0
        GpuMinute.objects.create(gpu=gpu, device=gpu.uuid, minute=start + timedelta(minutes=minute), samples=1,
                                 utilization_sum=utilization, utilization_samples=1)  # fmt: skip
    got = scrape(settings)
    assert by(got["gpu_portal_idle_gpu_hours"], "team", "window") == {("vision", "24h"): 0.5}


def test_budgets_month_to_date_spend_and_the_months_pace(settings, researcher, team, other_team, whole_gpus):
    team.monthly_budget = Decimal("1000.00")
    team.save()
    make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0], hours_ago=2)
    now = timezone.now()
    got = scrape(settings)
    assert by(got["gpu_portal_team_budget_dollars"], "team") == {
        ("vision",): 1000.0,
        (other_team.slug,): float(other_team.monthly_budget),
    }
    held = min(timedelta(hours=2), now - month_start(now))
    spent = by(got["gpu_portal_team_spend_month_to_date_dollars"], "team")
    assert spent[("vision",)] == pytest.approx(
        float(to_cents(Decimal("6.88") * Decimal(held.total_seconds() / 3600))), abs=0.02
    )
    assert spent[(other_team.slug,)] == 0
    (elapsed,) = got["gpu_portal_month_elapsed_ratio"]
    assert 0 <= elapsed.value < 1 and elapsed.value == pytest.approx(
        (now - month_start(now))
        / ((month_start(now) + timedelta(days=32)).replace(day=1) - month_start(now)),
        abs=1e-3,
    )


def test_a_busier_platform_costs_the_same_queries_to_scrape(
    settings, catalog, researcher, lead, team, h100, whole_gpus, django_assert_max_num_queries
):
    settings.PORTAL_METRICS_TOKEN = "t"

    def busier(index: int) -> None:
        served = make_deployment(owner=researcher, team=team, gpu=whole_gpus[index])
        minute_row(served, generated_tokens=100.0, requests=1.0, ttft_sum=0.1, ttft_count=1.0)
        make_sandbox(
            owner=researcher,
            team=team,
            gpu_type=h100,
            state=WorkloadState.FAILED,
            message="image pull failed",
        )
        asked = make_sandbox(owner=researcher, team=team, gpu_type=h100, state=WorkloadState.QUEUED)
        Approval.objects.create(workload=asked, team=team, requested_by=researcher, state="approved",
                                decided_by=lead, decided_at=timezone.now())  # fmt: skip
        GpuMinute.objects.create(gpu=whole_gpus[index], device=whole_gpus[index].uuid, samples=1,
                                 minute=timezone.now().replace(second=0, microsecond=0), utilization_sum=1.0,
                                 utilization_samples=1)  # fmt: skip

    busier(0)
    client = Client()
    with django_assert_max_num_queries(28) as few:  # one or two grouped queries a figure; spend from roll-ups
        assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").status_code == 200
    for index in range(1, 6):
        busier(index)
    with django_assert_max_num_queries(len(few.captured_queries)):
        text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    got = {family.name: family.samples for family in text_string_to_metric_families(text)}
    (tokens,) = got["gpu_portal_serving_tokens_per_second"]
    assert tokens.value == pytest.approx(6 * 100 / 60)  # six deployments of one model, team and runtime
