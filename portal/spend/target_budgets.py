"""Monthly budgets for one user, or one project label, within a team: optional, beside the team's
own, set by its leads (and admins), seen by its members. They use the team's alert thresholds and
100 % policy (`portal.workloads.services.budget` tells and stops; `portal.workloads.policy` asks a
lead for a request or extension that would take one over)."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation

from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.accounts.models import Team, User
from portal.accounts.selectors import is_lead
from portal.audit.services import audit_record
from portal.core.errors import NotAllowed, NotFound, ValidationFailed
from portal.spend.budgets import Forecast, target_forecasts, team_budget_get
from portal.spend.models import Budget, Level, Span, SpendRollup
from portal.spend.selectors import team_month_spend_by

MAX_AMOUNT = Decimal("9999999999.99")
LABELS_LOOKED_BACK = timedelta(days=62)
LABELS_SUGGESTED = 50
PROJECT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")


def _kind(kind: str) -> str:
    if kind not in Budget.Kind.values:
        raise NotFound(f"No budgets of kind {kind!r}: one of {', '.join(Budget.Kind.values)}.")
    return kind


def _target_q(*, team: Team, kind: str, target: str) -> dict:
    """The Budget fields naming `target` (a username or project label) in the team; not found
    when the user is no member of it."""
    if kind == Budget.Kind.USER:
        user = User.objects.filter(username=target, memberships__team=team).first()
        if user is None:
            raise NotFound(f"No member {target!r} in team {team.slug}.")
        return {"kind": kind, "user": user}
    return {"kind": kind, "project": target}


def _may_change(*, user: User, team: Team) -> None:
    if not (user.is_platform_admin or is_lead(user=user, team=team)):
        raise NotAllowed("Only a lead of the team or an admin may change its user and project budgets.")


def target_suggestions(team: Team, *, now: datetime | None = None) -> list[str]:
    """What a lead may set a budget for, to suggest as the name is typed: the team's members, and
    the project labels its work was rolled up under in the last LABELS_LOOKED_BACK (read from the
    team's day rows, so bounded by days x labels; the first LABELS_SUGGESTED by name)."""
    since = (now or timezone.now()) - LABELS_LOOKED_BACK
    members = (
        User.objects.filter(memberships__team=team).order_by("username").values_list("username", flat=True)
    )
    rolled = SpendRollup.objects.filter(level=Level.TEAM_PROJECT, span=Span.DAY, team=team, start__gte=since)
    labels = rolled.exclude(project="").order_by("project").values_list("project", flat=True).distinct()
    return list(dict.fromkeys([*members, *labels[:LABELS_SUGGESTED]]))


def team_target_budgets(
    *, user: User, slug: str, now: datetime | None = None
) -> tuple[Team, list[tuple[Budget, Forecast]]]:
    """The team's user and project budgets with where each stands (members, admins; else not found)."""
    team = team_budget_get(user=user, slug=slug)
    budgets = list(Budget.objects.filter(team=team).select_related("user"))
    return team, target_forecasts(team=team, budgets=budgets, now=now)


def team_target_budget_get(
    *, user: User, slug: str, kind: str, target: str, now: datetime | None = None
) -> tuple[Budget, Forecast]:
    """One user's or project's budget in the team, with where it stands."""
    team = team_budget_get(user=user, slug=slug)
    budget = Budget.objects.filter(team=team, **_target_q(team=team, kind=_kind(kind), target=target)).first()
    if budget is None:
        raise NotFound(f"Team {team.slug} has no budget for {kind} {target!r}.")
    return target_forecasts(team=team, budgets=[budget], now=now)[0]


def _amount(value: object) -> Decimal:
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError):
        amount = Decimal(-1)
    if (
        not amount.is_finite()
        or amount < 0
        or amount > MAX_AMOUNT
        or amount != amount.quantize(Decimal("0.01"))
    ):
        message = "An amount in USD from 0 to 9999999999.99, to the cent."
        raise ValidationFailed(f"monthly_amount: {message}", fields={"monthly_amount": [message]})
    return amount.quantize(Decimal("0.01"))


def team_target_budget_set(
    *, user: User, slug: str, kind: str, target: str, monthly_amount: object
) -> Budget:
    """A lead (or an admin) sets a user's or a project label's monthly budget in the team."""
    team = team_budget_get(user=user, slug=slug)
    _may_change(user=user, team=team)
    kind = _kind(kind)
    if kind == Budget.Kind.PROJECT and not (
        0 < len(target) <= 40 and set(target) <= PROJECT_CHARS and target != "storage"
    ):
        message = "A project label is 1-40 lowercase letters, digits and hyphens (not 'storage')."
        raise ValidationFailed(f"project: {message}", fields={"project": [message]})
    fields = _target_q(team=team, kind=kind, target=target)
    amount = _amount(monthly_amount)
    try:
        with transaction.atomic():
            budget, _ = Budget.objects.update_or_create(
                team=team, **fields, defaults={"monthly_amount": amount}
            )
    except IntegrityError:  # set at the same moment by another lead: theirs, then ours
        Budget.objects.filter(team=team, **fields).update(monthly_amount=amount)
        budget = Budget.objects.get(team=team, **fields)
    audit_record(actor=user, action="team.target_budget_set", obj=team, team=team,
                 detail=f"{kind} {target}: ${amount:,.2f} a month")  # fmt: skip
    return budget


def team_target_budget_delete(*, user: User, slug: str, kind: str, target: str) -> None:
    """A lead (or an admin) removes a user's or a project label's budget: only the team's counts."""
    team = team_budget_get(user=user, slug=slug)
    _may_change(user=user, team=team)
    deleted, _ = Budget.objects.filter(
        team=team, **_target_q(team=team, kind=_kind(kind), target=target)
    ).delete()
    if not deleted:
        raise NotFound(f"Team {team.slug} has no budget for {kind} {target!r}.")
    audit_record(
        actor=user, action="team.target_budget_deleted", obj=team, team=team, detail=f"{kind} {target}"
    )


def my_target_budgets(*, user: User, now: datetime | None = None) -> list[Forecast]:
    """The user's own budgets, in each team that set one, with where each stands."""
    found: list[Forecast] = []
    budgets = list(Budget.objects.filter(kind=Budget.Kind.USER, user=user).select_related("team", "user"))
    for budget in budgets:
        found += [forecast for _, forecast in target_forecasts(team=budget.team, budgets=[budget], now=now)]
    return found


def budgets_exceeded(
    *, team: Team, user_id: int | None, project: str, cost: Decimal, now: datetime | None = None
) -> list[str]:
    """Why `cost` needs a lead under the user's and the project's budgets in the team (none: []):
    over what is left of either, with the overage. One query when neither has a budget."""
    budgets = [
        b
        for b in Budget.objects.filter(team=team).select_related("user")
        if (b.kind == Budget.Kind.USER and b.user_id == user_id)
        or (b.kind == Budget.Kind.PROJECT and project and b.project == project)
    ]
    reasons = []
    now = now or timezone.now()
    for budget in budgets:
        spent = team_month_spend_by(team=team, key=budget.kind, now=now).get(
            budget.user_id if budget.kind == Budget.Kind.USER else budget.project, Decimal("0.00")
        )
        left = budget.monthly_amount - spent
        if cost <= left:
            continue
        whose = (
            f"{budget.user.username}'s" if budget.kind == Budget.Kind.USER else f"project {budget.project}'s"
        )
        reasons.append(
            f"over what is left of {whose} monthly budget (${max(left, Decimal(0)):,.2f} left; "
            f"this costs up to ${cost:,.2f}, ${cost - max(left, Decimal(0)):,.2f} over)"
        )
    return reasons
