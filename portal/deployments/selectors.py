"""Reads over deployments on top of the shared workload selectors: a deployment with everything
it shows, where each replica runs, its endpoint, and a request that works against it."""

from __future__ import annotations

import json
import shlex
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models import Prefetch, QuerySet
from django.urls import reverse
from django.utils import timezone

from portal.accounts.models import Team, User
from portal.catalog.models import CatalogModel, Runtime
from portal.catalog.sizing import Fit
from portal.core.errors import ValidationFailed
from portal.core.selectors import one_visible
from portal.deployments.models import Serving
from portal.fleet.models import Allocation, GpuType
from portal.fleet.placement import FleetState, NoFit
from portal.fleet.selectors import gpu_snapshot, price_per_hour, share_rule_text
from portal.fleet.services import placement_request
from portal.spend.selectors import to_cents
from portal.workloads.models import Approval, Workload, WorkloadKind, WorkloadState
from portal.workloads.policy import (
    PolicyEstimate,
    fraction_to_decimal,
    request_share,
    request_verdict,
    share_hourly_cost,
    within_max_lifetime,
)
from portal.workloads.queue_wait import QueueWait
from portal.workloads.selectors import (
    WaitingCost,
    common_row_fields,
    in_scope,
    placement_label,
    waiting_cost,
    workload_actions_for,
    workloads_visible_to,
)

# States in which the endpoint answers: running, or provisioning while it scales.
ENDPOINT_STATES = (WorkloadState.PROVISIONING, WorkloadState.RUNNING)
EXAMPLE_PROMPT = "Say hello in one sentence."
EXAMPLE_TEXT = "GPU portals make model serving self-service."
# An image classifier's input in KServe v2: one 224x224 RGB image, here all zeros.
IMAGE_SHAPE = (1, 3, 224, 224)


def deployments_visible_to(user: User) -> QuerySet[Workload]:
    """Deployments the user may see (researcher: own; lead: the team's; admin: all)."""
    return workloads_visible_to(user, kind=WorkloadKind.DEPLOYMENT)


def deployments_with_details(queryset: QuerySet[Workload]) -> QuerySet[Workload]:
    """The serving row joined, and allocations (with their nodes) and approvals prefetched: three
    queries for any number of deployments. Same attribute names as `workloads_with_details`, so
    the shared cost and approval selectors use the prefetches."""
    return queryset.select_related("serving__model", "serving__runtime").prefetch_related(
        Prefetch(
            "allocations",
            queryset=Allocation.objects.select_related("gpu__node", "mig_slice").order_by(
                "replica", "gpu__index"
            ),
            to_attr="all_allocations",
        ),
        Prefetch(
            "approvals",
            queryset=Approval.objects.select_related("decided_by").order_by("-created_at", "-id"),
            to_attr="all_approvals",
        ),
    )


def deployment_get_for(*, user: User, deployment_id: int) -> Workload:
    """One deployment the user may see, with its details; else NotFound."""
    return one_visible(
        deployments_with_details(deployments_visible_to(user)), pk=deployment_id, what="deployment"
    )


def deployment_placements(workload: Workload) -> list[dict]:
    """Where each replica runs now, in replica order: `{"replica", "node", "gpus"}` for whole GPUs,
    `{"replica", "node", "gpu", "mig_profile", "start"}` for a slice. Empty until placed and
    once the GPUs are given back."""
    allocations = getattr(workload, "all_allocations", None)
    if allocations is None:
        allocations = list(workload.allocations.select_related("gpu__node", "mig_slice"))
    by_replica: dict[int, list[Allocation]] = defaultdict(list)
    for allocation in allocations:
        # Replicas scaled away keep their GPUs only until the cluster has removed them.
        if allocation.released_at is None and allocation.replica < workload.replicas:
            by_replica[allocation.replica].append(allocation)
    placements = []
    for replica in sorted(by_replica):
        holds = by_replica[replica]
        first = holds[0]
        if first.mig_profile:
            placements.append(
                {
                    "replica": replica,
                    "node": first.gpu.node.name,
                    "gpu": first.gpu.index,
                    "mig_profile": first.mig_profile,
                    "start": first.mig_slice.start if first.mig_slice else None,
                }
            )
        else:
            placements.append(
                {"replica": replica, "node": first.gpu.node.name, "gpus": sorted(a.gpu.index for a in holds)}
            )
    return placements


def deployment_serving(workload: Workload) -> Serving | None:
    try:
        return workload.serving
    except Serving.DoesNotExist:
        return None


def deployment_endpoint(workload: Workload) -> str | None:
    """The URL clients call: known once it has run, and only while it serves."""
    if workload.state in ENDPOINT_STATES and workload.access:
        return workload.access.rstrip("/")
    return None


def served_model_name(serving: Serving) -> str:
    """The name clients pass as `model`: the checkpoint the server loaded (vLLM's
    `vllm serve <checkpoint>`, TGI's `--model-id`), or the catalog slug for Triton, whose model
    repository names the model after it."""
    command = list(serving.command or [])
    if command[:2] == ["vllm", "serve"] and len(command) > 2:
        return command[2]
    if "--model-id" in command and command.index("--model-id") + 1 < len(command):
        return command[command.index("--model-id") + 1]
    if serving.runtime.slug == Runtime.Slug.TRITON:
        return serving.model.slug
    return serving.model.source


# Every call carries a serving token (portal.deployments.gate), read from the caller's environment.
TOKEN_VARIABLE = "SERVING_TOKEN"  # noqa: S105 (the variable's name)
AUTH_HEADER = f'-H "Authorization: Bearer ${TOKEN_VARIABLE}"'


def _curl(url: str, body: dict | None = None) -> str:
    if body is None:
        return f"curl -s {shlex.quote(url)} {AUTH_HEADER}"
    return (
        f"curl -s {shlex.quote(url)} \\\n"
        f"  {AUTH_HEADER} \\\n"
        "  -H 'Content-Type: application/json' \\\n"
        f"  -d {shlex.quote(json.dumps(body))}"
    )


def _kserve_example(endpoint: str, serving: Serving) -> str:
    name = served_model_name(serving)
    metadata = f"{endpoint}/v2/models/{name}"
    if serving.model.task != CatalogModel.Task.IMAGE_CLASSIFICATION:
        return f"# The model's inputs and outputs:\n{_curl(metadata)}"
    datatype = "FP32" if serving.precision == "fp32" else "FP16"
    elements = 1
    for size in IMAGE_SHAPE:
        elements *= size
    image = {"name": "input__0", "shape": list(IMAGE_SHAPE), "datatype": datatype}
    # The zeros are made by python3 and piped in: 150,528 numbers belong neither on a page nor in
    # one argument (Linux refuses an argument over 128 KiB: "Argument list too long").
    fields = json.dumps(image)[:-1]  # the image's fields but its data, which python3 adds
    make_body = f'import json; print(json.dumps({{"inputs": [{fields}, "data": [0] * {elements}}}]}}))'
    return (
        f"# Input names and types are in the model's metadata: {_curl(metadata)}\n"
        f"python3 -c {shlex.quote(make_body)} \\\n"
        f"  | curl -s {shlex.quote(metadata + '/infer')} \\\n"
        f"  {AUTH_HEADER} \\\n"
        "  -H 'Content-Type: application/json' \\\n"
        "  -d @-"
    )


def _simulated(workload: Workload) -> bool:
    return workload.cluster is not None and workload.cluster.driver == "simulated"


def deployment_call_base(workload: Workload) -> str | None:
    """Where calls go: the endpoint; on a simulated cluster, where no model server runs, the
    portal's stand-in for it, behind the same check."""
    endpoint = deployment_endpoint(workload)
    if endpoint is None or not _simulated(workload):
        return endpoint
    host = urlsplit(endpoint).hostname or ""
    return f"{settings.PORTAL_BASE_URL}{reverse('endpoint-simulated', args=[host])}".rstrip("/")


def simulated_serving(workload_id: int) -> tuple[Workload, Serving] | None:
    """A deployment on the simulated cluster and what it serves, for the portal's stand-in for its
    model server (portal.deployments.simulated); None off the simulated cluster."""
    workload = (
        Workload.objects.select_related("cluster", "serving__model", "serving__runtime")
        .filter(pk=workload_id, kind=WorkloadKind.DEPLOYMENT)
        .first()
    )
    serving = deployment_serving(workload) if workload is not None else None
    if workload is None or serving is None or not _simulated(workload):
        return None
    return workload, serving


def deployment_example(workload: Workload) -> str | None:
    """A request that works against the running endpoint (None until there is one): for an
    OpenAI-compatible server a chat completion, or an embedding for embedding models; for KServe v2
    an inference request. On a simulated cluster it calls the portal's stand-in."""
    endpoint = deployment_call_base(workload)
    serving = deployment_serving(workload)
    if endpoint is None or serving is None:
        return None
    if serving.api == Runtime.Api.KSERVE_V2:
        return _kserve_example(endpoint, serving)
    model = served_model_name(serving)
    if serving.model.task == CatalogModel.Task.EMBEDDING:
        return _curl(f"{endpoint}/v1/embeddings", {"model": model, "input": EXAMPLE_TEXT})
    if serving.model.task == CatalogModel.Task.TEXT_GENERATION:
        return _curl(
            f"{endpoint}/v1/chat/completions",
            {"model": model, "messages": [{"role": "user", "content": EXAMPLE_PROMPT}], "max_tokens": 64},
        )
    return _curl(f"{endpoint}/v1/models")


def deployment_client_example(workload: Workload) -> str | None:
    """For an OpenAI-compatible endpoint, the OpenAI Python client pointed at it (it sends its
    `api_key` as the bearer token the endpoint check reads) making the curl example's call."""
    base = deployment_call_base(workload)
    serving = deployment_serving(workload)
    if base is None or serving is None or serving.api != Runtime.Api.OPENAI:
        return None
    model = json.dumps(served_model_name(serving))
    if serving.model.task == CatalogModel.Task.EMBEDDING:
        call = (
            f"vectors = client.embeddings.create(model={model}, input={json.dumps(EXAMPLE_TEXT)})\n"
            "print(len(vectors.data[0].embedding), vectors.data[0].embedding[:4])"
        )
    elif serving.model.task == CatalogModel.Task.TEXT_GENERATION:
        message = json.dumps({"role": "user", "content": EXAMPLE_PROMPT})
        call = (
            f"reply = client.chat.completions.create(\n    model={model},\n"
            f"    messages=[{message}],\n    max_tokens=64,\n)\n"
            "print(reply.choices[0].message.content)"
        )
    else:
        call = "print([model.id for model in client.models.list()])"
    return (
        "import os\n"
        "from openai import OpenAI\n\n"
        f'client = OpenAI(base_url="{base}/v1", api_key=os.environ["{TOKEN_VARIABLE}"])\n'
        f"{call}"
    )


@dataclass(frozen=True)
class DeploymentRow:
    """One deployment as the list or the detail page shows it."""

    deployment: Workload
    serving: Serving | None
    cost_so_far: Decimal
    hourly_cost: Decimal
    placements: list[dict]
    queue_position: int | None
    approval: Approval | None
    endpoint: str | None
    example: str | None
    client_example: str | None = None  # the OpenAI Python client pointed at it
    actions: list[str] = field(default_factory=list)  # what can be done to it now
    estimated_wait: QueueWait | None = None  # while queued
    waiting_cost: WaitingCost | None = None  # while waiting: its cost once placed

    @property
    def ready_replicas(self) -> int:
        """Ready replicas of those wanted (ones being scaled away are not counted)."""
        if self.serving is None or not self.deployment.is_live:
            return 0
        return min(self.serving.ready_replicas, self.deployment.replicas)

    @property
    def all_ready(self) -> bool:
        return self.ready_replicas == self.deployment.replicas

    @property
    def replica_health(self) -> str:
        """'2 of 2 ready', or 'scaled to zero'."""
        if not self.deployment.replicas:
            return "scaled to zero"
        return f"{self.ready_replicas} of {self.deployment.replicas} ready"

    @property
    def placement_labels(self) -> list[str]:
        return [f"replica {p['replica']}: {placement_label(p)}" for p in self.placements]

    @property
    def pending_scale(self) -> Approval | None:
        """A scale request that waits for a lead."""
        approval = self.approval
        if approval and approval.kind == Approval.Kind.SCALE and approval.state == Approval.State.PENDING:
            return approval
        return None


def dashboard_deployments(*, user: User, scope: str) -> QuerySet[Workload]:
    """The list's deployments in `scope` (see `in_scope`), with what their rows show joined."""
    return deployments_with_details(in_scope(deployments_visible_to(user), user=user, scope=scope))


def deployment_rows(workloads: list[Workload], *, now: datetime | None = None) -> list[DeploymentRow]:
    """Rows for deployments fetched with `deployments_with_details`: one more query for queue places."""
    return [
        DeploymentRow(
            deployment=workload,
            serving=deployment_serving(workload),
            placements=deployment_placements(workload),
            endpoint=deployment_endpoint(workload),
            example=deployment_example(workload),
            client_example=deployment_client_example(workload),
            **costs,
        )
        for workload, costs in zip(workloads, common_row_fields(workloads, now=now), strict=True)
    ]


def deployment_row_for(*, user: User, deployment_id: int) -> DeploymentRow:
    """The detail page's deployment; NotFound when the user may not see it."""
    (row,) = deployment_rows([deployment_get_for(user=user, deployment_id=deployment_id)])
    actions = workload_actions_for(row.actions, user=user, workload=row.deployment)
    return replace(row, waiting_cost=waiting_cost(row.deployment), actions=actions)


def fit_value(fit: Fit) -> str:
    """A fit as a form value: 'h100-80gb/2' (whole GPUs) or 'h100-80gb/3g.40gb' (a slice)."""
    return f"{fit.gpu_type}/{fit.mig_profile or fit.gpus}"


def fit_what(fit: Fit) -> str:
    """'1x h100-80gb (80 GB)' or '3g.40gb slice of h100-80gb'."""
    if fit.mig_profile:
        return f"{fit.mig_profile} slice of {fit.gpu_type}"
    return f"{fit.gpus}x {fit.gpu_type} ({fit.memory_gb} GB)"


def fit_label(fit: Fit) -> str:
    """'1x h100-80gb (80 GB) · $6.88/h per replica'."""
    return f"{fit_what(fit)} · ${fit.price_per_hour}/h per replica"


def parse_fit_value(value: str) -> tuple[str, int | None, str | None]:
    """(gpu_type, count, mig_profile) of a form value; ('', None, None) for the cheapest fit."""
    gpu_type, _, rest = (value or "").partition("/")
    if not gpu_type:
        return "", None, None
    if rest.isdigit():
        return gpu_type, int(rest), None
    return gpu_type, None, rest or None


def chosen_fit(fits: tuple[Fit, ...], value: str) -> Fit | None:
    """The fit a form value names, the cheapest for '', None when it no longer fits."""
    if not value:
        return fits[0] if fits else None
    return next((fit for fit in fits if fit_value(fit) == value), None)


@dataclass(frozen=True)
class DeployEstimate(PolicyEstimate):
    """What a deployment of `replicas` copies of `fit` costs, and whether it is approved at once."""

    fit: Fit
    replicas: int
    lifetime_hours: Decimal
    capacity_free_now: bool = False
    quota_rule: str = ""  # how quota counts, with the chosen slice as its example
    ends_at: datetime | None = None  # the end the request names, if it names one

    @property
    def fit_what(self) -> str:
        return fit_what(self.fit)


def deploy_estimate(
    *,
    user: User,
    team: str,
    fit: Fit,
    replicas: int,
    lifetime_hours: Decimal,
    ends_at: datetime | None = None,
    now: datetime | None = None,
) -> DeployEstimate:
    """The fit's price x replicas, and the verdict `deployment_request` will act on (the same
    policy call, on the same price-book price)."""
    now = now or timezone.now()
    team_obj = Team.objects.filter(slug=team, memberships__user=user).first()
    if team_obj is None:
        message = f"You are not a member of a team called {team!r}."
        raise ValidationFailed(message, fields={"team": [message]})
    if not within_max_lifetime(team=team_obj, lifetime_hours=lifetime_hours):
        message = f"Team {team_obj.slug} allows at most {team_obj.max_lifetime_hours.normalize():f} hours."
        raise ValidationFailed(message, fields={"expires_at" if ends_at else "ttl_hours": [message]})
    gpu_type = GpuType.objects.get(slug=fit.gpu_type)
    shape = gpu_type.model.profile(fit.mig_profile) if fit.mig_profile and gpu_type.model else None
    share = request_share(count=fit.gpus, shape=shape, replicas=replicas)
    decision = request_verdict(
        team=team_obj,
        count=fit.gpus,
        is_slice=fit.mig_profile is not None,
        share=share,
        lifetime_hours=lifetime_hours,
        hourly_cost=share_hourly_cost(
            price_per_gpu_hour=price_per_hour(gpu_type=gpu_type, at=now), share=share
        ),
        now=now,
        replicas=replicas,
        user_id=user.pk,
    )
    assert decision.quota_left is not None
    hourly = fit.price_per_hour * replicas  # shown as the fit list shows it, in cents per replica
    return DeployEstimate(
        fit=fit,
        replicas=replicas,
        lifetime_hours=lifetime_hours,
        ends_at=ends_at,
        hourly_cost=to_cents(hourly),
        total_cost=to_cents(hourly * lifetime_hours),
        gpu_equivalents=fraction_to_decimal(share),
        quota_left=decision.quota_left,
        fits_quota=decision.fits_quota,
        auto_approved=decision.auto_approved,
        why_needed=decision.why_needed,
        capacity_free_now=replicas_fit_now(gpu_type=gpu_type, fit=fit, replicas=replicas),
        quota_rule=share_rule_text(shape, per_replica=True),
    )


def replicas_fit_now(*, gpu_type: GpuType, fit: Fit, replicas: int) -> bool:
    """Whether every replica would be placed at once, as the placement does it: each on the
    fleet that the ones before it leave (all or none)."""
    request = placement_request(gpu_type=gpu_type, count=fit.gpus, mig_profile=fit.mig_profile or "")
    shape = getattr(request, "profile", None)
    state = FleetState(gpu_snapshot(gpu_type=gpu_type))
    for _replica in range(replicas):
        decision = state.place(request)
        if isinstance(decision, NoFit):
            return False
        state.apply(decision, shape)
    return True
