"""Reads the spend page needs: the teams a user may filter by and their budgets this month."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from portal.accounts.models import Team, User
from portal.accounts.selectors import lead_team_ids
from portal.spend.selectors import team_month_spend


def spend_teams(user: User) -> list[Team]:
    """Teams whose spend the user sees as a whole: all for admins, the ones they lead otherwise."""
    teams = Team.objects.order_by("slug")
    if user.is_platform_admin:
        return list(teams)
    return list(teams.filter(pk__in=lead_team_ids(user)))


@dataclass(frozen=True)
class Budget:
    team: Team
    budget: Decimal
    used: Decimal

    @property
    def left(self) -> Decimal:
        return self.budget - self.used

    @property
    def used_percent(self) -> int:
        if self.budget <= 0:
            return 100
        return min(100, int(self.used * 100 / self.budget))


def team_budgets(teams: list[Team]) -> list[Budget]:
    """This month's budget, used and left, per team (one query per team)."""
    return [Budget(team=team, budget=team.monthly_budget, used=team_month_spend(team=team)) for team in teams]
