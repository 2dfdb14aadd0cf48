"""A serving runtime's Prometheus metrics as the portal reads them: the cumulative counters a
deployment's serving figures come from, and how much they grew between two reads. Pure: text in,
numbers out, no ORM.

What each runtime exposes (names checked against the runtimes' documentation and source):
- vLLM, `/metrics` on its API port: `vllm:generation_tokens_total`, `vllm:prompt_tokens_total`,
  `vllm:request_success_total` (by `finished_reason`), and the histograms
  `vllm:time_to_first_token_seconds` and `vllm:e2e_request_latency_seconds` (`_sum`, `_count`).
- TGI, `/metrics` on its port: the counter `tgi_request_success` (no `_total`: the Rust exporter
  leaves it off), and the histograms `tgi_request_generated_tokens` and `tgi_request_input_length`
  (their `_sum` is tokens) and `tgi_request_duration` (seconds). TGI has no time-to-first-token
  metric: that figure is "not reported", never a zero.
- Triton, `/metrics` on its metrics port (8002): `nv_inference_request_success` and the
  cumulative counter `nv_inference_request_duration_us` (microseconds). Triton counts inferences
  (`nv_inference_count`), not tokens; its vLLM backend adds the `vllm:` token and
  time-to-first-token metrics to the same page, and they are read where present.

Every sample of a name is summed over its labels (models, versions, finish reasons).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from prometheus_client.parser import text_string_to_metric_families

# The figures a read keeps, each a cumulative counter: completed requests, tokens, and the sums
# and counts of the time-to-first-token and end-to-end latency histograms (seconds).
FIELDS = (
    "requests",
    "generated_tokens",
    "prompt_tokens",
    "ttft_sum",
    "ttft_count",
    "latency_sum",
    "latency_count",
)
Counters = dict[str, float]

# field -> (sample name without a `_total` suffix, factor to seconds or units)
_VLLM: dict[str, tuple[str, float]] = {
    "requests": ("vllm:request_success", 1.0),
    "generated_tokens": ("vllm:generation_tokens", 1.0),
    "prompt_tokens": ("vllm:prompt_tokens", 1.0),
    "ttft_sum": ("vllm:time_to_first_token_seconds_sum", 1.0),
    "ttft_count": ("vllm:time_to_first_token_seconds_count", 1.0),
    "latency_sum": ("vllm:e2e_request_latency_seconds_sum", 1.0),
    "latency_count": ("vllm:e2e_request_latency_seconds_count", 1.0),
}
_TGI: dict[str, tuple[str, float]] = {
    "requests": ("tgi_request_success", 1.0),
    "generated_tokens": ("tgi_request_generated_tokens_sum", 1.0),
    "prompt_tokens": ("tgi_request_input_length_sum", 1.0),
    "latency_sum": ("tgi_request_duration_sum", 1.0),
    "latency_count": ("tgi_request_duration_count", 1.0),
}
_TRITON: dict[str, tuple[str, float]] = {
    "requests": ("nv_inference_request_success", 1.0),
    "latency_sum": ("nv_inference_request_duration_us", 1e-6),
    "latency_count": ("nv_inference_request_success", 1.0),
    # Only with Triton's vLLM backend, which reports these beside Triton's own.
    "generated_tokens": ("vllm:generation_tokens", 1.0),
    "prompt_tokens": ("vllm:prompt_tokens", 1.0),
    "ttft_sum": ("vllm:time_to_first_token_seconds_sum", 1.0),
    "ttft_count": ("vllm:time_to_first_token_seconds_count", 1.0),
}
RUNTIME_FIELDS = {"vllm": _VLLM, "tgi": _TGI, "triton": _TRITON}


class UnreadableMetrics(ValueError):
    """The text is not in the Prometheus text format."""


def _totals(text: str) -> dict[str, float]:
    """Every sample's value summed over its labels, by sample name; a counter's name without its
    `_total` (the parser adds one to counters that lack it). Buckets and quantiles are left out."""
    totals: dict[str, float] = defaultdict(float)
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if "le" in sample.labels or "quantile" in sample.labels or sample.name.endswith("_created"):
                    continue
                if not math.isfinite(sample.value):
                    continue
                totals[sample.name.removesuffix("_total")] += sample.value
    except (ValueError, TypeError, IndexError) as error:
        raise UnreadableMetrics(str(error)) from error
    return totals


def runtime_counters(runtime: str, text: str) -> Counters:
    """The counters of FIELDS that `runtime`'s metrics text holds; a field the runtime does not
    report is left out (not zero). UnreadableMetrics for text that is not Prometheus's format."""
    totals = _totals(text)
    return {
        field: totals[name] * factor
        for field, (name, factor) in RUNTIME_FIELDS.get(runtime, {}).items()
        if name in totals
    }


def counter_growth(before: float | None, now: float) -> float:
    """How much a counter grew since `before`: a counter that went down was reset (its process
    restarted) and counts from zero; one not seen before counts whole."""
    if before is None or now < before:
        return now
    return now - before


@dataclass(frozen=True)
class Growth:
    """What a deployment's replicas served between the last read and this one: `seconds` is the
    span (None: this read only sets the baseline), `deltas` the growth of each field some replica
    reports (a field none reports is absent), `replicas` how many replicas it adds up."""

    seconds: float | None
    deltas: dict[str, float]
    replicas: int = 0


def _stamp(moment: datetime) -> str:
    return moment.isoformat()


def serving_growth(
    *, previous: dict, readings: dict[str, Counters | None], now: datetime, max_gap_seconds: float
) -> tuple[Growth, dict]:
    """The growth since the previous read, and the state to keep for the next one.

    `previous` is the state the last read returned: `{"at", "pods": {pod: {"at", "counters"}}}`.
    `readings` holds each replica's counters by pod name, None for a replica that could not be
    read (it keeps its last counters; a pod gone from `readings` is forgotten). Only replicas read
    at the last read too give growth over the span, so every delta covers the same seconds; a pod
    new since then counts from zero (it started meanwhile); a first read, or one after more than
    `max_gap_seconds`, only sets the baseline.
    """
    last_stamp = previous.get("at") if isinstance(previous, dict) else None
    last_at = datetime.fromisoformat(last_stamp) if isinstance(last_stamp, str) else None
    span = (now - last_at).total_seconds() if last_at is not None else None
    if span is not None and not 0 < span <= max_gap_seconds:
        span = None
    before_pods = (previous.get("pods") or {}) if isinstance(previous, dict) else {}
    deltas: dict[str, float] = {}
    kept: dict[str, dict] = {}
    measured = 0
    for pod, counters in sorted(readings.items()):
        before = before_pods.get(pod)
        if counters is None:
            if before is not None:
                kept[pod] = before
            continue
        kept[pod] = {"at": _stamp(now), "counters": counters}
        if span is None:
            continue
        if before is None:
            base: Counters = {}  # started since the last read
        elif before.get("at") != last_stamp:
            continue  # unread at the last read: its growth spans more than this read's seconds
        else:
            base = before.get("counters") or {}
        measured += 1
        for field, value in counters.items():
            deltas[field] = deltas.get(field, 0.0) + counter_growth(base.get(field), value)
    growth = Growth(seconds=span if measured else None, deltas=deltas, replicas=measured)
    return growth, {"at": _stamp(now), "pods": kept}
