"""The demo fleet, teams, users, images and price book (`manage.py seed_demo`), and two weeks of
ended sandboxes (portal.demo.history). Idempotent: running it again creates only what is missing
and changes nothing a user has edited; the history is written only by the run that makes the
demo teams."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from portal.accounts.models import Membership, Team, User
from portal.catalog.demo import catalog_seed
from portal.demo.history import demo_history
from portal.fleet.geometry import GPU_MODELS
from portal.fleet.models import Cluster, Gpu, GpuType, Node, PriceBookEntry
from portal.workloads.models import Image

DEMO_PASSWORD = "portal-demo"  # noqa: S105 - printed for the demo on purpose
PRICE_BOOK_START = datetime(2026, 1, 1, tzinfo=UTC)

# node name, GPU type, GPU count, MIG enabled
DEMO_NODES = (
    ("gpu-h100-a", "h100-80gb", 8, False),
    ("gpu-h100-b", "h100-80gb", 8, True),
    ("gpu-a100-a", "a100-80gb", 8, True),
    ("gpu-h200-a", "h200-141gb", 4, False),
)
DEMO_USERS = (
    # username, full name, team, role, platform admin
    ("alice", "Alice Researcher", "vision", Membership.Role.RESEARCHER, False),
    ("bob", "Bob Lead", "vision", Membership.Role.LEAD, False),
    ("carol", "Carol Researcher", "nlp", Membership.Role.RESEARCHER, False),
    ("admin", "Platform Admin", None, None, True),
)
DEMO_IMAGES = (
    (
        "jupyter",
        "JupyterLab with PyTorch",
        "quay.io/jupyter/pytorch-notebook:cuda12-2024-11-18",
        Image.Kind.JUPYTER,
    ),
    ("vscode", "VS Code in the browser (code-server)", "codercom/code-server:4.96.4", Image.Kind.VSCODE),
    ("pytorch", "PyTorch shell (SSH)", "nvcr.io/nvidia/pytorch:24.10-py3", Image.Kind.SHELL),
)


@dataclass(frozen=True)
class SeedSummary:
    created: int
    usernames: tuple[str, ...]
    password: str


@transaction.atomic
def demo_seed(*, history: bool = True) -> SeedSummary:
    """Create what is missing; with `history`, also the ended sandboxes of the last two weeks
    where the demo teams are new."""
    created = 0

    def count(pair: tuple[object, bool]) -> object:
        nonlocal created
        created += int(pair[1])
        return pair[0]

    images = {}
    for slug, name, ref, kind in DEMO_IMAGES:
        images[slug] = count(
            Image.objects.get_or_create(
                slug=slug, defaults={"name": name, "container_image": ref, "kind": kind}
            )
        )
    types = {}
    for slug in {node[1] for node in DEMO_NODES}:
        model = GPU_MODELS[slug]
        gpu_type = count(
            GpuType.objects.get_or_create(
                slug=slug,
                defaults={"name": model.name, "memory_gb": model.memory_gb, "mig_capable": model.mig_capable},
            )
        )
        types[slug] = gpu_type
        count(
            PriceBookEntry.objects.get_or_create(
                gpu_type=gpu_type,
                effective_from=PRICE_BOOK_START,
                defaults={"price_per_hour": model.list_price_per_hour, "note": "public on-demand list price"},
            )
        )
    cluster = count(Cluster.objects.get_or_create(name="demo", defaults={"driver": "simulated"}))
    for node_name, slug, gpu_count, mig in DEMO_NODES:
        node = count(
            Node.objects.get_or_create(
                cluster=cluster,
                name=node_name,
                defaults={"gpu_type": types[slug], "product": GPU_MODELS[slug].products[0]},
            )
        )
        for index in range(gpu_count):
            count(
                Gpu.objects.get_or_create(
                    node=node,
                    index=index,
                    defaults={
                        "gpu_type": types[slug],
                        "mig_enabled": mig,
                        "uuid": f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node_name}.{index}')}",
                    },
                )
            )
    teams = {}
    new_teams = False
    for slug, name in (("vision", "Vision"), ("nlp", "NLP")):
        pair = Team.objects.get_or_create(
            slug=slug,
            defaults={
                "name": name,
                "quota_gpus": Decimal(16),
                "auto_approve_max_gpus": 1,
                "auto_approve_max_hours": Decimal(24),
                "default_image": images["jupyter"],
                # idle reclaim on, and short, so the demo shows a warning within the hour
                "idle_reclaim_minutes": 20,
                "idle_grace_minutes": 15,
            },
        )
        new_teams |= pair[1]  # made now: the history goes with new teams only
        teams[slug] = count(pair)
    for username, full_name, team, role, admin in DEMO_USERS:
        first, last = full_name.split(" ", 1)
        user, made = User.objects.get_or_create(
            username=username,
            defaults={
                "first_name": first,
                "last_name": last,
                "email": f"{username}@example.com",
                "is_staff": admin,
                "is_superuser": admin,
            },
        )
        if made:
            user.set_password(DEMO_PASSWORD)
            user.save(update_fields=["password"])
            created += 1
        if team:
            count(Membership.objects.get_or_create(user=user, team=teams[team], defaults={"role": role}))
    created += catalog_seed()
    if history and new_teams:
        created += demo_history(now=timezone.now())
    return SeedSummary(created=created, usernames=tuple(u[0] for u in DEMO_USERS), password=DEMO_PASSWORD)
