"""Serving figures for /metrics: every running deployment's last read of its runtime (about a
minute), summed or averaged by catalog model, runtime and team. A figure the runtime does not
report (TGI's time to first token, Triton's tokens) or that is undefined (a mean over no request,
a cost per token without tokens) is left out, never exposed as zero."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from prometheus_client.core import GaugeMetricFamily

from portal.deployments.serving_stats import cost_per_million_tokens, deployments_serving_now

LABELS = ["model", "runtime", "team"]


@dataclass
class _Group:
    """The deployments of one model, runtime and team, summed."""

    tokens_per_second: float | None = None
    prompt_tokens_per_second: float | None = None
    requests_per_second: float | None = None
    sums: dict[str, float] = field(default_factory=dict)
    dollars_per_hour_with_tokens: Decimal = Decimal(0)

    def add(self, name: str, value: float | None) -> None:
        if value is not None:
            self.sums[name] = self.sums.get(name, 0.0) + value


def _plus(total: float | None, value: float | None) -> float | None:
    if value is None:
        return total
    return value if total is None else total + value


def serving_families(now: datetime) -> Iterator[GaugeMetricFamily]:
    tokens = GaugeMetricFamily(
        "gpu_portal_serving_tokens_per_second",
        "Tokens generated per second over the deployments' last minute, by catalog model, runtime and team.",
        labels=LABELS,
    )
    prompt = GaugeMetricFamily(
        "gpu_portal_serving_prompt_tokens_per_second",
        "Prompt (input) tokens read per second over the deployments' last minute: all an embedding model does.",
        labels=LABELS,
    )
    requests = GaugeMetricFamily(
        "gpu_portal_serving_requests_per_second",
        "Requests completed per second over the deployments' last minute.",
        labels=LABELS,
    )
    ttft = GaugeMetricFamily(
        "gpu_portal_serving_time_to_first_token_seconds",
        "Mean time to first token over the deployments' last minute (absent where the runtime does not report it).",
        labels=LABELS,
    )
    latency = GaugeMetricFamily(
        "gpu_portal_serving_request_latency_seconds",
        "Mean end-to-end request latency over the deployments' last minute.",
        labels=LABELS,
    )
    cost = GaugeMetricFamily(
        "gpu_portal_serving_cost_per_million_tokens_dollars",
        "What a million generated tokens cost at the deployments' GPU price, over their last minute "
        "(only where tokens were generated).",
        labels=LABELS,
    )
    groups: dict[tuple[str, str, str], _Group] = {}
    for deployment in deployments_serving_now(now=now):
        group = groups.setdefault((deployment.model, deployment.runtime, deployment.team), _Group())
        sums, seconds = deployment.sums, deployment.seconds
        generated = sums.get("generated_tokens")
        if generated is not None:
            group.tokens_per_second = _plus(group.tokens_per_second, generated / seconds)
            group.dollars_per_hour_with_tokens += deployment.dollars_per_hour
        group.prompt_tokens_per_second = _plus(
            group.prompt_tokens_per_second,
            None if sums.get("prompt_tokens") is None else sums["prompt_tokens"] / seconds,
        )
        if sums.get("requests") is not None:
            group.requests_per_second = _plus(group.requests_per_second, sums["requests"] / seconds)
        for name in ("ttft_sum", "ttft_count", "latency_sum", "latency_count"):
            group.add(name, sums.get(name))
    for key, group in sorted(groups.items()):
        labels = list(key)
        if group.tokens_per_second is not None:
            tokens.add_metric(labels, group.tokens_per_second)
            per_million = cost_per_million_tokens(
                group.dollars_per_hour_with_tokens, group.tokens_per_second * 3600
            )
            if per_million is not None:
                cost.add_metric(labels, float(per_million))
        if group.prompt_tokens_per_second is not None:
            prompt.add_metric(labels, group.prompt_tokens_per_second)
        if group.requests_per_second is not None:
            requests.add_metric(labels, group.requests_per_second)
        if group.sums.get("ttft_count"):
            ttft.add_metric(labels, group.sums["ttft_sum"] / group.sums["ttft_count"])
        if group.sums.get("latency_count"):
            latency.add_metric(labels, group.sums["latency_sum"] / group.sums["latency_count"])
    yield from (tokens, prompt, requests, ttft, latency, cost)
