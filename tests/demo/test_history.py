"""The demo's two weeks of ended sandboxes: billed as the portal bills, holding nothing now, written once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from itertools import pairwise

import pytest
from django.core.management import call_command
from django.urls import reverse

from portal.accounts.models import User
from portal.audit.models import AuditEvent
from portal.demo.history import HABITS, HISTORY_DAYS, demo_history
from portal.demo.seed import DEMO_NODES, demo_seed
from portal.fleet.geometry import GPU_MODELS
from portal.fleet.models import Allocation
from portal.spend import selectors
from portal.workloads.models import END_STATES, Workload

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 5, 3, 30, tzinfo=UTC)
TODAY = datetime(2026, 12, 5, tzinfo=UTC)
GPU_TYPE_OF_NODE = {node: gpu_type for node, gpu_type, _, _ in DEMO_NODES}


def _expected_by_user() -> dict[str, Decimal]:
    """From the habits and the list prices alone: share x hours x price for each run that ended."""
    totals: dict[str, Decimal] = {}
    for habit in HABITS:
        model = GPU_MODELS[GPU_TYPE_OF_NODE[habit.node]]
        share = Decimal(model.profile(habit.profile).compute_slices) / 7 if habit.profile else habit.count
        for days_ago in range(1, HISTORY_DAYS + 1):
            end = TODAY - timedelta(days=days_ago) + timedelta(hours=habit.hour + habit.hours)
            if days_ago % habit.every == 0 and end <= NOW:
                cost = share * habit.hours * model.list_price_per_hour
                totals[habit.owner] = totals.get(habit.owner, Decimal(0)) + cost
    return {user: total.quantize(Decimal("0.01")) for user, total in totals.items()}


def test_the_history_is_billed_to_the_cent_and_holds_nothing_now():
    demo_seed(history=False)
    written = demo_history(now=NOW)

    assert written == Workload.objects.count() > 40
    assert not Workload.objects.exclude(state__in=END_STATES).exists()
    assert not Allocation.objects.filter(released_at__isnull=True).exists()
    assert not Allocation.objects.filter(ended_at__gt=NOW).exists()
    admin = User.objects.get(username="admin")
    start = TODAY - timedelta(days=HISTORY_DAYS)
    rows = selectors.spend_grouped(user=admin, group_by="user", start=start, end=NOW, now=NOW)
    got = {row.label.split()[0].lower(): row.cost for row in rows}
    assert (
        got
        == _expected_by_user()
        == {
            "alice": Decimal("694.88"),  # 14 x 7 h of an H100, 7 x 3 h of an H100's 1g.10gb, at $6.88
            "bob": Decimal("550.40"),  # 4 x 10 h of two H100s
            "carol": Decimal("927.08"),  # 14 x 8 h of an H200 at $7.91, 7 x 4 h of an A100's 3g.40gb
        }
    )


def test_no_two_holds_share_a_gpu_at_once():
    demo_seed(history=False)
    demo_history(now=NOW)
    holds = sorted(Allocation.objects.values_list("gpu_id", "started_at", "ended_at"))
    for (gpu, _, end), (next_gpu, next_start, _) in pairwise(holds):
        assert gpu != next_gpu or end <= next_start


def test_the_seed_writes_the_history_once_and_not_at_all_when_asked(capsys):
    call_command("seed_demo")
    first = Workload.objects.count()
    assert first > 40
    capsys.readouterr()
    call_command("seed_demo")
    assert Workload.objects.count() == first
    assert "(0 objects created)" in capsys.readouterr().out


def test_no_history_leaves_the_portal_empty_of_work():
    call_command("seed_demo", "--no-history", verbosity=0)
    assert not Workload.objects.exists()


def test_a_history_sandbox_reads_as_one_that_ran_and_ended(client):
    demo_seed(history=False)
    demo_history(now=NOW)
    sandbox = Workload.objects.filter(name="detector-dev").order_by("started_at").first()
    client.force_login(sandbox.owner)
    page = client.get(reverse("sandbox-detail", args=[sandbox.number])).content.decode()
    assert "gone with the sandbox" in page and "it never ran" not in page
    assert "$48.16" in page  # 7 h of one H100 at $6.88
    trail = AuditEvent.objects.filter(object_id=str(sandbox.pk)).order_by("created_at")
    assert [e.created_at for e in trail] == [sandbox.started_at, sandbox.ended_at]
