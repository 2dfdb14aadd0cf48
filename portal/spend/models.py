"""Spend roll-ups: what the holds cost, summed per period of closed time, kept by the workers so
that a report reads a few hundred rows instead of every hold. `portal.spend.rollup` says how they
are made and kept true; nothing here is typed in, everything is derived from the holds."""

from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.db.models import Q


class UnitsField(models.Field):
    """An exact decimal amount in units (see portal.spend.cost): numeric on PostgreSQL, which adds
    it exactly; text on SQLite, whose numeric columns keep 15 digits (there sums are made in Python)."""

    description = "Exact decimal (spend units)"

    def db_type(self, connection) -> str:
        return "text" if connection.vendor == "sqlite" else "numeric(44, 10)"

    def from_db_value(self, value, expression, connection) -> Decimal | None:
        return None if value is None else Decimal(value)

    def to_python(self, value) -> Decimal | None:
        return None if value is None else Decimal(value)

    def get_db_prep_value(self, value, connection, prepared=False):
        if value is None:
            return None
        value = Decimal(value)
        return format(value, "f") if connection.vendor == "sqlite" else value


AMOUNT = {"default": Decimal(0)}


def _ref(model: str, **kwargs: object) -> models.ForeignKey:
    """A reference that never blocks a delete or a load: roll-ups are derived, and rebuilt. Not
    indexed alone: each model names the indexes its reads use."""
    return models.ForeignKey(
        model, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+", **kwargs
    )


class Span(models.TextChoices):
    """A UTC hour or a block of 2, 4 or 8 hours aligned in its day (kept for recent days, blocks of
    8 hours for a year: they answer the partial-day edges of a range), a UTC day, or a block of
    2**k days aligned on a multiple of its length since 1970-01-01."""

    HOUR = "hour"
    HOURS_2 = "2h"
    HOURS_4 = "4h"
    HOURS_8 = "8h"
    DAY = "day"
    DAYS_2 = "2d"
    DAYS_4 = "4d"
    DAYS_8 = "8d"
    DAYS_16 = "16d"
    DAYS_32 = "32d"
    DAYS_64 = "64d"
    DAYS_128 = "128d"
    DAYS_256 = "256d"


class Level(models.IntegerChoices):
    """How finely a roll-up row splits its period's spend; coarse levels answer wide reports in
    few rows, the fine one answers a researcher's own figures and the workload report."""

    TEAM = 1, "team"
    TEAM_KIND = 2, "team and GPU type (or storage)"
    USER = 3, "team and user"
    FINE = 4, "team, user, GPU type (or storage) and workload"
    PROJECT = 5, "team, user and project label (or storage)"
    TEAM_PROJECT = 6, "team and project label (or storage)"


class SpendPeriod(models.Model):
    """A period whose roll-up rows exist: a day rolled from the holds (today's up to `until` only),
    or a block summed from its two halves. `stale`: something changed in it since; reports compute
    it from the holds until the workers roll it again."""

    span = models.CharField(max_length=5, choices=Span.choices)
    start = models.DateTimeField()
    until = models.DateTimeField(help_text="The end of the time its rows cover.")
    stale = models.BooleanField(default=False)
    rolled_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["span", "start"], name="spend_period_unique")]

    def __str__(self) -> str:
        return f"{self.span} from {self.start:%Y-%m-%d} to {self.until:%Y-%m-%d %H:%M}{' (stale)' if self.stale else ''}"


class SpendRollup(models.Model):
    """What the holds of one key cost within one period, in exact units (portal.spend.cost). Which
    key fields are set depends on the level; storage rows have `storage` and no GPU type. Blocks
    of days have no fine rows (blocks of hours have every level)."""

    span = models.CharField(max_length=5, choices=Span.choices)
    start = models.DateTimeField()
    level = models.PositiveSmallIntegerField(choices=Level.choices)
    team = _ref("accounts.Team")
    user = _ref("accounts.User", null=True)
    gpu_type = _ref("fleet.GpuType", null=True)
    storage = models.BooleanField(default=False)
    workload = _ref("workloads.Workload", null=True)
    # Project level only: the workloads' project label ("" for none, and on storage rows).
    project = models.CharField(max_length=40, blank=True, default="")
    cost = UnitsField(**AMOUNT)
    gpu_hours = UnitsField(**AMOUNT)
    idle_cost = UnitsField(**AMOUNT)

    class Meta:
        indexes = [
            models.Index(fields=["level", "span", "start"], name="spend_rollup_when"),
            models.Index(fields=["level", "span", "team", "start"], name="spend_rollup_team"),
            models.Index(
                fields=["level", "span", "user", "start"],
                name="spend_rollup_user",
                condition=Q(level__in=[3, 4]),
            ),
            # A workload's day rows, read from the index alone (PostgreSQL): the workload report
            # sums them for workloads running across a range's edge, over as much as a year.
            models.Index(
                fields=["workload", "start"],
                name="spend_rollup_workload_days",
                include=["team", "user", "cost", "gpu_hours", "idle_cost"],
                condition=Q(level=4, span="day", workload__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.span} {self.start:%Y-%m-%d %H:%M} level {self.level}: {self.cost}"


class WorkloadSpend(models.Model):
    """A workload's spend over all its rolled days (the sum of its fine day rows), with the first
    and last of those days: the workload report takes the largest workloads of a wide range from
    here, in one index scan, instead of summing a row per workload and day."""

    workload = _ref("workloads.Workload")
    team = _ref("accounts.Team")
    user = _ref("accounts.User")
    first_day = models.DateField()
    last_day = models.DateField()
    cost = UnitsField(**AMOUNT)
    gpu_hours = UnitsField(**AMOUNT)
    idle_cost = UnitsField(**AMOUNT)
    # The workload has totals under more than one team or user (its holds were taken under
    # several): the workload report looks such totals up for the workloads at a range's edges,
    # which every other workload's one total cannot answer for (see by_workload._top_pg). A
    # default in the database too: workers of the release before insert totals without it.
    shared = models.BooleanField(default=False, db_default=False)
    # Bounds on what the total's days cost within a range that holds only some of them: its dearest
    # day (its day rows summed by day), and its cheapest day strictly between its first and last,
    # or zero where it has no row on some day between (or no day lies between). The workload report
    # leaves out the day rows of a workload running across a range's edge that cannot be among the
    # largest (see by_workload). Null where unknown: totals written by workers of the release before.
    peak_day_cost = UnitsField(null=True)
    low_day_cost = UnitsField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workload", "team", "user"], name="workload_spend_unique")
        ]
        indexes = [
            # The largest totals read in cost order until enough lie in a range (the fleet's, a
            # team's, one's own in other teams): each one's days (and what the report takes of
            # it) from the index alone, not from a row a random page away (most of those read
            # lie outside a month's range)
            models.Index(
                fields=["-cost", "workload"],
                include=["first_day", "last_day", "gpu_hours", "idle_cost"],
                name="workload_spend_by_cost",
            ),
            models.Index(
                fields=["team", "-cost", "workload"],
                include=["first_day", "last_day", "gpu_hours", "idle_cost"],
                name="workload_spend_team_by_cost",
            ),
            models.Index(
                fields=["user", "-cost", "workload"],
                include=["team", "first_day", "last_day", "gpu_hours", "idle_cost"],
                name="workload_spend_user_by_cost",
            ),
            models.Index(fields=["workload"], name="workload_spend_shared", condition=Q(shared=True)),
        ]

    def __str__(self) -> str:
        return f"workload {self.workload_id}: {self.cost} ({self.first_day} to {self.last_day})"


class SpendOpenHold(models.Model):
    """A hold that was still open when a period it overlaps was rolled: the rolled rows counted it
    up to `end_seen` (now or its workload's expiry, then). Should its end move before `through`
    (the end of the last period rolled with it open), by an end set in the past, a changed
    expiry or its deletion, the periods in between are stale: reports find that by comparing these
    rows with the holds, and the workers roll those periods again."""

    allocation = _ref("fleet.Allocation", null=True)
    storage_hold = _ref("fleet.StorageHold", null=True)
    team = _ref("accounts.Team")
    held_from = models.DateTimeField(help_text="The hold's start: should it vanish, what it added is wrong.")
    through = models.DateTimeField()
    end_seen = models.DateTimeField()

    class Meta:
        constraints = [  # NULLs are distinct: one row per allocation, one per storage hold
            models.UniqueConstraint(fields=["allocation"], name="spend_open_allocation"),
            models.UniqueConstraint(fields=["storage_hold"], name="spend_open_storage_hold"),
        ]
        indexes = [models.Index(fields=["team"], name="spend_open_team")]

    def __str__(self) -> str:
        return f"hold {self.allocation_id or self.storage_hold_id} open through {self.through}"


class SpendHoldChange(models.Model):
    """A hold whose billed end may have moved: an allocation or storage hold whose end was set or
    changed, or that was deleted, or a workload whose expiry changed. Written by the database itself
    (triggers of migration 0011 of this app), so no code that writes holds calls spend and nothing
    that writes them, an import or an edit by hand included, goes unseen. Reports compare only the
    open holds these name with what was rolled (`periods.changes`); the workers' periodic check
    reads them the same way and deletes them. No references: the rows outlive what they name."""

    allocation_id = models.BigIntegerField(null=True)
    storage_hold_id = models.BigIntegerField(null=True)
    workload_id = models.BigIntegerField(null=True)

    def __str__(self) -> str:
        which = [
            f"{name} {value}"
            for name, value in (
                ("allocation", self.allocation_id),
                ("storage hold", self.storage_hold_id),
                ("workload", self.workload_id),
            )
            if value is not None
        ]
        return f"changed: {', '.join(which)}"


class SpendWatermark(models.Model):
    """One row: the highest hold ids the workers have checked for holds inserted into rolled time
    (an import, a backdated hold); newer ones are checked by every report. Its row is also the
    lock that keeps two roll-ups from running at once."""

    allocation_id_seen = models.BigIntegerField(default=0)
    storage_hold_id_seen = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"holds checked up to {self.allocation_id_seen} / {self.storage_hold_id_seen}"


class Budget(models.Model):
    """A team's monthly budget for one of its users, or for one project label: optional, beside
    the team's own, set by its leads. It uses the team's alert thresholds and 100 % policy; under
    "stop" only that user's (or project's) running work ends, at `stop_at`."""

    class Kind(models.TextChoices):
        USER = "user", "User"
        PROJECT = "project", "Project"

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    user = models.ForeignKey(
        "accounts.User", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    project = models.CharField(max_length=40, blank=True, default="")
    monthly_amount = models.DecimalField(max_digits=12, decimal_places=2)
    stop_at = models.DateTimeField(
        null=True, blank=True, help_text="Under the stop policy: when its running work ends."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["kind", "project", "user_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "user"], condition=Q(kind="user"), name="spend_budget_one_per_user"
            ),
            models.UniqueConstraint(
                fields=["team", "project"], condition=Q(kind="project"), name="spend_budget_one_per_project"
            ),
            models.CheckConstraint(
                condition=Q(kind="user", user__isnull=False, project="")
                | (Q(kind="project", user__isnull=True) & ~Q(project="")),
                name="spend_budget_target_of_its_kind",
            ),
            models.CheckConstraint(condition=Q(monthly_amount__gte=0), name="spend_budget_not_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.team} {self.kind} {self.target}: {self.monthly_amount}"

    @property
    def target(self) -> str:
        """The username or project label it is for."""
        return self.project if self.kind == self.Kind.PROJECT else self.user.username


class BudgetAlertSent(models.Model):
    """A user's or project's budget passed `threshold` percent in `month`: told once each (the
    constraint keeps two workers from telling twice)."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="alerts")
    month = models.DateField(help_text="The first day of the month.")
    threshold = models.PositiveSmallIntegerField()
    spent = models.DecimalField(max_digits=14, decimal_places=2)
    sent_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["budget", "month", "threshold"], name="spend_budget_alert_once_a_month"
            )
        ]

    def __str__(self) -> str:
        return f"{self.budget} passed {self.threshold} % in {self.month:%Y-%m}"
