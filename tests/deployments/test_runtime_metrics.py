"""Reading serving runtimes' /metrics pages: each runtime's own names in the Prometheus text
format as the servers write them, summed over labels; what a runtime does not report stays out;
counters that go down were reset and count from zero; growth spans exactly the seconds between
two reads of the same replicas."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from portal.deployments.runtime_metrics import (
    UnreadableMetrics,
    counter_growth,
    runtime_counters,
    serving_growth,
)

# As vLLM's OpenAI server writes it (prometheus_client: HELP/TYPE, `_total` counters, labelled
# histograms with buckets, `_created` samples where the client keeps them).
VLLM = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 120000.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 45000.0
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{finished_reason="stop",model_name="meta-llama/Llama-3.1-8B-Instruct"} 110.0
vllm:request_success_total{finished_reason="length",model_name="meta-llama/Llama-3.1-8B-Instruct"} 10.0
vllm:request_success_total{finished_reason="abort",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 40.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 120.0
vllm:time_to_first_token_seconds_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} 120.0
vllm:time_to_first_token_seconds_sum{model_name="meta-llama/Llama-3.1-8B-Instruct"} 24.0
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="5.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 70.0
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 120.0
vllm:e2e_request_latency_seconds_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} 120.0
vllm:e2e_request_latency_seconds_sum{model_name="meta-llama/Llama-3.1-8B-Instruct"} 600.0
# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.
# TYPE vllm:iteration_tokens_total histogram
vllm:iteration_tokens_total_sum{model_name="meta-llama/Llama-3.1-8B-Instruct"} 165000.0
vllm:iteration_tokens_total_bucket{le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 900.0
vllm:iteration_tokens_total_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} 900.0
"""

# As TGI's router writes it (the Rust metrics exporter: counters without `_total`, histograms
# without labels, no HELP lines for some).
TGI = """\
# TYPE tgi_queue_size gauge
tgi_queue_size 0
# TYPE tgi_request_count counter
tgi_request_count 52
# TYPE tgi_request_success counter
tgi_request_success 50
# TYPE tgi_request_duration histogram
tgi_request_duration_bucket{le="0.5"} 3
tgi_request_duration_bucket{le="+Inf"} 50
tgi_request_duration_sum 150.5
tgi_request_duration_count 50
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_bucket{le="100"} 20
tgi_request_generated_tokens_bucket{le="+Inf"} 50
tgi_request_generated_tokens_sum 9000
tgi_request_generated_tokens_count 50
# TYPE tgi_request_input_length histogram
tgi_request_input_length_bucket{le="+Inf"} 50
tgi_request_input_length_sum 21000
tgi_request_input_length_count 50
# TYPE tgi_request_mean_time_per_token_duration histogram
tgi_request_mean_time_per_token_duration_sum 1.2
tgi_request_mean_time_per_token_duration_count 50
"""

# As Triton writes it at :8002/metrics (per model and version; latencies as cumulative
# microsecond counters; GPU gauges beside).
TRITON = """\
# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="resnet-50",version="1"} 2000
nv_inference_request_success{model="ensemble",version="1"} 500
# HELP nv_inference_request_failure Number of failed inference requests, all batch sizes
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model="resnet-50",version="1",reason="BACKEND"} 3
# HELP nv_inference_count Number of inferences performed (does not include cached requests)
# TYPE nv_inference_count counter
nv_inference_count{model="resnet-50",version="1"} 16000
# HELP nv_inference_request_duration_us Cumulative inference request duration in microseconds (includes cached requests)
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{model="resnet-50",version="1"} 16000000
nv_inference_request_duration_us{model="ensemble",version="1"} 4000000
# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-0f9c"} 0.42
"""

# Triton's vLLM backend adds vLLM's names, labelled by model and version.
TRITON_VLLM = (
    TRITON
    + """\
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model="vllm_model",version="1"} 16
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_count{model="vllm_model",version="1"} 1
vllm:time_to_first_token_seconds_sum{model="vllm_model",version="1"} 0.0323
vllm:time_to_first_token_seconds_bucket{model="vllm_model",version="1",le="+Inf"} 1
"""
)
T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def test_vllm_counters_are_read_by_their_names_and_summed_over_labels():
    assert runtime_counters("vllm", VLLM) == {
        "requests": 120.0,  # every finish reason
        "generated_tokens": 45000.0,
        "prompt_tokens": 120000.0,
        "ttft_sum": 24.0,
        "ttft_count": 120.0,
        "latency_sum": 600.0,
        "latency_count": 120.0,
    }


def test_tgi_counts_tokens_from_its_histograms_and_reports_no_time_to_first_token():
    counters = runtime_counters("tgi", TGI)
    assert counters == {
        "requests": 50,  # successes, not every request counted
        "generated_tokens": 9000,
        "prompt_tokens": 21000,
        "latency_sum": 150.5,
        "latency_count": 50,
    }
    assert "ttft_sum" not in counters and "ttft_count" not in counters  # not reported, not zero


def test_triton_counts_requests_and_latency_in_seconds_but_no_tokens():
    counters = runtime_counters("triton", TRITON)
    assert counters == {"requests": 2500, "latency_sum": pytest.approx(20.0), "latency_count": 2500}
    assert "generated_tokens" not in counters  # inferences (nv_inference_count) are not tokens


def test_triton_with_its_vllm_backend_reports_tokens_and_time_to_first_token():
    counters = runtime_counters("triton", TRITON_VLLM)
    assert counters["generated_tokens"] == 16
    assert counters["ttft_count"] == 1 and counters["ttft_sum"] == pytest.approx(0.0323)


def test_an_unknown_runtime_reports_nothing_and_garbage_is_refused():
    assert runtime_counters("sglang", VLLM) == {}
    with pytest.raises(UnreadableMetrics):
        runtime_counters("vllm", 'vllm:generation_tokens_total{model_name="x" 12\n')


def test_a_counter_that_went_down_was_reset_and_counts_from_zero():
    assert counter_growth(100.0, 130.0) == 30.0
    assert counter_growth(100.0, 7.0) == 7.0  # the server restarted, then served 7
    assert counter_growth(None, 12.0) == 12.0


def read(previous: dict, readings: dict, at: datetime):
    return serving_growth(previous=previous, readings=readings, now=at, max_gap_seconds=300)


def test_the_first_read_only_sets_the_baseline_and_the_next_measures_from_it():
    growth, state = read({}, {"serve-0-a": runtime_counters("vllm", VLLM)}, T0)
    assert growth.seconds is None and growth.deltas == {}
    later = runtime_counters("vllm", VLLM.replace("45000.0", "46500.0").replace("120000.0", "123000.0"))
    growth, state = read(state, {"serve-0-a": later}, T0 + timedelta(seconds=60))
    assert growth.seconds == 60.0
    assert growth.deltas["generated_tokens"] == 1500.0 and growth.deltas["prompt_tokens"] == 3000.0
    assert growth.deltas["requests"] == 0.0
    assert state["pods"]["serve-0-a"]["counters"]["generated_tokens"] == 46500.0


def test_a_restarted_server_counts_from_zero_and_replicas_add_up():
    first = {"serve-0-a": {"generated_tokens": 5000.0}, "serve-1-b": {"generated_tokens": 800.0}}
    _, state = read({}, first, T0)
    # replica 0 restarted (its counter went down to 40); replica 1 served 200 more
    second = {"serve-0-a": {"generated_tokens": 40.0}, "serve-1-b": {"generated_tokens": 1000.0}}
    growth, _ = read(state, second, T0 + timedelta(seconds=60))
    assert growth.deltas == {"generated_tokens": 240.0}


def test_a_pod_new_since_the_last_read_counts_whole_and_one_gone_is_forgotten():
    _, state = read({}, {"serve-0-a": {"requests": 10.0}}, T0)
    growth, state = read(state, {"serve-0-b": {"requests": 3.0}}, T0 + timedelta(seconds=60))
    assert growth.deltas == {"requests": 3.0}  # the replacement pod started within the minute
    assert set(state["pods"]) == {"serve-0-b"}


def test_an_unread_pod_keeps_its_counters_and_only_sets_a_baseline_when_read_again():
    _, state = read({}, {"a": {"requests": 10.0}, "b": {"requests": 10.0}}, T0)
    growth, state = read(state, {"a": {"requests": 12.0}, "b": None}, T0 + timedelta(seconds=60))
    assert growth.deltas == {"requests": 2.0}
    assert state["pods"]["b"]["counters"] == {"requests": 10.0}  # kept
    # b's 30 more span two minutes, not this read's one: it is a baseline now, not growth
    growth, _ = read(state, {"a": {"requests": 13.0}, "b": {"requests": 40.0}}, T0 + timedelta(seconds=120))
    assert growth.seconds == 60.0 and growth.deltas == {"requests": 1.0} and growth.replicas == 1


def test_a_read_after_one_where_no_replica_answered_is_only_a_baseline():
    _, state = read({}, {"a": {"requests": 10.0}}, T0)
    growth, state = read(state, {"a": None}, T0 + timedelta(seconds=60))
    assert growth.seconds is None
    growth, state = read(state, {"a": {"requests": 19.0}}, T0 + timedelta(seconds=120))
    assert growth.seconds is None and growth.deltas == {}  # no row of nulls that would read "not reported"
    growth, _ = read(state, {"a": {"requests": 21.0}}, T0 + timedelta(seconds=180))
    assert growth.seconds == 60.0 and growth.deltas == {"requests": 2.0}


def test_a_read_long_after_the_last_only_sets_the_baseline():
    _, state = read({}, {"a": {"requests": 10.0}}, T0)
    growth, state = read(state, {"a": {"requests": 500.0}}, T0 + timedelta(minutes=30))
    assert growth.seconds is None and growth.deltas == {}
    growth, _ = read(state, {"a": {"requests": 530.0}}, T0 + timedelta(minutes=31))
    assert growth.seconds == 60.0 and growth.deltas == {"requests": 30.0}
