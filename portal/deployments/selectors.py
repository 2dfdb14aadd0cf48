"""Reads over deployments on top of the shared workload selectors: a deployment with everything
it shows, where each replica runs, its endpoint, and a request that works against it."""

from __future__ import annotations

import json
import shlex
from collections import defaultdict

from django.db.models import Prefetch, QuerySet

from portal.accounts.models import User
from portal.catalog.models import CatalogModel, Runtime
from portal.core.errors import NotFound
from portal.deployments.models import Serving
from portal.fleet.models import Allocation
from portal.workloads.models import Approval, Workload, WorkloadKind, WorkloadState
from portal.workloads.selectors import workloads_visible_to

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
    queries for any number of deployments. Same attribute names as `sandboxes_with_details`, so
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
    workload = deployments_with_details(deployments_visible_to(user)).filter(pk=deployment_id).first()
    if workload is None:
        raise NotFound(f"No deployment {deployment_id} that you can see.")
    return workload


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


def _curl(url: str, body: dict | None = None) -> str:
    if body is None:
        return f"curl -s {shlex.quote(url)}"
    return (
        f"curl -s {shlex.quote(url)} \\\n"
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
    shape = ", ".join(str(size) for size in IMAGE_SHAPE)
    # The zeros are generated in the shell: 150,528 numbers do not belong on a page.
    zeros = f'$(python3 -c \'print(",".join(["0"] * {elements}))\')'
    body = (
        f'{{\\"inputs\\": [{{\\"name\\": \\"input__0\\", \\"shape\\": [{shape}], '
        f'\\"datatype\\": \\"{datatype}\\", \\"data\\": [{zeros}]}}]}}'
    )
    return (
        f"# Input names and types are in the model's metadata: curl -s {metadata}\n"
        f"curl -s {shlex.quote(metadata + '/infer')} \\\n"
        "  -H 'Content-Type: application/json' \\\n"
        f'  -d "{body}"'
    )


def deployment_example(workload: Workload) -> str | None:
    """A request that works against the running endpoint (None until there is one): for an
    OpenAI-compatible server a chat completion, or an embedding for embedding models; for KServe v2
    an inference request."""
    endpoint = deployment_endpoint(workload)
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
