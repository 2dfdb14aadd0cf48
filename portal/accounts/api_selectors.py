"""Reads the accounts API needs: the signed-in user's teams with quota and budget, their tokens."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import QuerySet
from django.utils import timezone

from portal.accounts.models import ApiToken, Membership, Team, User
from portal.spend.selectors import team_month_spend
from portal.workloads.policy import fraction_to_decimal, team_committed


@dataclass(frozen=True)
class TeamStanding:
    team: Team
    role: str
    quota_total: Decimal
    quota_used: Decimal
    quota_left: Decimal
    budget_monthly: Decimal
    budget_spent: Decimal
    budget_left: Decimal


def user_standing(user: User) -> list[TeamStanding]:
    """Each of the user's teams with the role held, GPU equivalents committed and money spent
    this month (two queries per team)."""
    now = timezone.now()
    standings = []
    memberships = Membership.objects.filter(user=user).select_related("team").order_by("team__slug")
    for membership in memberships:
        team = membership.team
        used = fraction_to_decimal(team_committed(team))
        spent = team_month_spend(team=team, now=now)
        standings.append(
            TeamStanding(
                team=team,
                role=membership.role,
                quota_total=team.quota_gpus,
                quota_used=used,
                quota_left=team.quota_gpus - used,
                budget_monthly=team.monthly_budget,
                budget_spent=spent,
                budget_left=team.monthly_budget - spent,
            )
        )
    return standings


def tokens_of(user: User) -> QuerySet[ApiToken]:
    """The user's personal access tokens, newest first (revoked ones too)."""
    return ApiToken.objects.filter(user=user).order_by("-created_at", "-id")
