"""What a simulated model server says at `/metrics`: the runtime's own metric names in the
Prometheus text format, with counters that only grow while the replica lives (a replica made
again starts from zero, as a restarted server does).

Each deployment keeps a character of its own by its id, as the simulated GPU telemetry does
(workers.reconcile.telemetry_sim): busy (a steady stream of requests, swelling and ebbing),
idle (a request every ten minutes or so) or bursty (a minute of traffic in four). Counts are
the integral of that request rate from the replica's start to now, so two reads a minute apart
differ by what was served in that minute.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BUSY, IDLE, BURSTY = 0, 1, 2


@dataclass(frozen=True)
class Load:
    """A runtime's traffic when busy: requests a second, tokens per request in and out, and the
    mean time to first token and end-to-end latency in seconds."""

    requests_per_second: float
    prompt_tokens: int
    generated_tokens: int
    ttft_seconds: float
    latency_seconds: float


LLM = Load(
    requests_per_second=2.0, prompt_tokens=900, generated_tokens=380, ttft_seconds=0.18, latency_seconds=5.2
)
CLASSIFIER = Load(
    requests_per_second=40.0, prompt_tokens=0, generated_tokens=0, ttft_seconds=0.0, latency_seconds=0.008
)
# An embedding model: its prompts' tokens in, no token out; vLLM times its one output as the first
# token, so the time to first token is the latency.
EMBEDDER = Load(
    requests_per_second=20.0, prompt_tokens=250, generated_tokens=0, ttft_seconds=0.04, latency_seconds=0.04
)
EMBEDDING = "embedding"  # the catalog's task of an embedding model
IDLE_REQUESTS_PER_SECOND = 1 / 600


def _served(character: int, workload_id: int, peak: float, moment: float) -> float:
    """Requests served from the epoch to `moment` (seconds) at the character's rate: an
    antiderivative of the rate, so a difference of two moments is what was served between."""
    if character == IDLE:
        return IDLE_REQUESTS_PER_SECOND * moment
    if character == BURSTY:  # the whole rate in minutes where (minute + id) % 4 == 0, else none
        minutes = int(moment // 60)
        first = (-workload_id) % 4
        bursts = 0 if minutes <= first else (minutes - 1 - first) // 4 + 1
        partial = moment - minutes * 60 if (minutes + workload_id) % 4 == 0 else 0.0
        return peak * (60 * bursts + partial)
    # busy: peak x (1 + 0.25 sin(t/90 + id)), never below three quarters of it
    return peak * (moment - 22.5 * math.cos(moment / 90 + workload_id))


def _load(runtime: str, task: str) -> Load:
    if runtime == "triton":
        return CLASSIFIER
    return EMBEDDER if task == EMBEDDING else LLM


def requests_served(*, load: Load, workload_id: int, started: float, now: float) -> int:
    """Requests a replica started at `started` has served by `now` (epoch seconds), at `load`'s rate."""
    if now <= started:
        return 0
    character = workload_id % 3
    served = _served(character, workload_id, load.requests_per_second, now)
    served -= _served(character, workload_id, load.requests_per_second, started)
    return max(0, math.floor(served))


def _line(name: str, value: float, labels: dict[str, str]) -> str:
    shown = ",".join(f'{key}="{text}"' for key, text in labels.items())
    return f"{name}{{{shown}}} {value}" if shown else f"{name} {value}"


def _histogram(name: str, help_text: str, count: int, total: float, labels: dict[str, str]) -> list[str]:
    """A histogram with only its +Inf bucket: enough for sums and counts."""
    return [
        f"# HELP {name} {help_text}",
        f"# TYPE {name} histogram",
        _line(f"{name}_bucket", count, {**labels, "le": "+Inf"}),
        _line(f"{name}_sum", round(total, 6), labels),
        _line(f"{name}_count", count, labels),
    ]


def _counter(name: str, help_text: str, value: float, labels: dict[str, str]) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} counter", _line(name, value, labels)]


def _vllm(model: str, requests: int, load: Load) -> list[str]:
    labels = {"model_name": model}
    # one in twenty ends at its max_tokens; an embedding, which generates nothing, ends when read
    stopped = requests - requests // 20 if load.generated_tokens else requests
    return [
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        _line("vllm:num_requests_running", min(requests, 8), labels),
        *_counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", float(requests * load.prompt_tokens), labels),
        *_counter("vllm:generation_tokens_total", "Number of generation tokens processed.", float(requests * load.generated_tokens), labels),
        "# HELP vllm:request_success_total Count of successfully processed requests.",
        "# TYPE vllm:request_success_total counter",
        _line("vllm:request_success_total", float(stopped), {"finished_reason": "stop", **labels}),
        _line("vllm:request_success_total", float(requests - stopped), {"finished_reason": "length", **labels}),
        *_histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", requests, requests * load.ttft_seconds, labels),
        *_histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", requests, requests * load.latency_seconds, labels),
    ]  # fmt: skip


def _tgi(requests: int) -> list[str]:
    return [
        "# TYPE tgi_queue_size gauge",
        "tgi_queue_size 0",
        "# TYPE tgi_request_count counter",
        f"tgi_request_count {requests}",
        "# TYPE tgi_request_success counter",
        f"tgi_request_success {requests}",
        *_histogram("tgi_request_duration", "Total time spent processing the request (e2e latency)", requests, requests * LLM.latency_seconds, {}),
        *_histogram("tgi_request_generated_tokens", "Generated tokens per request", requests, requests * LLM.generated_tokens, {}),
        *_histogram("tgi_request_input_length", "Input token length per request", requests, requests * LLM.prompt_tokens, {}),
    ]  # fmt: skip


def _triton(model: str, requests: int) -> list[str]:
    labels = {"model": model, "version": "1"}
    return [
        *_counter("nv_inference_request_success", "Number of successful inference requests, all batch sizes", requests, labels),
        *_counter("nv_inference_request_failure", "Number of failed inference requests, all batch sizes", 0, labels),
        *_counter("nv_inference_count", "Number of inferences performed (does not include cached requests)", requests, labels),
        *_counter("nv_inference_exec_count", "Number of model executions performed (does not include cached requests)", requests, labels),
        *_counter("nv_inference_request_duration_us", "Cumulative inference request duration in microseconds (includes cached requests)", round(requests * CLASSIFIER.latency_seconds * 1e6), labels),
    ]  # fmt: skip


def runtime_metrics_text(
    *, runtime: str, model: str, workload_id: int, started: float, now: float, task: str = ""
) -> str:
    """The `/metrics` page of a replica of `runtime` serving `model` (of the catalog's `task`),
    started at `started`."""
    load = _load(runtime, task)
    requests = requests_served(load=load, workload_id=workload_id, started=started, now=now)
    if runtime == "tgi":
        lines = _tgi(requests)
    elif runtime == "triton":
        lines = _triton(model, requests)
    else:
        lines = _vllm(model, requests, load)
    return "\n".join(lines) + "\n"
