from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import IntegrityError, models, transaction
from django.db.models import F, Max, Q
from django.urls import reverse


class Image(models.Model):
    """A sandbox template: a container image and how users reach it."""

    class Kind(models.TextChoices):
        JUPYTER = "jupyter", "JupyterLab"
        VSCODE = "vscode", "VS Code in the browser (code-server)"
        SHELL = "shell", "Shell (SSH)"

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=100)
    container_image = models.CharField(max_length=300)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.JUPYTER)
    default_cpu = models.PositiveIntegerField(default=8)
    default_memory_gb = models.PositiveIntegerField(default=64)
    default_storage_gb = models.PositiveIntegerField(default=100)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class WorkloadState(models.TextChoices):
    PENDING_APPROVAL = "pending_approval"
    QUEUED = "queued"
    PROVISIONING = "provisioning"
    RUNNING = "running"
    TERMINATING = "terminating"
    TERMINATED = "terminated"
    EXPIRED = "expired"
    REJECTED = "rejected"
    FAILED = "failed"


LIVE_STATES = (
    WorkloadState.PENDING_APPROVAL,
    WorkloadState.QUEUED,
    WorkloadState.PROVISIONING,
    WorkloadState.RUNNING,
    WorkloadState.TERMINATING,
)
END_STATES = (
    WorkloadState.TERMINATED,
    WorkloadState.EXPIRED,
    WorkloadState.REJECTED,
    WorkloadState.FAILED,
)


PROJECT_MAX_LENGTH = 40
PROJECT_HELP = "Lowercase letters, digits and hyphens, at most 40 (e.g. llm-eval)."
# "storage" names the persistent-storage row of spend reports grouped by project.
RESERVED_PROJECTS = frozenset({"storage"})


def project_label_error(label: str) -> str:
    """Why `label` is not a valid project label ("" when it is, or when it is empty: no project)."""
    if not label:
        return ""
    if len(label) > PROJECT_MAX_LENGTH or not all(
        c.isascii() and (c.islower() or c.isdigit() or c == "-") for c in label
    ):
        return f"A project label is 1-{PROJECT_MAX_LENGTH} lowercase letters, digits and hyphens (e.g. llm-eval)."
    if label in RESERVED_PROJECTS:
        return f"{label!r} is reserved; choose another project label."
    return ""


# How a withdrawn request's message begins (`Workload.withdrawn`).
WITHDRAWN_BY = "Withdrawn by "

# How the policy begins its reasons for a lead's decision (portal.workloads.policy).
NEEDS_A_LEAD = "Needs a lead's approval: "


class WorkloadKind(models.TextChoices):
    """What a workload is for; each kind has its own app (portal.sandboxes, portal.deployments)."""

    SANDBOX = "sandbox"
    DEPLOYMENT = "deployment"


class WorkloadCounter(models.Model):
    """The last number given to a workload of one kind: sandboxes and deployments are counted
    apart (sandbox 1, 2, 3 ... and deployment 1, 2, 3 ...), as their users read and type them."""

    kind = models.CharField(max_length=20, choices=WorkloadKind.choices, unique=True)
    last = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.kind}: {self.last}"


def next_workload_number(kind: str) -> int:
    """The next number of `kind`, taken in the caller's transaction: the counter row stays locked
    until it commits, so two requests at once never get the same number, and a request that
    rolls back gives its number back. A counter missing (a database emptied by hand) starts after
    the highest number in use."""
    with transaction.atomic():
        for _ in range(2):
            if WorkloadCounter.objects.filter(kind=kind).update(last=F("last") + 1):
                return WorkloadCounter.objects.values_list("last", flat=True).get(kind=kind)
            highest = Workload.objects.filter(kind=kind).aggregate(highest=Max("number"))["highest"]
            try:
                with transaction.atomic():  # another request may be creating it at this moment
                    WorkloadCounter.objects.create(kind=kind, last=highest or 0)
            except IntegrityError:
                pass
    raise RuntimeError(f"no counter of {kind} workloads")  # pragma: no cover (created just above)


class Workload(models.Model):
    """A GPU workload with an expiry: a development sandbox, or a model serving deployment.

    Both kinds share one lifecycle, quota, approval, placement and metering path; a deployment
    adds its serving details (portal.deployments.Serving) and may have several replicas, each
    placed as `gpu_count` whole GPUs on one node or one MIG slice.

    `number` is what people call it and what its URLs and the API's `id` say: its place among
    the workloads of its kind. The primary key stays internal (foreign keys, cluster labels,
    namespace names).
    """

    kind = models.CharField(max_length=20, choices=WorkloadKind.choices, default=WorkloadKind.SANDBOX)
    number = models.PositiveIntegerField(
        editable=False, help_text="Its number among the workloads of its kind (sandbox 12, deployment 3)."
    )
    name = models.CharField(max_length=63)
    team = models.ForeignKey("accounts.Team", on_delete=models.PROTECT, related_name="workloads")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="workloads")
    image = models.ForeignKey(
        Image,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="workloads",
        help_text="Sandboxes only.",
    )
    purpose = models.CharField(max_length=300, blank=True)
    project = models.CharField(
        max_length=PROJECT_MAX_LENGTH,
        blank=True,
        default="",
        validators=[RegexValidator(r"^[a-z0-9-]*$", PROJECT_HELP)],
        help_text="An optional project label its spend is grouped and budgeted by; set when requested.",
    )
    shared_with = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="shared_workloads",
        help_text="Team members the owner lets into the sandbox (its route passes them too).",
    )
    gpu_type = models.ForeignKey("fleet.GpuType", on_delete=models.PROTECT, related_name="workloads")
    gpu_count = models.PositiveSmallIntegerField(
        default=1, help_text="Whole GPUs per replica; 1 for a MIG slice."
    )
    replicas = models.PositiveSmallIntegerField(default=1)
    mig_profile = models.CharField(max_length=30, blank=True)
    cpu = models.PositiveIntegerField(default=8)
    memory_gb = models.PositiveIntegerField(default=64)
    storage_gb = models.PositiveIntegerField(default=100)

    state = models.CharField(max_length=20, choices=WorkloadState.choices, db_index=True)
    message = models.CharField(max_length=500, blank=True)
    priority = models.SmallIntegerField(default=0, help_text="Higher is placed first in the queue.")
    # Set when it starts running (started_at + ttl_hours), or at request time when the request
    # named its end; null while it waits for approval, in the queue or its first start.
    expires_at = models.DateTimeField(null=True, blank=True)
    ttl_hours = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        help_text="How long it runs, counted from when it starts running (extensions included).",
    )
    # A running deployment being scaled: the replicas it served before. The row is provisioning
    # for the reconciler meanwhile, but it still serves, so it shows as running.
    scaling_from = models.PositiveSmallIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # A scheduled start: it waits in the queue (its quota held from the request) and is not placed
    # before this time; its lifetime counts from when it starts running, as for any other.
    start_at = models.DateTimeField(null=True, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # Running, but not well (crashing, OOM-killed, evicted, its objects gone): since when. Cleared
    # when it is well again. The state stays `running`: it is still held and billed.
    degraded_since = models.DateTimeField(null=True, blank=True)
    # Degraded, but well again since: it counts as recovered once well long enough (no flapping
    # degraded/recovered with every turn of a crash loop).
    well_since = models.DateTimeField(null=True, blank=True)
    # When it last went to provisioning (placed, requeued and placed again, or rescaled): the
    # cluster's provisioning deadline counts from here.
    provisioning_since = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    restart_requested_at = models.DateTimeField(
        null=True, blank=True, help_text="Its owner asked for a new pod on the same placement (home kept)."
    )
    restarted_at = models.DateTimeField(null=True, blank=True, help_text="When the worker last restarted it.")
    idle_warned_at = models.DateTimeField(
        null=True, blank=True, help_text="Told its GPUs sit idle; ended after the team's grace unless kept."
    )
    idle_parked_replicas = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="A deployment idle reclaim scaled to zero: the replicas it had, to scale back to.",
    )
    idle_kept_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Its owner chose to keep it though idle: the idle clock starts again.",
    )
    expiry_warned_at = models.DateTimeField(null=True, blank=True)
    # While terminating: the end state it reaches once the cluster objects are gone.
    ending_as = models.CharField(max_length=20, blank=True)

    # Where it was placed and how to reach it.
    cluster = models.ForeignKey("fleet.Cluster", null=True, blank=True, on_delete=models.PROTECT)
    node_name = models.CharField(max_length=253, blank=True)
    placement_reason = models.CharField(max_length=300, blank=True)
    namespace = models.CharField(max_length=63, blank=True, db_index=True)
    access = models.CharField(max_length=500, blank=True)
    access_problem = models.CharField(
        max_length=500,
        blank=True,
        help_text="Why the worker's last update of its route, quota or SSH keys failed; empty when it went well.",
    )

    # Job state of the reconciler, kept on the row (not in Celery).
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    # A reconcile step holds the row until then, so two workers never act on it at once.
    lease_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["state", "expires_at"]),
            models.Index(fields=["team", "state"]),
            models.Index(fields=["owner", "state"]),
            models.Index(fields=["team", "project"], name="workload_team_project", condition=~Q(project="")),
            # the labels a person used, by team, read from the index alone (the project suggestions)
            models.Index(
                fields=["owner", "team", "project"], name="workload_owner_project", condition=~Q(project="")
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "kind", "name"],
                condition=Q(state__in=[s.value for s in LIVE_STATES]),
                name="workload_live_name_unique_per_owner",
            ),
            models.UniqueConstraint(fields=["kind", "number"], name="workload_number_unique_per_kind"),
        ]

    def __str__(self) -> str:
        return f"{self.name} (#{self.number})"

    def save(self, *args: object, **kwargs: object) -> None:
        """A new workload takes the next number of its kind, however it is made."""
        if not self._state.adding or self.number is not None:
            super().save(*args, **kwargs)
            return
        try:
            with transaction.atomic():
                self.number = next_workload_number(self.kind)
                super().save(*args, **kwargs)
        except BaseException:
            self.number = None  # given back with the rolled-back counter
            raise

    def get_absolute_url(self) -> str:
        return reverse(f"{self.kind}-detail", args=[self.number])

    @property
    def audit_type(self) -> str:
        """Audit events file a workload under its kind: "sandbox" or "deployment"."""
        return self.kind

    @property
    def is_live(self) -> bool:
        return self.state in LIVE_STATES

    @property
    def is_slice(self) -> bool:
        return bool(self.mig_profile)

    @property
    def is_ssh_sandbox(self) -> bool:
        """A sandbox of a shell image: reached by ssh with its owner's keys, not through the gate."""
        return (
            self.kind == WorkloadKind.SANDBOX
            and self.image is not None
            and self.image.kind == Image.Kind.SHELL
        )

    @property
    def gpu_label(self) -> str:
        each = (
            f"{self.gpu_type.slug} {self.mig_profile}"
            if self.mig_profile
            else f"{self.gpu_count}x {self.gpu_type.slug}"
        )
        return each if self.replicas == 1 else f"{self.replicas} replicas of {each}"

    @property
    def idle_reclaim_at(self):
        """When an idle warning turns into the end, unless kept."""
        if self.idle_warned_at is None:
            return None
        return self.idle_warned_at + timedelta(minutes=self.team.idle_grace_minutes)

    @property
    def lifetime_hours(self) -> Decimal:
        """How long it runs once started: the hours asked for (extensions included)."""
        if self.ttl_hours is not None:
            return self.ttl_hours.quantize(Decimal("0.01"))
        if self.expires_at is None:
            return Decimal(0)
        began = self.started_at or self.created_at
        seconds = Decimal((self.expires_at - began).total_seconds())
        return (seconds / Decimal(3600)).quantize(Decimal("0.01"))

    def expiry_from(self, moment: datetime) -> datetime:
        """Its expiry, or, while it has none yet, when it would expire if it started at `moment`."""
        if self.expires_at is not None:
            return self.expires_at
        return moment + timedelta(seconds=float((self.ttl_hours or 0) * 3600))

    @property
    def is_scaling(self) -> bool:
        """A running deployment whose replicas are being changed: it serves meanwhile."""
        return self.scaling_from is not None and self.state == WorkloadState.PROVISIONING

    @property
    def never_placed(self) -> bool:
        """It ended before it was placed on a GPU (rejected, withdrawn, or ended while it waited):
        it never ran, held nothing and was billed nothing."""
        return self.state in END_STATES and self.started_at is None and not self.node_name

    @property
    def withdrawn(self) -> bool:
        """Its request was withdrawn before it started (its owner, a lead or an admin took it
        back): ended, never placed, its message saying so (the service that withdraws writes it)."""
        return (
            self.state == WorkloadState.TERMINATED
            and self.never_placed
            and self.message.startswith(WITHDRAWN_BY)
        )

    @property
    def shown_state(self) -> str:
        """The state its pages and the API show: running while a running deployment is rescaled."""
        return WorkloadState.RUNNING if self.is_scaling else self.state

    @property
    def shown_access_problem(self) -> str:
        """The failed update of its route, quota or keys its page and the API show: only while it
        runs (an ended workload's last one is history)."""
        return self.access_problem if self.shown_state == WorkloadState.RUNNING else ""


class WorkloadInsight(models.Model):
    """What the cluster last said about a workload's pod, read by a worker when someone asks:
    its recent events and the last lines of its log."""

    workload = models.OneToOneField(Workload, on_delete=models.CASCADE, related_name="insight")
    requested_at = models.DateTimeField(null=True, blank=True)
    read_at = models.DateTimeField(null=True, blank=True)
    events = models.JSONField(
        default=list, blank=True, help_text="[{at, type, reason, message}], newest last."
    )
    log_tail = models.TextField(blank=True)
    error = models.CharField(max_length=500, blank=True, help_text="Why the last read failed, if it did.")

    def __str__(self) -> str:
        return f"insight of {self.workload_id}"

    @property
    def pending(self) -> bool:
        return self.requested_at is not None and (self.read_at is None or self.read_at < self.requested_at)


class Approval(models.Model):
    """A lead's decision on a request over the team's auto-approval line.

    `kind` is "create" for a new sandbox or deployment, "extend" for moving its expiry by
    `extend_hours`, and "scale" for taking a deployment to `replicas` replicas.
    """

    class Kind(models.TextChoices):
        CREATE = "create"
        EXTEND = "extend"
        SCALE = "scale"

    class State(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"
        CANCELLED = "cancelled"

    workload = models.ForeignKey("workloads.Workload", on_delete=models.CASCADE, related_name="approvals")
    team = models.ForeignKey("accounts.Team", on_delete=models.PROTECT, related_name="approvals")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.CREATE)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING, db_index=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    why_needed = models.CharField(max_length=300, help_text="Which policy line the request crosses.")
    extend_hours = models.DecimalField(max_digits=8, decimal_places=2, null=True, blank=True)
    replicas = models.PositiveSmallIntegerField(null=True, blank=True, help_text="A scale request's target.")
    comment = models.CharField(max_length=1000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["workload", "kind"],
                condition=Q(state="pending"),
                name="one_pending_approval_per_kind",
            )
        ]

    def __str__(self) -> str:
        # the audit log writes "approval " before it: "approval #5, extension (rejected)"
        what = {"create": "request", "extend": "extension"}.get(self.kind, self.kind)
        return f"#{self.pk}, {what} ({self.state})"

    @property
    def reason(self) -> str:
        """Which policy line it crosses, without the lead-in, where a heading already says why
        ("the sandbox would live longer than 24 hours.")."""
        return self.why_needed.removeprefix(NEEDS_A_LEAD)


class Preset(models.Model):
    """A saved request form: a user's own, or a team's (saved by one of its leads). `body` is a
    request body as the API takes it, checked by the same serializer on save and on use."""

    kind = models.CharField(max_length=20, choices=WorkloadKind.choices)
    name = models.CharField(max_length=60)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="presets",
        help_text="Set for a personal preset.",
    )
    team = models.ForeignKey(
        "accounts.Team",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="presets",
        help_text="Set for a team-wide preset.",
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    body = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["kind", "name", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(owner__isnull=False) & Q(team__isnull=True))
                | (Q(owner__isnull=True) & Q(team__isnull=False)),
                name="preset_owner_xor_team",
            ),
            models.UniqueConstraint(
                fields=["owner", "kind", "name"],
                condition=Q(owner__isnull=False),
                name="preset_unique_per_user",
            ),
            models.UniqueConstraint(
                fields=["team", "kind", "name"],
                condition=Q(team__isnull=False),
                name="preset_unique_per_team",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} preset {self.name}"

    @property
    def scope(self) -> str:
        return f"team {self.team.slug}" if self.team_id else "personal"
