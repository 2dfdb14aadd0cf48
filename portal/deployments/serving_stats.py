"""Serving figures of deployments: the worker's reads of each runtime's metrics, recorded as the
growth of its counters per minute (ServingMinute), and the figures read back from them for the
deployment page, the API and /metrics: generated tokens and requests per second, the mean time to
first token and end-to-end latency, and what a million generated tokens cost at the GPU price the
deployment pays. Services and selectors of one topic, kept apart from the deployment lifecycle."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.db.models import Sum
from django.db.models.functions import TruncHour

from portal.catalog.models import CatalogModel, Runtime
from portal.core.errors import ValidationFailed
from portal.deployments.models import Serving, ServingMinute
from portal.deployments.runtime_metrics import FIELDS, UnreadableMetrics, runtime_counters, serving_growth
from portal.fleet.models import Allocation
from portal.spend.selectors import allocation_cost, hourly_rate
from portal.workloads.models import Workload, WorkloadKind, WorkloadState

# A read longer than this after the one before only sets the baseline (the worker was down).
MAX_GAP_SECONDS = 300.0
# The last minute's figures come from a read at most this old.
LATEST_WITHIN = timedelta(minutes=3)
STEPS = {60: "minute", 3600: "hour"}
MILLION = Decimal(1_000_000)
SECONDS_PER_HOUR = Decimal(3600)


# --- recording the worker's reads ------------------------------------------------------------------


@transaction.atomic
def serving_metrics_record(
    *, deployment_id: int, readings: dict[str, str | None], now: datetime
) -> ServingMinute | None:
    """Record one read of a deployment's runtime metrics: `readings` is each replica's metrics
    text by pod name (None: the pod is there but could not be read). Adds the growth since the
    last read to the minute's row and keeps the counters for the next read; returns the row, or
    None when this read only set the baseline. Repeating a read adds (almost) nothing."""
    serving = (
        Serving.objects.select_for_update()
        .select_related("runtime")
        .filter(workload_id=deployment_id)
        .first()
    )
    if serving is None:
        return None
    counters: dict[str, dict[str, float] | None] = {}
    unread: list[str] = []
    for pod, text in readings.items():
        try:
            counters[pod] = None if text is None else runtime_counters(serving.runtime.slug, text)
        except UnreadableMetrics:
            counters[pod] = None
        if counters[pod] is None:
            unread.append(pod)
    growth, state = serving_growth(
        previous=serving.metrics_state, readings=counters, now=now, max_gap_seconds=MAX_GAP_SECONDS
    )
    error = f"could not read the metrics of {', '.join(sorted(unread))}" if unread else ""
    Serving.objects.filter(pk=serving.pk).update(
        metrics_state=state, metrics_read_at=now, metrics_error=error[:500]
    )
    if growth.seconds is None:
        return None  # a baseline: no replica was read both now and at the last read
    minute = now.replace(second=0, microsecond=0)
    row = ServingMinute.objects.select_for_update().filter(workload_id=deployment_id, minute=minute).first()
    if row is None:
        row = ServingMinute(workload_id=deployment_id, minute=minute, seconds=0.0)
    row.seconds += growth.seconds
    for field, delta in growth.deltas.items():
        setattr(row, field, (getattr(row, field) or 0.0) + delta)
    row.save()
    return row


def serving_metrics_failed(*, deployment_id: int, error: str) -> None:
    """The read failed as a whole (the cluster did not answer): say so; the counters stay, so the
    next read that succeeds measures from the last one that did (or sets a new baseline)."""
    Serving.objects.filter(workload_id=deployment_id).update(metrics_error=error[:500])


def serving_minutes_prune(*, now: datetime, minute_days: int) -> int:
    """Forget serving minutes past their retention; how many went."""
    deleted, _ = ServingMinute.objects.filter(minute__lt=now - timedelta(days=minute_days)).delete()
    return deleted


def deployments_to_read() -> list[int]:
    """Running deployments, whose runtimes answer."""
    return list(
        Workload.objects.filter(kind=WorkloadKind.DEPLOYMENT, state=WorkloadState.RUNNING)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


# --- reading the figures back ----------------------------------------------------------------------


def _per(amount: float | None, over: float | None) -> float | None:
    return amount / over if amount is not None and over else None


def cost_per_million_tokens(dollars: Decimal, tokens: float | None) -> Decimal | None:
    """What a million tokens cost when `dollars` bought `tokens`; None without tokens."""
    if not tokens or tokens <= 0:
        return None
    return (dollars * MILLION / Decimal(str(tokens))).quantize(Decimal("0.0001"))


@dataclass(frozen=True)
class ServingFigures:
    """A deployment's serving over a span: rates per second, means in seconds, and the cost of a
    million generated tokens, and of a million prompt tokens (what an embedding model is paid
    for: it generates none), in dollars. None where the runtime does not report the figure (see
    `reported`) or nothing happened (no request, no token)."""

    seconds: float
    reported: frozenset[str]  # the FIELDS the runtime reported over the span
    tokens_per_second: float | None
    prompt_tokens_per_second: float | None
    requests_per_second: float | None
    time_to_first_token_seconds: float | None
    request_latency_seconds: float | None
    cost_per_million_tokens: Decimal | None
    cost_per_million_prompt_tokens: Decimal | None

    def reports(self, figure: str) -> bool:
        """Whether the runtime reports what `figure` needs ("tokens", "prompt", "ttft", "latency",
        "requests")."""
        needs = {
            "tokens": "generated_tokens",
            "prompt": "prompt_tokens",
            "ttft": "ttft_count",
            "latency": "latency_count",
            "requests": "requests",
        }
        return needs[figure] in self.reported


def figures_of(sums: dict[str, float | None], *, seconds: float, dollars: Decimal | None) -> ServingFigures:
    """Figures from the summed growth of FIELDS over `seconds`, and what the span cost."""
    tokens, prompt = sums.get("generated_tokens"), sums.get("prompt_tokens")
    return ServingFigures(
        seconds=seconds,
        reported=frozenset(field for field in FIELDS if sums.get(field) is not None),
        tokens_per_second=_per(tokens, seconds),
        prompt_tokens_per_second=_per(prompt, seconds),
        requests_per_second=_per(sums.get("requests"), seconds),
        time_to_first_token_seconds=_per(sums.get("ttft_sum"), sums.get("ttft_count")),
        request_latency_seconds=_per(sums.get("latency_sum"), sums.get("latency_count")),
        cost_per_million_tokens=cost_per_million_tokens(dollars, tokens) if dollars is not None else None,
        cost_per_million_prompt_tokens=cost_per_million_tokens(dollars, prompt)
        if dollars is not None
        else None,
    )


def _row_sums(row: ServingMinute) -> dict[str, float | None]:
    return {field: getattr(row, field) for field in FIELDS}


def _holds(workload: Workload) -> list[Allocation]:
    holds = getattr(workload, "all_allocations", None)
    return list(workload.allocations.all()) if holds is None else holds


@dataclass(frozen=True)
class ServingNow:
    """A deployment's serving over its last read (about a minute) and over the last hour; None
    where there is no reading in that span."""

    last_minute: ServingFigures | None
    last_hour: ServingFigures | None


def deployment_serving_now(workload: Workload, *, now: datetime) -> ServingNow:
    """Two queries: the last read's row, and the last hour's rows summed. The cost is the
    deployment's GPU holds over the same spans (from its prefetched allocations, if any)."""
    latest = (
        ServingMinute.objects.filter(workload=workload, minute__gte=now - LATEST_WITHIN)
        .order_by("-minute")
        .first()
    )
    hour = ServingMinute.objects.filter(workload=workload, minute__gte=now - timedelta(hours=1)).aggregate(
        seconds=Sum("seconds"), **{field: Sum(field) for field in FIELDS}
    )
    holds = _holds(workload)
    last_minute = None
    if latest is not None and latest.seconds:
        # The span just read, at what the live holds cost an hour.
        dollars = hourly_rate(holds) * Decimal(str(latest.seconds)) / SECONDS_PER_HOUR
        last_minute = figures_of(_row_sums(latest), seconds=latest.seconds, dollars=dollars)
    last_hour = None
    seconds = hour.pop("seconds")
    if seconds:
        start = now - timedelta(seconds=seconds)
        dollars = sum((allocation_cost(hold, now=now, start=start, end=now) for hold in holds), Decimal(0))
        last_hour = figures_of(hour, seconds=seconds, dollars=dollars)
    return ServingNow(last_minute=last_minute, last_hour=last_hour)


@dataclass(frozen=True)
class ServingPoint:
    at: datetime
    tokens_per_second: float | None
    prompt_tokens_per_second: float | None
    requests_per_second: float | None
    time_to_first_token_seconds: float | None
    request_latency_seconds: float | None


def deployment_serving_series(
    *, workload: Workload, start: datetime, end: datetime, step: int
) -> list[ServingPoint]:
    """The deployment's serving minute by minute (or hour by hour) within [start, end): one query."""
    if step not in STEPS:
        raise ValidationFailed(
            f"`step` is one of {', '.join(str(s) for s in STEPS)} seconds.", fields={"step": ["60 or 3600"]}
        )
    if end <= start or end - start > timedelta(days=366):
        raise ValidationFailed(
            "`from` must come before `to`, at most a year apart.", fields={"to": ["after from"]}
        )
    rows = ServingMinute.objects.filter(workload=workload, minute__gte=start, minute__lt=end)
    sums = {"seconds": Sum("seconds"), **{field: Sum(field) for field in FIELDS}}
    if step == 3600:
        grouped: Iterable[dict] = (
            rows.annotate(at=TruncHour("minute")).values("at").annotate(**sums).order_by("at")
        )
    else:
        grouped = rows.values("minute", "seconds", *FIELDS).order_by("minute")
    points = []
    for row in grouped:
        figures = figures_of(row, seconds=row["seconds"] or 0.0, dollars=None)
        points.append(
            ServingPoint(
                at=row.get("at") or row["minute"],
                tokens_per_second=figures.tokens_per_second,
                prompt_tokens_per_second=figures.prompt_tokens_per_second,
                requests_per_second=figures.requests_per_second,
                time_to_first_token_seconds=figures.time_to_first_token_seconds,
                request_latency_seconds=figures.request_latency_seconds,
            )
        )
    return points


@dataclass(frozen=True)
class DeploymentServing:
    """One running deployment's last read, as /metrics groups it: by model, runtime and team."""

    model: str
    runtime: str
    team: str
    seconds: float
    sums: dict[str, float | None]
    dollars_per_hour: Decimal


def deployments_serving_now(*, now: datetime) -> list[DeploymentServing]:
    """The last read of every running deployment read within LATEST_WITHIN, with what its live
    holds cost an hour: two queries, whatever the number of deployments."""
    rows = (
        ServingMinute.objects.filter(
            minute__gte=now - LATEST_WITHIN, workload__state=WorkloadState.RUNNING, seconds__gt=0
        )
        .values(
            "workload_id",
            "seconds",
            *FIELDS,
            "workload__team__slug",
            "workload__serving__model__slug",
            "workload__serving__runtime__slug",
        )
        .order_by("workload_id", "-minute")
    )
    latest: dict[int, dict] = {}
    for row in rows:
        latest.setdefault(row["workload_id"], row)
    rates: dict[int, Decimal] = {}
    for workload_id, price, numerator, denominator in Allocation.objects.filter(
        workload_id__in=list(latest), ended_at__isnull=True
    ).values_list("workload_id", "price_per_hour", "share_numerator", "share_denominator"):
        rates[workload_id] = rates.get(workload_id, Decimal(0)) + price * numerator / denominator
    return [
        DeploymentServing(
            model=row["workload__serving__model__slug"] or "",
            runtime=row["workload__serving__runtime__slug"] or "",
            team=row["workload__team__slug"],
            seconds=row["seconds"],
            sums={field: row[field] for field in FIELDS},
            dollars_per_hour=rates.get(workload_id, Decimal(0)),
        )
        for workload_id, row in sorted(latest.items())
    ]


# --- the deployment page's table ---------------------------------------------------------------------


@dataclass(frozen=True)
class ServingCell:
    text: str
    muted: bool = False  # no figure: why not, rather than a number


@dataclass(frozen=True)
class ServingLine:
    label: str
    last_minute: ServingCell
    last_hour: ServingCell


def _seconds_text(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _tokens_text(value: float) -> str:
    return f"{value:,.0f} tokens/s" if value >= 10 else f"{value:.2f} tokens/s"


def _cell(figures: ServingFigures | None, figure: str, runtime: str) -> ServingCell:
    if figures is None:
        return ServingCell("no reading", muted=True)
    needs = {"cost": "tokens", "prompt_cost": "prompt"}.get(figure, figure)
    if not figures.reports(needs):
        return ServingCell(f"not reported by {runtime}", muted=True)
    if figure in ("tokens", "prompt"):
        rate = figures.tokens_per_second if figure == "tokens" else figures.prompt_tokens_per_second
        return ServingCell(_tokens_text(rate or 0.0))
    if figure == "requests":
        return ServingCell(f"{figures.requests_per_second or 0.0:.2f} req/s")
    if figure in ("cost", "prompt_cost"):
        cost = figures.cost_per_million_tokens if figure == "cost" else figures.cost_per_million_prompt_tokens
        if cost is not None:
            return ServingCell(f"${cost:,.2f}")
        return ServingCell("no tokens generated" if figure == "cost" else "no tokens embedded", muted=True)
    value = figures.time_to_first_token_seconds if figure == "ttft" else figures.request_latency_seconds
    return ServingCell(_seconds_text(value)) if value is not None else ServingCell("no requests", muted=True)


SHORT_NAMES = {"vllm": "vLLM", "tgi": "TGI", "triton": "Triton"}


def runtime_label(runtime: Runtime) -> str:
    """The runtime as a line of the page names it: "vLLM", "TGI", "Triton"."""
    return SHORT_NAMES.get(runtime.slug, runtime.name)


SERVING_LINES = (
    ("tokens", "Tokens generated"),
    ("requests", "Requests"),
    ("ttft", "Time to first token (mean)"),
    ("latency", "Request latency (mean)"),
    ("cost", "Cost per million tokens"),
)
# By the catalog model's task, where it is not text generation. An embedding model reads its
# input and generates nothing: its tokens are the prompts' (vLLM counts no generated token for
# it, and its "first token" is the whole answer). An image classifier has no tokens at all.
LINES_BY_TASK = {
    CatalogModel.Task.EMBEDDING: (
        ("prompt", "Tokens embedded"),
        ("requests", "Requests"),
        ("latency", "Request latency (mean)"),
        ("prompt_cost", "Cost per million tokens embedded"),
    ),
    CatalogModel.Task.IMAGE_CLASSIFICATION: (("requests", "Requests"), ("latency", "Request latency (mean)")),
}


def serving_lines(serving_now: ServingNow, *, runtime: str, task: str) -> list[ServingLine]:
    """The page's table for a model of the catalog's `task`: each figure over the last read and the
    last hour, or why there is none ("not reported by TGI", "no requests", "no reading")."""
    return [
        ServingLine(
            label=label,
            last_minute=_cell(serving_now.last_minute, figure, runtime),
            last_hour=_cell(serving_now.last_hour, figure, runtime),
        )
        for figure, label in LINES_BY_TASK.get(task, SERVING_LINES)
    ]


NOT_REPORTED = (
    ("tokens", ("tokens_per_second", "cost_per_million_tokens")),
    ("prompt", ("prompt_tokens_per_second", "cost_per_million_prompt_tokens")),
    ("requests", ("requests_per_second",)),
    ("ttft", ("time_to_first_token_seconds",)),
    ("latency", ("request_latency_seconds",)),
)


def not_reported(serving_now: ServingNow) -> list[str]:
    """The API's figure names the runtime's reads did not carry (over the last hour, else the last
    read); empty before the first read."""
    figures = serving_now.last_hour or serving_now.last_minute
    if figures is None:
        return []
    return [name for figure, names in NOT_REPORTED if not figures.reports(figure) for name in names]
