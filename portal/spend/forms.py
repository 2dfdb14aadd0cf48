"""The spend page's filter form."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django import forms
from django.utils import timezone

from portal.accounts.models import Team
from portal.spend.selectors import GROUPS

GROUP_LABELS = {"user": "User", "team": "Team", "gpu_type": "GPU type", "day": "Day", "workload": "Workload"}


# The dates a report may cover: anything outside is a typo (and 9999-12-31 plus a day overflows).
FIRST_DAY = date(2000, 1, 1)
LAST_DAY = date(2999, 12, 31)


def month_start(today: date) -> date:
    return today.replace(day=1)


class SpendForm(forms.Form):
    """Group by, a date range (inclusive, UTC; this month by default) and, for leads, a team."""

    group_by = forms.ChoiceField(choices=[(g, GROUP_LABELS[g]) for g in GROUPS], required=False)
    start = forms.DateField(label="From", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(label="To", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    team = forms.ChoiceField(required=False)

    def __init__(self, data: Any = None, *, teams: list[Team], **kwargs: Any):
        if data is not None:
            # Show the defaults in the inputs, not only apply them.
            data = data.copy()
            today = timezone.now().date()
            for key, value in (("group_by", "user"), ("start", month_start(today)), ("end", today)):
                if not data.get(key):
                    data[key] = str(value)
        super().__init__(data, **kwargs)
        self.teams = {team.slug: team for team in teams}
        self.fields["team"].choices = [("", "All I can see")] + [(t.slug, t.name) for t in teams]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        today = timezone.now().date()
        data["group_by"] = data.get("group_by") or "user"
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
