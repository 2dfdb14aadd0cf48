"""Request again: a sandbox's settings as a request body the API accepts (and the form shows)."""

from __future__ import annotations

from typing import Any

from portal.accounts.models import User
from portal.core.errors import ValidationFailed
from portal.core.serializers import flat_errors
from portal.sandboxes.services.sandbox import sandbox_estimate
from portal.workloads.models import WorkloadKind
from portal.workloads.presets import known_fields, register_preset_check
from portal.workloads.selectors import workload_get_for
from portal.workloads.services.again import common_body


def sandbox_request_body(*, user: User, sandbox_id: int) -> dict[str, Any]:
    """The body of `POST /api/v1/sandboxes` that asks for this sandbox again (any state), named
    `<name>-2`: same team, image, GPUs, lifetime, sizes, datasets and project."""
    sandbox = workload_get_for(user=user, workload_id=sandbox_id, kind=WorkloadKind.SANDBOX)
    return {
        **common_body(sandbox),
        "image": sandbox.image.slug if sandbox.image else None,
        "cpu": sandbox.cpu,
        "memory_gb": sandbox.memory_gb,
        "storage_gb": sandbox.storage_gb,
        "datasets": sorted(sandbox.datasets.values_list("slug", flat=True)),
    }


def sandbox_body_check(user: User, body: dict[str, Any]) -> dict[str, Any]:
    """A sandbox preset's body checked as a request would be (shape, then the request rules
    through the estimate, which skips the name); what is kept: the known fields, without a
    start time (a preset is reused on other days)."""
    from portal.sandboxes.serializers import SandboxRequestSerializer

    serializer = SandboxRequestSerializer(data={"name": "", **body})
    if not serializer.is_valid():
        errors = flat_errors(serializer.errors)
        first = next(iter(errors.values()), ["is not valid"])
        field = next(iter(errors), "body")
        raise ValidationFailed(f"{field}: {first[0] if isinstance(first, list) else first}", fields=errors)
    kwargs = serializer.service_kwargs()
    kwargs.pop("name", None)
    kwargs.pop("start_at", None)
    sandbox_estimate(user=user, **kwargs)
    return known_fields(serializer.fields, body, leave_out=("start_at",))


register_preset_check(WorkloadKind.SANDBOX, sandbox_body_check)
