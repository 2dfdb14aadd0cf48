from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone
from encrypted_fields.fields import EncryptedCharField


class User(AbstractUser):
    """A portal user. Platform admins are users with `is_staff` set."""

    cluster_identity = models.CharField(
        max_length=200, blank=True, help_text="Kubernetes user or group bound in sandbox namespaces."
    )
    sign_outs = models.PositiveIntegerField(
        default=0,
        editable=False,
        help_text="How often they signed out of the portal: a sandbox's gate cookie names the count "
        "it was given at, and opens nothing after the next sign-out.",
    )

    @property
    def is_platform_admin(self) -> bool:
        return self.is_staff or self.is_superuser


class WebhookFormat(models.TextChoices):
    """How a webhook message is shaped: the portal's JSON body, or a chat service's incoming webhook."""

    GENERIC = "generic", "Generic JSON"
    SLACK = "slack", "Slack"
    TEAMS = "teams", "Microsoft Teams"


class Team(models.Model):
    """A team with its quota, budget and approval policy.

    Quota is in GPU equivalents: a whole GPU counts 1, a MIG slice its compute slices / 7.
    """

    slug = models.SlugField("short name (slug)", unique=True)
    name = models.CharField(max_length=100)
    quota_gpus = models.DecimalField(
        "GPU quota (GPU equivalents)",
        max_digits=8,
        decimal_places=3,
        default=Decimal("16"),
        validators=[MinValueValidator(0)],
        help_text="A whole GPU counts 1, a MIG slice its compute slices / 7.",
    )
    monthly_budget = models.DecimalField(
        "monthly budget (USD)",
        max_digits=12,
        decimal_places=2,
        default=Decimal("50000"),
        validators=[MinValueValidator(0)],
    )

    class BudgetPolicy(models.TextChoices):
        WARN = "warn", "Warn only: requests over the budget need no lead for that alone"
        BLOCK = "block", "Block: requests and extensions over the budget wait for a lead"
        STOP = "stop", "Stop: block, and end running work after a grace period"

    budget_thresholds = models.JSONField(
        "budget alerts at (%)",
        default=list,
        blank=True,
        help_text="Percentages of the monthly budget at which leads are told, once a month each "
        "(empty: 50, 80 and 100).",
    )
    budget_policy = models.CharField(
        "budget policy", max_length=10, choices=BudgetPolicy.choices, default=BudgetPolicy.BLOCK
    )
    budget_stop_grace_hours = models.PositiveIntegerField(
        "grace once the budget is spent (hours)",
        default=24,
        help_text="Under the stop policy: how long running work has once the budget is spent.",
    )
    budget_stop_at = models.DateTimeField(
        "running work ends at",
        null=True,
        blank=True,
        help_text="Under the stop policy: when the team's running work ends (set by the workers).",
    )
    max_lifetime_hours = models.DecimalField(
        "longest lifetime (hours)",
        max_digits=8,
        decimal_places=2,
        default=Decimal("168"),
        validators=[MinValueValidator(1)],  # 0 would refuse every request
    )
    auto_approve_max_gpus = models.PositiveIntegerField(
        "auto-approve up to (GPUs)",
        default=1,
        help_text="Whole GPUs approved without a lead (a single MIG slice always is).",
    )
    auto_approve_max_hours = models.DecimalField(
        "auto-approve up to (hours)",
        max_digits=8,
        decimal_places=2,
        default=Decimal("24"),
        validators=[MinValueValidator(0)],
    )
    home_gb_default = models.PositiveIntegerField(
        "default home size (GB)",
        default=50,
        validators=[MinValueValidator(1)],
        help_text="Size of a member's persistent home volume when their first sandbox makes it.",
    )
    home_gb_max = models.PositiveIntegerField(
        "largest home size (GB)",
        default=200,
        validators=[MinValueValidator(1)],
        help_text="How far a member may grow their home volume.",
    )
    idle_reclaim_minutes = models.PositiveIntegerField(
        "idle warning after (minutes)",
        default=0,
        help_text="A sandbox or deployment whose GPUs stay idle this long is warned; after the grace "
        "period a sandbox is ended (its home is kept), a deployment scaled to zero (it can be scaled "
        "back). 0 (the default): never; a team opts in.",
    )
    idle_threshold_percent = models.PositiveSmallIntegerField(
        "idle below (% GPU utilization)", default=5, help_text="GPU utilization under this counts as idle."
    )
    idle_grace_minutes = models.PositiveIntegerField(
        "grace after the idle warning (minutes)",
        default=30,
        help_text="Between the idle warning and the end, for its owner to keep it.",
    )
    default_image = models.ForeignKey(
        "workloads.Image",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name="default image",
    )
    hf_token = EncryptedCharField(  # an unset token is stored as NULL by the library
        "Hugging Face token",
        max_length=500,
        blank=True,
        null=True,
        help_text="Hugging Face access token for gated models (Llama, Gemma, Mistral), set by the team's "
        "leads; the team's model servers get it as HF_TOKEN. Encrypted at rest, never shown again.",
    )
    webhook_url = models.CharField(
        "webhook URL",
        max_length=500,
        blank=True,
        help_text="Where the team's approval requests and reminders are posted.",
    )
    webhook_format = models.CharField(
        "webhook format", max_length=10, choices=WebhookFormat.choices, default=WebhookFormat.GENERIC
    )
    approval_reminder_hours = models.PositiveIntegerField(
        "remind leads after (hours)",
        default=24,
        help_text="Remind the leads of a request that waits this many hours, every as many hours; 0: never.",
    )

    # What a team's budget alerts and stop may be (the budget page and API, and the Django admin)
    THRESHOLDS_MAX = 10
    THRESHOLD_MAX_PERCENT = 200
    STOP_GRACE_MAX_HOURS = 720

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @classmethod
    def thresholds_fit(cls, thresholds: object) -> bool:
        """Budget alert thresholds a team may have: up to 10 whole percentages from 1 to 200."""
        return (
            isinstance(thresholds, list)
            and len(thresholds) <= cls.THRESHOLDS_MAX
            and all(
                isinstance(t, int) and not isinstance(t, bool) and 1 <= t <= cls.THRESHOLD_MAX_PERCENT
                for t in thresholds
            )
        )

    def clean(self) -> None:
        """What the fields' own bounds cannot say: the rules between them, and those of the budget
        alerts (the Django admin's team form; the portal's pages check through their services)."""
        errors: dict[str, str] = {}
        hours = (self.auto_approve_max_hours, self.max_lifetime_hours)
        if None not in hours and hours[0] > hours[1]:
            errors["auto_approve_max_hours"] = "At most the longest lifetime."
        sizes = (self.home_gb_default, self.home_gb_max)
        if None not in sizes and sizes[0] > sizes[1]:
            errors["home_gb_default"] = "At most the largest home size."
        if not self.thresholds_fit(self.budget_thresholds):
            errors["budget_thresholds"] = (
                f"A list of up to {self.THRESHOLDS_MAX} whole percentages from 1 to "
                f"{self.THRESHOLD_MAX_PERCENT}, as [50, 80, 100] (empty: those three)."
            )
        if not 1 <= (self.budget_stop_grace_hours or 0) <= self.STOP_GRACE_MAX_HOURS:
            errors["budget_stop_grace_hours"] = f"Whole hours from 1 to {self.STOP_GRACE_MAX_HOURS}."
        if errors:
            raise ValidationError(errors)


class Membership(models.Model):
    class Role(models.TextChoices):
        RESEARCHER = "researcher"
        LEAD = "lead"

    class Source(models.TextChoices):
        MANUAL = "manual", "Set by hand"
        SSO = "sso", "Granted by a group rule at single sign-on"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.RESEARCHER)
    # Group rules add, change and remove only the memberships they granted; one set by hand stays.
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.MANUAL)
    # When this membership began: a serving token made before it (in an earlier membership of the
    # same team, before its user left) opens nothing.
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class ApiToken(models.Model):
    """A personal access token. Only a SHA-256 of the secret is stored; it is shown once.

    Its scope bounds what it may do as its user: `read` reads only; `workloads` also requests,
    changes and ends sandboxes and deployments, decides approvals and everything else the user
    may do, but manages no tokens (nor SSH keys) and shares a sandbox with nobody new; `admin` may
    do all its user may, tokens included. `serving` calls the endpoints of one team's deployments (`team`, of which its user
    is a member) and nothing of the portal's API: it is the one scope a model server sees, and
    what a model server could learn from it opens only its own team's endpoints."""

    class Scope(models.TextChoices):
        READ = "read", "Read only"
        WORKLOADS = (
            "workloads",
            "Workloads (everything but tokens, SSH keys, kubeconfigs, sharing, notification preferences, team settings and the fleet)",
        )
        ADMIN = "admin", "Admin (everything you may do, tokens included)"
        SERVING = "serving", "Serving (calls one team's model endpoints only)"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    scope = models.CharField(max_length=10, choices=Scope.choices, default=Scope.WORKLOADS)
    # A serving token's team: the one whose endpoints it calls. None for every other scope.
    team = models.ForeignKey("Team", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    prefix = models.CharField(max_length=16, db_index=True)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expiry_warned_at = models.DateTimeField(
        null=True, blank=True, help_text="When its user was told it expires soon (a token in use)."
    )

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class SshKey(models.Model):
    """A public key its user logs in to their ssh sandboxes with. Every shell sandbox of theirs
    gets all their keys while it runs (added or removed ones within a minute or two)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ssh_keys")
    name = models.CharField(max_length=100)
    public_key = models.TextField(help_text="One line of authorized_keys: type and key, no options.")
    fingerprint = models.CharField(max_length=60, help_text="SHA256:..., as ssh-keygen -l shows it.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "SSH key"
        constraints = [models.UniqueConstraint(fields=["user", "fingerprint"], name="one_ssh_key_once")]

    def __str__(self) -> str:
        return f"{self.name} ({self.fingerprint})"

    @property
    def key_type(self) -> str:
        return self.public_key.split(" ", 1)[0]


class NotificationKind(models.TextChoices):
    """What a notification is about; each kind can be turned off per channel."""

    APPROVAL_REQUEST = "approval_request", "Approval requests"
    APPROVAL_REMINDER = "approval_reminder", "Approval reminders"
    DECISION = "decision", "Decisions on my requests"
    RUNNING = "running", "Started and rescaled"
    HEALTH = "health", "Degraded, recovered, failed"
    EXPIRY_WARNING = "expiry_warning", "Expiry warnings"
    EXPIRED = "expired", "Expired"
    IDLE = "idle", "Idle warnings"
    BUDGET = "budget", "Budget alerts"
    FLEET = "fleet", "Fleet alerts (admins)"
    OTHER = "other", "Other"


# Kinds never sent by e-mail (portal and webhook only): the preferences offer no e-mail for them.
NOT_EMAILED = frozenset({NotificationKind.RUNNING, NotificationKind.OTHER})


class NotificationChannel(models.TextChoices):
    PORTAL = "portal", "Portal"
    EMAIL = "email", "E-mail"
    WEBHOOK = "webhook", "Webhook"


class Notification(models.Model):
    """An in-app message to a user (decisions, failures, expiry warnings)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(max_length=30, choices=NotificationKind.choices, default=NotificationKind.OTHER)
    message = models.CharField(max_length=500)
    link = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.message[:60]


class NotificationSettings(models.Model):
    """A user's notification preferences: which kinds each channel leaves out, and their webhook."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_settings"
    )
    muted = models.JSONField(
        default=dict, blank=True, help_text='Per channel, the kinds it leaves out: {"email": ["running"]}.'
    )
    webhook_url = models.CharField(max_length=500, blank=True)
    webhook_format = models.CharField(
        max_length=10, choices=WebhookFormat.choices, default=WebhookFormat.GENERIC
    )

    def __str__(self) -> str:
        return f"notification settings of {self.user_id}"


class Delivery(models.Model):
    """A message a worker sends (or is to send) on one channel, with how it went."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed"

    kind = models.CharField(max_length=30, choices=NotificationKind.choices)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    next_try_at = models.DateTimeField(
        null=True, blank=True, help_text="After a failed attempt: when it is tried again."
    )
    held_until = models.DateTimeField(
        null=True, blank=True, help_text="A job is sending it: no other job takes it before this."
    )

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]

    @property
    def sending(self) -> bool:
        """A job holds it and is sending it now."""
        return (
            self.state == self.State.PENDING
            and self.held_until is not None
            and self.held_until > timezone.now()
        )

    @property
    def retry_at(self) -> datetime | None:
        """After a failed attempt, when it is tried again; None once that time has passed."""
        waiting = self.state == self.State.PENDING and self.next_try_at is not None
        return self.next_try_at if waiting and self.next_try_at > timezone.now() else None


class WebhookDelivery(Delivery):
    """One message posted (or to be posted) to a user's or a team's webhook, with how it went."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    url = models.CharField(max_length=500)
    webhook_format = models.CharField(max_length=10, choices=WebhookFormat.choices)
    body = models.JSONField()

    class Meta(Delivery.Meta):
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"{self.kind} to {self.url} ({self.state})"


class EmailDelivery(Delivery):
    """One e-mail sent (or to be sent) to a user, with how it went. A worker sends it, so a slow or
    unreachable mail server holds up no request."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    address = models.EmailField()
    subject = models.CharField(max_length=300)
    body = models.TextField()

    class Meta(Delivery.Meta):
        verbose_name_plural = "e-mail deliveries"

    def __str__(self) -> str:
        return f"{self.kind} to {self.address} ({self.state})"


class ActionLinkUse(models.Model):
    """A signed one-time link that was used: its digest, so it never works twice."""

    digest = models.CharField(max_length=64, unique=True)
    used_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.digest[:12]


class BudgetAlert(models.Model):
    """A team was told it passed `threshold` percent of its monthly budget in `month`: once each."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budget_alerts")
    month = models.DateField(help_text="The first day of the month.")
    threshold = models.PositiveSmallIntegerField()
    spent = models.DecimalField(max_digits=14, decimal_places=2)
    sent_at = models.DateTimeField()

    class Meta:
        ordering = ["-month", "threshold"]
        constraints = [
            models.UniqueConstraint(fields=["team", "month", "threshold"], name="budget_alert_once_a_month")
        ]

    def __str__(self) -> str:
        return f"{self.team} passed {self.threshold} % in {self.month:%Y-%m}"


class OidcIdentity(models.Model):
    """The identity provider's account a user signs in with: its issuer and subject (`sub`), never
    the e-mail alone. Remembers the groups of the last sign-in and whether the group rules made the
    user a platform admin (so that losing the group takes only that away)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity"
    )
    issuer = models.CharField(max_length=300)
    subject = models.CharField(max_length=255)
    groups = models.JSONField(default=list, blank=True)
    admin_by_rule = models.BooleanField(
        default=False, help_text="Platform admin because a group rule said so (taken away with the group)."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "OpenID Connect identity"
        verbose_name_plural = "OpenID Connect identities"
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="oidc_identity_unique")]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class GroupRule(models.Model):
    """Maps a group of the identity provider's group claim to a role: member or lead of a team, or
    platform admin (no team). Applied at every single sign-on; a pattern may use shell globs
    (`gpu-*`), matched case-sensitively."""

    class Role(models.TextChoices):
        MEMBER = "researcher", "Member (researcher) of the team"
        LEAD = "lead", "Lead of the team"
        ADMIN = "admin", "Platform admin"

    group = models.CharField(
        max_length=255, help_text="A value of the group claim, or a glob such as gpu-* or */ml-lead."
    )
    team = models.ForeignKey(
        Team,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="group_rules",
        help_text="The team it grants (empty for platform admin).",
    )
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        ordering = ["group", "team__slug", "role"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(role="admin", team__isnull=True)
                    | (~models.Q(role="admin") & models.Q(team__isnull=False))
                ),
                name="group_rule_team_unless_admin",
            ),
            models.UniqueConstraint(fields=["group", "team", "role"], name="group_rule_unique"),
        ]

    def __str__(self) -> str:
        target = self.team.slug if self.team_id else "the platform"
        return f"{self.group} → {self.get_role_display()} ({target})"

    def clean(self) -> None:
        if self.role == self.Role.ADMIN and self.team_id is not None:
            raise ValidationError({"team": "A platform admin rule names no team."})
        if self.role != self.Role.ADMIN and self.team_id is None:
            raise ValidationError({"team": "A member or lead rule names its team."})
