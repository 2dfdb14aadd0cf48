"""The Django admin keeps a team's values and prices within what the portal can make sense of:
no negative budget or price, no auto-approval beyond the longest lifetime, no default home above
the largest, idle reclaim, reminders and budget alerts within the bounds the leads' pages keep, a
webhook the portal would post to. A refused save changes nothing."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.forms.models import model_to_dict

from portal.accounts.admin import TeamAdminForm
from portal.accounts.models import Team
from portal.fleet.models import GpuType, PriceBookEntry, StoragePrice
from tests.conftest import signed_in

pytestmark = pytest.mark.django_db


def _form(team: Team, **changes) -> TeamAdminForm:
    data = {k: v for k, v in model_to_dict(team, exclude=["hf_token"]).items() if v is not None}
    data["budget_thresholds"] = "[]"
    return TeamAdminForm(data={**data, **changes}, instance=team)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("monthly_budget", "-1", "greater than or equal to 0"),
        ("max_lifetime_hours", "0", "greater than or equal to 1"),
        ("auto_approve_max_hours", "500", "At most the longest lifetime."),
        ("home_gb_default", "500", "At most the largest home size."),
        ("home_gb_max", "0", "greater than or equal to 1"),
        ("idle_threshold_percent", "500", "Percent GPU utilization under which it counts as idle: 1 to 100."),
        ("idle_reclaim_minutes", "5", "0 (off) or 10 to 10080"),
        ("idle_grace_minutes", "0", "5 to 1440"),
        ("approval_reminder_hours", "9999", "from 0 (never) to 720"),
        ("budget_thresholds", '["x"]', "up to 10 whole percentages from 1 to 200"),
        ("budget_thresholds", "[50, 300]", "up to 10 whole percentages from 1 to 200"),
        ("budget_stop_grace_hours", "0", "Whole hours from 1 to 720."),
        ("webhook_url", "javascript:alert(1)", "https"),
    ],
)
def test_a_team_value_the_portal_cannot_use_is_refused_at_its_field(team, field, value, message):
    form = _form(team, **{field: value})
    assert not form.is_valid()
    assert message in " ".join(form.errors[field]), form.errors
    team.refresh_from_db()
    assert team.monthly_budget == Decimal("50000.00")  # nothing saved


def test_sensible_team_values_save(team):
    form = _form(team, monthly_budget="0", budget_thresholds="[50, 90]", idle_reclaim_minutes="0")
    assert form.is_valid(), form.errors
    form.save()
    team.refresh_from_db()
    assert (team.monthly_budget, team.budget_thresholds) == (Decimal("0"), [50, 90])


def test_a_negative_price_or_no_memory_is_refused_on_the_admin_page(admin_user, fleet):
    gpu_type = GpuType.objects.first()
    page = signed_in(admin_user).post(
        "/admin/fleet/storageprice/add/",
        {"price_per_gb_month": "-0.10", "effective_from_0": "2026-12-01", "effective_from_1": "00:00:00"},
    )
    assert page.status_code == 200 and "greater than or equal to 0" in page.content.decode()
    assert not StoragePrice.objects.exists()
    for bad in (
        PriceBookEntry(gpu_type=gpu_type, price_per_hour=Decimal("-3"), effective_from="2026-12-01T00:00Z"),
        GpuType(slug="x", name="X", memory_gb=0),
    ):
        with pytest.raises(Exception, match="greater than or equal to"):
            bad.full_clean()
