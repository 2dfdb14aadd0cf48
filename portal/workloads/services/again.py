"""Request again: what every kind's request body shares, built from a workload's settings."""

from __future__ import annotations

import re
from typing import Any

from portal.workloads.models import Workload
from portal.workloads.services.resolve import NAME_MAX


def again_name(name: str) -> str:
    """A name for the next one: `train` -> `train-2`, `train-2` -> `train-3` (kept within 40)."""
    match = re.fullmatch(r"(.*?)-(\d+)", name)
    stem, number = (match.group(1), int(match.group(2)) + 1) if match else (name, 2)
    suffix = f"-{number}"
    return stem[: NAME_MAX - len(suffix)].rstrip("-") + suffix


def gpu_body(workload: Workload) -> dict[str, Any]:
    if workload.mig_profile:
        return {"type": workload.gpu_type.slug, "mig_profile": workload.mig_profile}
    return {"type": workload.gpu_type.slug, "count": workload.gpu_count}


def common_body(workload: Workload) -> dict[str, Any]:
    """What every kind's body holds: the lifetime is always in hours, counted from its start."""
    return {
        "name": again_name(workload.name),
        "team": workload.team.slug,
        "gpu": gpu_body(workload),
        "ttl_hours": str(workload.lifetime_hours.normalize()),
        "purpose": workload.purpose,
        "project": workload.project,
    }
