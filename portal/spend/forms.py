"""The spend page's filter form."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django import forms
from django.http import Http404
from django.utils import timezone

from portal.accounts.models import Team
from portal.spend.daily import SPLIT_LABELS, SPLITS
from portal.spend.selectors import GROUPS

GROUP_LABELS = {
    "user": "User",
    "team": "Team",
    "gpu_type": "GPU type",
    "day": "Day",
    "workload": "Workload",
    "project": "Project",
}


# The dates a report may cover: anything outside is a typo (and 9999-12-31 plus a day overflows).
FIRST_DAY = date(2000, 1, 1)
LAST_DAY = date(2999, 12, 31)


def month_start(today: date) -> date:
    return today.replace(day=1)


class SpendForm(forms.Form):
    """Group by, a date range (inclusive, UTC; this month by default), for leads a team, and how
    the daily chart splits each day's cost."""

    group_by = forms.ChoiceField(choices=[(g, GROUP_LABELS[g]) for g in GROUPS], required=False)
    start = forms.DateField(label="From", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(label="To", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    team = forms.ChoiceField(required=False)
    split = forms.ChoiceField(
        label="Each day by", choices=[(s, SPLIT_LABELS[s]) for s in SPLITS], required=False
    )

    def __init__(self, data: Any = None, *, teams: list[Team], **kwargs: Any):
        if data is not None:
            # Show the defaults in the inputs, not only apply them.
            data = data.copy()
            today = timezone.now().date()
            defaults = (
                ("group_by", "user"),
                ("start", month_start(today)),
                ("end", today),
                ("split", "user"),
            )
            for key, value in defaults:
                if not data.get(key):
                    data[key] = str(value)
        super().__init__(data, **kwargs)
        self.teams = {team.slug: team for team in teams}
        self.fields["team"].choices = [("", "All I can see")] + [(t.slug, t.name) for t in teams]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.has_error("team", "invalid_choice"):
            # A team the user may not see is answered as one that does not exist (as the API does):
            # the page never tells that a team of that name is there.
            raise Http404("No team of that name among the teams whose spend you see.")
        today = timezone.now().date()
        data["group_by"] = data.get("group_by") or "user"
        data["split"] = data.get("split") or "user"
        data["start"] = data.get("start") or month_start(today)
        data["end"] = data.get("end") or today
        outside = [key for key in ("start", "end") if not FIRST_DAY <= data[key] <= LAST_DAY]
        for key in outside:
            self.add_error(key, f"Pick a date between {FIRST_DAY} and {LAST_DAY}.")
        if not outside and data["end"] < data["start"]:
            self.add_error("end", "The end is before the start.")
        return data

    def window(self) -> tuple[datetime, datetime]:
        """[start, end) in UTC: the end date is included."""
        start = datetime.combine(self.cleaned_data["start"], time.min, tzinfo=UTC)
        end = datetime.combine(self.cleaned_data["end"], time.min, tzinfo=UTC) + timedelta(days=1)
        return start, end

    def chosen_team(self) -> Team | None:
        return self.teams.get(self.cleaned_data.get("team") or "")


class BudgetPolicyForm(forms.Form):
    """A team's budget alert thresholds and its policy at 100 %: parsed here, judged by
    `budgets.team_budget_set` (the rules and messages of `PATCH /api/v1/teams/{slug}/budget`)."""

    thresholds = forms.CharField(
        label="Tell the leads at (% of the budget)",
        max_length=200,
        help_text="Whole percentages from 1 to 200, separated by commas; up to 10.",
        widget=forms.TextInput(attrs={"inputmode": "numeric", "placeholder": "50, 80, 100"}),
    )
    policy = forms.ChoiceField(label="At 100 %", choices=Team.BudgetPolicy.choices)
    stop_grace_hours = forms.IntegerField(
        label="Grace before running work ends (hours)",
        help_text="Under the stop policy; whole hours from 1 to 720.",
        widget=forms.NumberInput(attrs={"min": "1", "max": "720"}),
    )

    @classmethod
    def of(cls, team: Team, thresholds: list[int]) -> BudgetPolicyForm:
        return cls(
            initial={
                "thresholds": ", ".join(str(t) for t in thresholds),
                "policy": team.budget_policy,
                "stop_grace_hours": team.budget_stop_grace_hours,
            }
        )

    def clean_thresholds(self) -> list[int]:
        parts = [part for part in self.cleaned_data["thresholds"].replace(",", " ").split() if part]
        if not parts or not all(part.isascii() and part.isdigit() for part in parts):
            raise forms.ValidationError("Up to 10 whole percentages from 1 to 200.")
        return [int(part) for part in parts]
