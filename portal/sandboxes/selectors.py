"""Reads the sandbox pages need on top of `portal.workloads.selectors`: table rows with their
costs and placement, the detail row, and what the request form offers."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal

import yaml
from django.db.models import QuerySet
from django.utils import timezone

from portal.accounts.models import Team, User
from portal.accounts.selectors import member_team_ids, owner_left_team, owner_shut_out, user_teams
from portal.accounts.ssh_keys import ssh_keys_of
from portal.core.errors import NotAllowed
from portal.fleet.models import Gpu, GpuType
from portal.fleet.selectors import current_prices, storage_price
from portal.sandboxes.gate import sandbox_app_url
from portal.sandboxes.models import Dataset, Home, KubeAccess, SshHostKey
from portal.workloads.models import (
    END_STATES,
    LIVE_STATES,
    Approval,
    Image,
    Workload,
    WorkloadInsight,
    WorkloadKind,
    WorkloadState,
)
from portal.workloads.queue_wait import QueueWait
from portal.workloads.selectors import (
    WaitingCost,
    common_row_fields,
    in_scope,
    placement_label,
    waiting_cost,
    workload_actions_for,
    workload_detail_for,
    workload_get_for,
    workload_placement,
    workloads_visible_to,
    workloads_with_details,
)


@dataclass(frozen=True)
class SandboxRow:
    """One sandbox as a table or the detail page shows it."""

    sandbox: Workload
    cost_so_far: Decimal
    hourly_cost: Decimal
    placement: dict | None
    queue_position: int | None
    approval: Approval | None
    actions: list[str] = field(default_factory=list)  # what can be done to it now
    estimated_wait: QueueWait | None = None  # while queued
    waiting_cost: WaitingCost | None = None  # while waiting: its cost once placed
    viewer_opens: bool = True  # whether the one looking may open its app: its owner, or shared with them
    ssh_host_key: SshHostKey | None = None  # an ssh sandbox's, on its page

    @property
    def placement_label(self) -> str:
        return placement_label(self.placement) if self.placement is not None else ""

    @property
    def app_url(self) -> str:
        return sandbox_app_url(self.sandbox)


def dashboard_sandboxes(*, user: User, scope: str) -> QuerySet[Workload]:
    """The dashboard's sandboxes in `scope`, with what their rows show prefetched."""
    return workloads_with_details(
        in_scope(workloads_visible_to(user, kind=WorkloadKind.SANDBOX), user=user, scope=scope)
    )


def sandbox_rows(sandboxes: list[Workload], *, now: datetime | None = None) -> list[SandboxRow]:
    """Rows for sandboxes fetched with `workloads_with_details`: one more query for queue places."""
    return [
        SandboxRow(sandbox=sandbox, placement=workload_placement(sandbox), **costs)
        for sandbox, costs in zip(sandboxes, common_row_fields(sandboxes, now=now), strict=True)
    ]


def sandbox_row_for(*, user: User, workload_id: int) -> SandboxRow:
    """The detail page's sandbox; NotFound when the user may not see it."""
    (row,) = sandbox_rows(
        [workload_detail_for(user=user, workload_id=workload_id, kind=WorkloadKind.SANDBOX)]
    )
    sandbox = row.sandbox
    # as the gate decides: its owner or someone it is shared with, while still in its team (an
    # admin owner counts as in it)
    team_ids = member_team_ids(user)
    in_team = sandbox.team_id in team_ids
    if sandbox.owner_id == user.pk:
        opens = in_team or user.is_platform_admin
    else:
        opens = in_team and any(u.pk == user.pk for u in sandbox.shared_with.all())
    actions = workload_actions_for(row.actions, user=user, workload=sandbox, team_ids=team_ids)
    return replace(
        row,
        waiting_cost=waiting_cost(sandbox),
        viewer_opens=opens,
        actions=actions,
        ssh_host_key=ssh_host_key_of(sandbox),
    )


@dataclass(frozen=True)
class RequestChoices:
    """What the request form offers: images, and GPU types with their price per GPU-hour and
    whether the fleet has them as whole GPUs, as MIG GPUs, or both."""

    images: list[Image]
    gpu_types: list[GpuType]
    prices: dict[int, Decimal]
    whole_type_ids: frozenset[int] = frozenset()
    mig_type_ids: frozenset[int] = frozenset()
    datasets: list[Dataset] = field(default_factory=list)


def request_choices(teams: list[Team] | None = None) -> RequestChoices:
    shapes = set(Gpu.objects.values_list("gpu_type_id", "mig_enabled").distinct())
    datasets = Dataset.objects.filter(teams__in=teams or []).distinct().prefetch_related("teams")
    return RequestChoices(
        datasets=list(datasets),
        images=list(Image.objects.order_by("name")),
        gpu_types=list(GpuType.objects.order_by("name")),
        prices=current_prices(),
        whole_type_ids=frozenset(type_id for type_id, mig in shapes if not mig),
        mig_type_ids=frozenset(type_id for type_id, mig in shapes if mig),
    )


@dataclass(frozen=True)
class SandboxInside:
    """What a sandbox's container sees (the simulated cluster's stand-in for the real app)."""

    sandbox: Workload
    placement: dict | None
    gpus: list[str]
    environment: list[tuple[str, str]]
    mounts: list[tuple[str, str]]


def sandbox_inside(*, workload_id: int, username: str) -> SandboxInside:
    """The container's view of a sandbox: its GPUs, environment and mounts, for `username`."""
    sandbox = (
        Workload.objects.select_related("image", "gpu_type", "owner", "team")
        .prefetch_related("allocations__gpu", "allocations__mig_slice")
        .get(pk=workload_id, kind=WorkloadKind.SANDBOX)
    )
    placement = workload_placement(sandbox)
    held = [a for a in sandbox.allocations.all() if a.released_at is None]
    if sandbox.mig_profile:
        gpus = [
            f"MIG {sandbox.mig_profile} on {sandbox.gpu_type.name} (GPU {a.gpu.index}, {a.gpu.uuid})"
            for a in held
        ]
    else:
        gpus = [
            f"{sandbox.gpu_type.name} (GPU {a.gpu.index}, {a.gpu.uuid})"
            for a in sorted(held, key=lambda a: a.gpu.index)
        ]
    environment = [
        ("HOME", "/home"),
        ("GPU_PORTAL_SANDBOX_ID", str(sandbox.pk)),
        ("SANDBOX_USER", sandbox.owner.username),
        ("PORTAL_USER", username),
    ]
    mounts = [
        ("/home", sandbox_home_note(sandbox)),
        ("/dev/shm", f"shared memory, {max(sandbox.memory_gb // 4, 1)} GB"),
        *(
            (f"/data/{d.slug}", f"{d.name}: {d.get_kind_display()}, read-only")
            for d in sandbox_datasets(sandbox)
        ),
    ]
    return SandboxInside(sandbox, placement, gpus, environment, mounts)


def sandboxes_shared_with(user: User) -> QuerySet[Workload]:
    """Running sandboxes their owners share with `user`, newest first (the dashboard, the API):
    only while `user` is in the sandbox's team, as the sign-in check lets them in."""
    return workloads_with_details(
        Workload.objects.filter(
            kind=WorkloadKind.SANDBOX,
            shared_with=user,
            state=WorkloadState.RUNNING,
            team__memberships__user=user,
        )
        .select_related("team", "owner", "image", "cluster", "gpu_type")
        .order_by("-started_at", "-pk")
    )


def sandbox_insight_for(*, user: User, sandbox_id: int) -> tuple[Workload, WorkloadInsight | None]:
    """A sandbox the user may see and what a worker last read of its pod (None: never asked)."""
    sandbox = workload_get_for(user=user, workload_id=sandbox_id, kind=WorkloadKind.SANDBOX)
    return sandbox, WorkloadInsight.objects.filter(workload=sandbox).first()


def sandbox_kube_access_for(*, user: User, sandbox_id: int) -> tuple[Workload, KubeAccess | None]:
    """A sandbox the user may see, and the kubeconfig issued to them for it (None: never asked);
    NotAllowed for an owner no longer in its team."""
    sandbox = workload_get_for(user=user, workload_id=sandbox_id, kind=WorkloadKind.SANDBOX)
    refuse_kubectl_to_the_shut_out(user=user, sandbox=sandbox)
    return sandbox, kube_access_of(sandbox, user)


KUBECTL_FOR_MEMBERS = "kubectl access to a sandbox is for members of its team"


def refuse_kubectl_to_the_shut_out(*, user: User, sandbox: Workload) -> None:
    """The owner may neither get nor read a kubeconfig once no longer in the team (or
    deactivated): NotAllowed, saying so."""
    if owner_shut_out(user, team_id=sandbox.team_id):
        raise NotAllowed(
            f"You are no longer a member of team {sandbox.team.name}: {KUBECTL_FOR_MEMBERS}. "
            "You may still end this one."
        )


def kube_access_of(sandbox: Workload, user: User) -> KubeAccess | None:
    """The kubeconfig issued to `user` for a sandbox already loaded (None: never asked)."""
    return KubeAccess.objects.filter(workload=sandbox, user=user).first()


def ssh_host_key_of(sandbox: Workload) -> SshHostKey | None:
    """A live ssh sandbox's server host key, for its owner to check what their ssh client shows
    on first connecting (prefetched by lists, `ssh_host_key`); None for a web sandbox, an ended
    one, or one whose objects were never built (not placed yet)."""
    if not sandbox.is_ssh_sandbox or not sandbox.is_live:
        return None
    try:
        return sandbox.ssh_host_key
    except SshHostKey.DoesNotExist:
        return None


def kube_access_usable(access: KubeAccess | None, sandbox: Workload, *, now: datetime | None = None) -> bool:
    """Whether a kubeconfig can be handed out: issued, not expired, and its sandbox running."""
    now = now or timezone.now()
    return (
        access is not None
        and not access.pending
        and not access.error
        and bool(access.token)
        and access.expires_at is not None
        and access.expires_at > now
        and sandbox.state == WorkloadState.RUNNING
    )


@dataclass(frozen=True)
class KubeAccessStatus:
    """Where an owner's kubeconfig stands: `none` (never asked), `pending` (a worker is asking
    the cluster), `ready` (with the file), `failed` (with the reason: an error, or expired)."""

    state: str
    expires_at: datetime | None = None
    error: str = ""
    kubeconfig: str = ""


def kube_access_status(access: KubeAccess | None, sandbox: Workload) -> KubeAccessStatus:
    if access is None:
        return KubeAccessStatus("none")
    if access.pending:
        return KubeAccessStatus("pending")
    if kube_access_usable(access, sandbox):
        return KubeAccessStatus("ready", access.expires_at, kubeconfig=kubeconfig_text(access, sandbox))
    error = access.error or "expired, or the sandbox is no longer running: ask for a new one"
    return KubeAccessStatus("failed", access.expires_at, error)


def kubeconfig_text(access: KubeAccess, sandbox: Workload) -> str:
    """The kubeconfig file: one cluster, one user (the token), one context in the sandbox's
    namespace."""
    cluster_name = sandbox.cluster.name if sandbox.cluster else "cluster"
    user_name = f"{sandbox.owner.username}@{access.namespace}"
    cluster: dict = {"server": access.server}
    if access.ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(access.ca_pem.encode()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": cluster}],
        "users": [{"name": user_name, "user": {"token": access.token}}],
        "contexts": [
            {
                "name": access.namespace,
                "context": {"cluster": cluster_name, "namespace": access.namespace, "user": user_name},
            }
        ],
        "current-context": access.namespace,
    }
    assert access.expires_at is not None
    header = (
        f"# GPU Portal: kubectl access to sandbox {sandbox.name} (#{sandbox.number}), namespace {access.namespace}.\n"
        f"# Valid until {access.expires_at:%Y-%m-%d %H:%M} UTC, or until the sandbox ends; it may look at the\n"
        "# sandbox's pod, its log and events, exec into it and port-forward, nothing else.\n"
    )
    if access.simulated:
        header += "# Simulated cluster: there is no API server behind this file; its token opens nothing.\n"
    return header + yaml.safe_dump(config, sort_keys=False)


@dataclass(frozen=True)
class HomeFacts:
    """What the home page shows: the home (None before the first sandbox makes it), the team
    whose policy sizes it, and what it costs a month at today's price."""

    home: Home | None
    team: Team | None
    price_per_gb_month: Decimal
    holder: Workload | None
    left_team: bool = False  # billed to a team its owner is no longer in: it may not grow there

    @property
    def size_gb(self) -> int:
        """The home's size, or the size the next sandbox makes it: the team's default, else the
        default a new team gets."""
        if self.home:
            return self.home.size_gb
        if self.team:
            return self.team.home_gb_default
        return Team._meta.get_field("home_gb_default").default

    @property
    def monthly_cost(self) -> Decimal:
        return home_monthly_cost(price_per_gb_month=self.price_per_gb_month, size_gb=self.size_gb)


def home_monthly_cost(*, price_per_gb_month: Decimal, size_gb: int) -> Decimal:
    """What a home of this size costs a month at this price, to the cent."""
    return (price_per_gb_month * size_gb).quantize(Decimal("0.01"))


def _homes_of(user_id: int) -> QuerySet[Home]:
    """A user's home, unless deleted (one at most)."""
    return Home.objects.filter(user_id=user_id).exclude(state=Home.State.DELETED)


def home_holder(home: Home | None) -> Workload | None:
    """The live sandbox that holds the home now, if any (the last one to take it stays named on
    the home after it ends)."""
    if home is None or not home.attached_to_id:
        return None
    return Workload.objects.filter(pk=home.attached_to_id, state__in=LIVE_STATES).first()


def home_facts(*, user: User) -> HomeFacts:
    home = _homes_of(user.pk).select_related("team", "cluster").first()
    team = home.team if home else next(iter(user_teams(user)), None)
    holder = home_holder(home)
    left = home is not None and owner_left_team(user=user, team_id=home.team_id, owner_id=user.pk)
    return HomeFacts(home=home, team=team, price_per_gb_month=storage_price(), holder=holder, left_team=left)


def home_size_gb(user: User) -> int | None:
    """The size of the user's home volume, None before their first sandbox makes it."""
    return _homes_of(user.pk).values_list("size_gb", flat=True).first()


def sandbox_home_note(sandbox: Workload) -> str:
    """What /home is in a sandbox, in a line: its owner's home, or a scratch one and why."""
    return sandbox_home_facts(sandbox)[0]


def sandbox_home_facts(sandbox: Workload) -> tuple[str, bool]:
    """`sandbox_home_note`, and whether /home is (or, before it starts, will likely be) its
    owner's home: what sharing it lends to others."""
    home = _homes_of(sandbox.owner_id).first()
    if home is not None and home.attached_to_id == sandbox.pk:
        return f"{sandbox.owner.username}'s home volume ({home.size_gb} GB), kept when the sandbox ends", True
    if sandbox.never_placed:
        return "none: the sandbox never ran", False
    if sandbox.state in (WorkloadState.PENDING_APPROVAL, WorkloadState.QUEUED, WorkloadState.PROVISIONING):
        return "the owner's home volume, unless another sandbox of theirs holds it when this one starts", True
    if sandbox.state in END_STATES:
        return f"a scratch volume ({sandbox.storage_gb} GB), gone with the sandbox", False
    return f"a scratch volume ({sandbox.storage_gb} GB) that goes with the sandbox", False


def sandbox_datasets(sandbox: Workload) -> list[Dataset]:
    """The datasets a sandbox mounts, by slug."""
    return list(Dataset.objects.filter(sandboxes=sandbox).order_by("slug"))


def ssh_image_without_keys(*, user: User, team_slug: str, image_slug: str) -> bool:
    """Whether a request names an ssh image (`image_slug`, or else its team's default) while its
    requester has no SSH key to log in with."""
    if image_slug:
        image = Image.objects.filter(slug=image_slug).first()
    else:
        team = Team.objects.select_related("default_image").filter(slug=team_slug).first()
        image = team.default_image if team else None
    if image is None or image.kind != Image.Kind.SHELL:
        return False
    return not ssh_keys_of(user).exists()
