"""A deployment's serving figures: the worker's reads recorded as each minute's growth, and what
the deployment page and the API show from them (tokens and requests per second, time to first
token, latency, cost per million tokens), with "not reported by <runtime>" where a runtime has no
such figure, in a bounded number of queries."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from portal.deployments.models import Serving, ServingMinute
from portal.deployments.serving_stats import (
    deployment_serving_now,
    serving_metrics_record,
    serving_minutes_prune,
)
from tests.conftest import signed_in
from tests.deployments import conftest as deployment_fixtures
from tests.rows import HTMX, make_deployment

pytestmark = pytest.mark.django_db
catalog = deployment_fixtures.catalog


def vllm_page(generated: float, prompt: float, requests: float, ttft_sum: float, latency_sum: float) -> str:
    labels = 'model_name="meta-llama/Llama-3.1-8B-Instruct"'
    return f"""\
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{{labels}}} {generated}
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{{labels}}} {prompt}
# TYPE vllm:request_success_total counter
vllm:request_success_total{{finished_reason="stop",{labels}}} {requests}
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{le="+Inf",{labels}}} {requests}
vllm:time_to_first_token_seconds_sum{{{labels}}} {ttft_sum}
vllm:time_to_first_token_seconds_count{{{labels}}} {requests}
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_sum{{{labels}}} {latency_sum}
vllm:e2e_request_latency_seconds_count{{{labels}}} {requests}
"""


TGI_PAGE = """\
# TYPE tgi_request_success counter
tgi_request_success {requests}
# TYPE tgi_request_duration histogram
tgi_request_duration_sum {latency}
tgi_request_duration_count {requests}
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_sum {tokens}
tgi_request_generated_tokens_count {requests}
"""


@pytest.fixture
def llama(catalog, researcher, team, whole_gpus):
    return make_deployment(owner=researcher, team=team, gpu=whole_gpus[0])


def test_two_reads_a_minute_apart_record_that_minutes_growth(llama):
    now = timezone.now().replace(second=10, microsecond=0)
    first = serving_metrics_record(
        deployment_id=llama.pk, readings={"serve-0-a": vllm_page(1000, 3000, 10, 2.0, 40.0)}, now=now
    )
    assert first is None  # the baseline
    assert (
        Serving.objects.get(workload=llama).metrics_state["pods"]["serve-0-a"]["counters"]["requests"] == 10
    )
    later = now + timedelta(seconds=60)
    row = serving_metrics_record(
        deployment_id=llama.pk, readings={"serve-0-a": vllm_page(46000, 93000, 130, 26.0, 640.0)}, now=later
    )
    assert row is not None and row.minute == later.replace(second=0)
    assert row.seconds == 60.0
    assert (row.generated_tokens, row.prompt_tokens, row.requests) == (45000.0, 90000.0, 120.0)
    assert (row.ttft_sum, row.ttft_count, row.latency_sum, row.latency_count) == (24.0, 120.0, 600.0, 120.0)
    # read again within the minute (a job ran twice): added to the same row, over the seconds it took
    again = serving_metrics_record(
        deployment_id=llama.pk, readings={"serve-0-a": vllm_page(46750, 93000, 132, 26.4, 650.0)},
        now=later + timedelta(seconds=1),
    )  # fmt: skip
    assert again.pk == row.pk and again.seconds == 61.0 and again.generated_tokens == 45750.0
    assert ServingMinute.objects.count() == 1


def test_a_server_restarted_between_reads_counts_from_zero(llama):
    now = timezone.now()
    serving_metrics_record(deployment_id=llama.pk, readings={"p": vllm_page(5000, 0, 50, 5, 50)}, now=now)
    row = serving_metrics_record(
        deployment_id=llama.pk, readings={"p": vllm_page(300, 0, 3, 0.3, 3)}, now=now + timedelta(seconds=60)
    )
    assert row.generated_tokens == 300.0 and row.requests == 3.0  # not -4700


def test_a_tgi_deployment_has_no_time_to_first_token_and_an_unreadable_pod_is_named(
    catalog, researcher, team, whole_gpus
):
    tgi = make_deployment(owner=researcher, team=team, gpu=whole_gpus[1], model="mistral-7b-instruct-v0.3")
    now = timezone.now()
    page = TGI_PAGE.format(requests=10, latency=30.0, tokens=2000)
    serving_metrics_record(deployment_id=tgi.pk, readings={"a": page, "b": None}, now=now)
    page = TGI_PAGE.format(requests=40, latency=120.0, tokens=11000)
    row = serving_metrics_record(
        deployment_id=tgi.pk, readings={"a": page, "b": "<html>"}, now=now + timedelta(seconds=60)
    )
    assert row.generated_tokens == 9000.0 and row.latency_sum == 90.0 and row.latency_count == 30.0
    assert row.ttft_sum is None and row.ttft_count is None  # not reported, never zero
    assert Serving.objects.get(workload=tgi).metrics_error == "could not read the metrics of b"


def minute_row(deployment, *, minutes_ago: int, **figures: float) -> ServingMinute:
    minute = (timezone.now() - timedelta(minutes=minutes_ago)).replace(second=0, microsecond=0)
    return ServingMinute.objects.create(workload=deployment, minute=minute, seconds=60.0, **figures)


LLAMA_MINUTE = {
    "requests": 120.0, "generated_tokens": 45000.0, "prompt_tokens": 90000.0,
    "ttft_sum": 24.0, "ttft_count": 120.0, "latency_sum": 600.0, "latency_count": 120.0,
}  # fmt: skip


def test_the_figures_are_rates_means_and_the_gpu_price_over_the_tokens(llama):
    minute_row(llama, minutes_ago=30, **LLAMA_MINUTE)
    minute_row(llama, minutes_ago=1, **{**LLAMA_MINUTE, "generated_tokens": 30000.0, "ttft_sum": 12.0})
    minute_row(llama, minutes_ago=90, **LLAMA_MINUTE)  # beyond the hour
    figures = deployment_serving_now(llama, now=timezone.now())
    minute = figures.last_minute
    assert minute.tokens_per_second == 500.0 and minute.requests_per_second == 2.0
    assert minute.time_to_first_token_seconds == 0.1 and minute.request_latency_seconds == 5.0
    # $6.88 an hour for 500 tokens a second: 1.8 M tokens an hour
    assert minute.cost_per_million_tokens == (Decimal("6.88") * 60 / 3600 * 1_000_000 / 30000).quantize(
        Decimal("0.0001")
    )
    hour = figures.last_hour
    assert hour.seconds == 120.0 and hour.tokens_per_second == 75000 / 120
    assert hour.time_to_first_token_seconds == 36 / 240
    assert hour.cost_per_million_tokens == pytest.approx(
        Decimal("6.88") * 120 / 3600 * 1_000_000 / 75000, abs=Decimal("0.001")
    )


def test_the_page_shows_the_figures_and_what_the_runtime_does_not_report(
    catalog, researcher, team, whole_gpus, django_assert_max_num_queries
):
    llama = make_deployment(owner=researcher, team=team, gpu=whole_gpus[0])
    tgi = make_deployment(owner=researcher, team=team, gpu=whole_gpus[1], model="mistral-7b-instruct-v0.3")
    minute_row(llama, minutes_ago=1, **LLAMA_MINUTE)
    minute_row(
        tgi, minutes_ago=1, requests=30.0, generated_tokens=9000.0, latency_sum=90.0, latency_count=30.0
    )
    client = signed_in(researcher)
    with django_assert_max_num_queries(30) as counted:
        page = client.get(f"/deployments/{llama.number}/", **HTMX).content.decode()
    assert 'id="serving-figures"' in page
    assert "750 tokens/s" in page and "2.00 req/s" in page
    assert "200 ms" in page and "5.00 s" in page
    assert "$2.55" in page  # 6.88 / (750 x 3600) x 10^6
    assert "not reported" not in page
    ServingMinute.objects.filter(workload=llama).delete()
    with django_assert_max_num_queries(len(counted.captured_queries)):  # the same queries without readings
        client.get(f"/deployments/{llama.number}/", **HTMX)

    page = client.get(f"/deployments/{tgi.number}/").content.decode()
    assert "150 tokens/s" in page and "3.00 s" in page
    assert page.count("not reported by TGI") == 2  # time to first token, this minute and this hour
    ServingMinute.objects.filter(workload=tgi).delete()
    assert signed_in(researcher).get(f"/deployments/{tgi.number}/").content.decode().count("no reading") == 10


def test_the_api_gives_the_figures_and_a_series(alice, carol, llama, catalog, django_assert_max_num_queries):
    minute_row(llama, minutes_ago=61, **LLAMA_MINUTE)
    minute_row(llama, minutes_ago=2, **LLAMA_MINUTE)
    minute_row(llama, minutes_ago=1, **{**LLAMA_MINUTE, "generated_tokens": 30000.0})
    with django_assert_max_num_queries(12):
        body = alice.get(f"/api/v1/deployments/{llama.number}/serving").json()
    assert body["runtime"] == "vllm" and body["not_reported"] == [] and body["read_error"] == ""
    assert body["last_minute"]["tokens_per_second"] == 500.0
    assert body["last_minute"]["cost_per_million_tokens"] == "3.82"  # 6.88 / 1.8 M tokens
    assert body["last_hour"]["seconds"] == 120.0 and body["last_hour"]["time_to_first_token_seconds"] == 0.2
    assert [point["tokens_per_second"] for point in body["points"]] == [750.0, 750.0, 500.0]
    hourly = alice.get(f"/api/v1/deployments/{llama.number}/serving?step=3600").json()["points"]
    assert 1 <= len(hourly) <= 3 and sum(p["tokens_per_second"] for p in hourly) > 0
    since = (timezone.now() - timedelta(minutes=5)).isoformat()
    recent = alice.get(f"/api/v1/deployments/{llama.number}/serving", {"from": since}).json()["points"]
    assert len(recent) == 2
    refused = alice.get(f"/api/v1/deployments/{llama.number}/serving?step=5")
    assert refused.status_code == 400 and refused.json()["error"]["fields"] == {"step": ["60 or 3600"]}
    assert carol.get(f"/api/v1/deployments/{llama.number}/serving").status_code == 404


def test_the_api_names_what_a_runtime_does_not_report(alice, catalog, researcher, team, whole_gpus):
    resnet = make_deployment(owner=researcher, team=team, gpu=whole_gpus[2], model="resnet-50")
    minute_row(resnet, minutes_ago=1, requests=2400.0, latency_sum=19.2, latency_count=2400.0)
    body = alice.get(f"/api/v1/deployments/{resnet.number}/serving").json()
    assert body["runtime"] == "triton"
    assert body["not_reported"] == [
        "tokens_per_second",
        "cost_per_million_tokens",
        "prompt_tokens_per_second",
        "cost_per_million_prompt_tokens",
        "time_to_first_token_seconds",
    ]
    assert body["last_minute"]["requests_per_second"] == 40.0
    assert body["last_minute"]["request_latency_seconds"] == pytest.approx(0.008)
    assert body["last_minute"]["tokens_per_second"] is None  # not a made-up zero
    # An image classifier has no tokens: its page shows requests and latency alone
    page = signed_in(researcher).get(f"/deployments/{resnet.number}/", **HTMX).content.decode()
    assert "40.00 req/s" in page and "8 ms" in page
    assert "Tokens" not in page and "Time to first token" not in page and "not reported" not in page


def test_an_embedding_model_is_shown_by_the_tokens_it_embeds_and_what_a_million_of_them_cost(
    alice, catalog, researcher, team, whole_gpus
):
    # vLLM serving an embedding model counts its prompts' tokens, generates none, and times its
    # one output as the first token
    embedder = make_deployment(owner=researcher, team=team, gpu=whole_gpus[0], model="bge-large-en-v1.5")
    minute_row(
        embedder, minutes_ago=1, requests=1200.0, prompt_tokens=300000.0, generated_tokens=0.0,
        ttft_sum=48.0, ttft_count=1200.0, latency_sum=48.0, latency_count=1200.0,
    )  # fmt: skip
    page = signed_in(researcher).get(f"/deployments/{embedder.number}/", **HTMX).content.decode()
    assert "Tokens embedded" in page and "5,000 tokens/s" in page and "20.00 req/s" in page
    assert "Cost per million tokens embedded" in page and "$0.38" in page  # 6.88 / (5,000 x 3600) x 10^6
    assert "Tokens generated" not in page and "Time to first token" not in page
    assert "no tokens generated" not in page
    body = alice.get(f"/api/v1/deployments/{embedder.number}/serving").json()["last_minute"]
    assert body["prompt_tokens_per_second"] == 5000.0 and body["tokens_per_second"] == 0.0
    assert body["cost_per_million_prompt_tokens"] == "0.38" and body["cost_per_million_tokens"] is None
    (point,) = alice.get(f"/api/v1/deployments/{embedder.number}/serving").json()["points"]
    assert point["prompt_tokens_per_second"] == 5000.0 and point["tokens_per_second"] == 0.0
    # a generative model's page is as it was
    llama = make_deployment(owner=researcher, team=team, gpu=whole_gpus[1])
    minute_row(llama, minutes_ago=1, **LLAMA_MINUTE)
    page = signed_in(researcher).get(f"/deployments/{llama.number}/", **HTMX).content.decode()
    assert "Tokens generated" in page and "Time to first token" in page and "Tokens embedded" not in page


def test_old_minutes_are_pruned(llama):
    minute_row(llama, minutes_ago=60 * 24 * 15)
    minute_row(llama, minutes_ago=5)
    assert serving_minutes_prune(now=timezone.now(), minute_days=14) == 1
    assert ServingMinute.objects.count() == 1
