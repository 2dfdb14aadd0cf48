"""Spend by project label: from the roll-ups' project level, equal to the cent to costing every
hold one by one (tests/spend/reference.py), over whole days, blocks, partial-day edges and today;
holds of no workload or of unlabelled workloads under "(no project)", storage apart."""

from __future__ import annotations

import importlib
from datetime import timedelta
from decimal import Decimal
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.db import connection
from hypothesis import HealthCheck, given, settings

from portal.fleet.models import Allocation, Gpu, StorageHold
from portal.spend import selectors
from portal.spend.models import Level, Span, SpendPeriod, SpendRollup
from portal.spend.services import spend_rollup_due
from portal.workloads.models import Workload
from tests.conftest import signed_in
from tests.rows import make_sandbox
from tests.spend import reference
from tests.spend.test_rollups import (
    BASE,
    NOW,
    _clear,
    _load,
    holds_strategy,
    ranges_strategy,
    storage_strategy,
)

pytestmark = pytest.mark.django_db
LABELS = ["llm-eval", "vision-train", "llm-eval", ""]


@pytest.fixture
def people(fleet, team, other_team, researcher, lead, other_researcher, admin_user):
    """As in test_rollups: three holders in two teams, three viewers, four GPUs."""
    return {
        "holders": [(researcher, team), (lead, team), (other_researcher, other_team)],
        "viewers": [admin_user, lead, researcher],
        "teams": [team, other_team],
        "gpus": list(Gpu.objects.order_by("pk")[:4]),
    }


@pytest.fixture
def four_hour_days(settings):
    """As in test_rollups: the last four days by the hour too, so ranges have edges of both kinds
    (in rolled hours, every range that ends now among them, and in older days' blocks of 8 hours),
    and the roll-up of each example stays short."""
    settings.PORTAL_SPEND_HOUR_DAYS = 4


def _label_workloads() -> None:
    for workload, label in zip(Workload.objects.order_by("pk"), LABELS, strict=False):
        Workload.objects.filter(pk=workload.pk).update(project=label)


def _assert_by_project(people, ranges) -> None:
    for viewer in people["viewers"]:
        for offset, length in ranges:
            start = BASE + timedelta(seconds=offset)
            for end in (start + timedelta(seconds=length), NOW):
                if end <= start:
                    continue
                got = selectors.spend_grouped(user=viewer, group_by="project", start=start, end=end, now=NOW)
                want = reference.spend_grouped(user=viewer, group_by="project", start=start, end=end, now=NOW)
                assert reference.as_tuples(got) == reference.as_tuples(want), (viewer.username, start, end)


@pytest.mark.long
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(holds=holds_strategy, storage=storage_strategy, ranges=ranges_strategy)
def test_spend_by_project_equals_every_hold_costed_one_by_one(people, four_hour_days, holds, storage, ranges):
    _clear()
    _load(people, holds, storage, [], expired=False)
    _label_workloads()
    _assert_by_project(people, ranges)  # nothing rolled yet: all from the holds
    spend_rollup_due(now=NOW, days_per_run=100)
    assert SpendPeriod.objects.filter(span=Span.DAY, stale=False).exists()
    _assert_by_project(people, ranges)


def test_the_project_level_is_rolled_and_summed_into_blocks(people, admin_user):
    _clear()
    researcher, team = people["holders"][0]
    gpu = people["gpus"][0]
    sandbox = make_sandbox(owner=researcher, team=team, gpu_type=gpu.gpu_type, project="llm-eval")
    bare = make_sandbox(owner=researcher, team=team, gpu_type=gpu.gpu_type)
    for n, workload in enumerate([sandbox, bare]):
        start = BASE + timedelta(hours=n)
        Allocation.objects.create(
            gpu=gpu, workload=workload, team=team, user=researcher, gpu_type=gpu.gpu_type,
            share_numerator=1, share_denominator=1, price_per_hour=Decimal("2.0000"), started_at=start,
            ended_at=start + timedelta(days=8), released_at=start + timedelta(days=8),
        )  # fmt: skip
    spend_rollup_due(now=NOW, days_per_run=100)

    rows = SpendRollup.objects.filter(level=Level.PROJECT)
    assert set(rows.values_list("project", flat=True)) == {"llm-eval", ""}
    assert rows.exclude(span=Span.DAY).exists()  # blocks too
    by_team = SpendRollup.objects.filter(level=Level.TEAM_PROJECT)
    assert set(by_team.values_list("project", "user_id")) == {("llm-eval", None), ("", None)}
    assert by_team.exclude(span=Span.DAY).exists()
    got = selectors.spend_grouped(user=admin_user, group_by="project", start=BASE, end=NOW, now=NOW)
    assert [(r.key, r.cost) for r in got] == [
        ("(no project)", Decimal("384.00")),
        ("llm-eval", Decimal("384.00")),
    ]


def test_a_stale_roll_up_makes_every_period_roll_again_for_the_project_level(people, four_hour_days):
    """What migration 0003 does: periods rolled before the level existed are rolled again."""
    _clear()
    researcher, team = people["holders"][0]
    gpu = people["gpus"][0]
    sandbox = make_sandbox(owner=researcher, team=team, gpu_type=gpu.gpu_type, project="llm-eval")
    Allocation.objects.create(
        gpu=gpu, workload=sandbox, team=team, user=researcher, gpu_type=gpu.gpu_type, share_numerator=1,
        share_denominator=1, price_per_hour=Decimal("2.0000"), started_at=BASE, ended_at=BASE + timedelta(days=2),
        released_at=BASE + timedelta(days=2),
    )  # fmt: skip
    spend_rollup_due(now=NOW, days_per_run=100)
    SpendRollup.objects.filter(level=Level.PROJECT).delete()
    SpendPeriod.objects.update(stale=True)

    spend_rollup_due(now=NOW, days_per_run=100)

    assert SpendRollup.objects.filter(level=Level.PROJECT, project="llm-eval").exists()


def _rows(level: Level) -> set[tuple]:
    return set(
        SpendRollup.objects.filter(level=level).values_list(
            "span", "start", "team_id", "user_id", "storage", "project", "cost", "gpu_hours", "idle_cost"
        )
    )


def test_migration_0007_sums_the_team_and_project_rows_the_roll_up_would_write(people):
    """Periods rolled before the team-and-project level existed get its rows from the level with
    users, equal to the unit to those a roll-up writes, with no period rolled again."""
    _clear()
    _load_labelled(people)
    spend_rollup_due(now=NOW, days_per_run=100)
    rolled = _rows(Level.TEAM_PROJECT)
    assert len(rolled) > 4
    SpendRollup.objects.filter(level=Level.TEAM_PROJECT).delete()
    periods = set(SpendPeriod.objects.values_list("span", "start", "rolled_at"))

    fill = importlib.import_module("portal.spend.migrations.0007_team_project_level").fill
    fill(django_apps, SimpleNamespace(connection=connection))
    fill(django_apps, SimpleNamespace(connection=connection))  # again: the same rows, not twice

    assert _rows(Level.TEAM_PROJECT) == rolled
    assert set(SpendPeriod.objects.values_list("span", "start", "rolled_at")) == periods


def _load_labelled(people) -> None:
    """Two teams' holds over 9 days, of two labels and none, and a storage hold."""
    for n, (holder, team) in enumerate(people["holders"]):
        gpu = people["gpus"][n]
        for m, label in enumerate(("llm-eval", "vision-train", "")):
            workload = make_sandbox(owner=holder, team=team, gpu_type=gpu.gpu_type, project=label)
            start = BASE + timedelta(hours=7 * n + 13 * m, minutes=17)
            Allocation.objects.create(
                gpu=gpu, workload=workload, team=team, user=holder, gpu_type=gpu.gpu_type, share_numerator=1,
                share_denominator=7 if m == 1 else 1, price_per_hour=Decimal("3.1700"), started_at=start,
                ended_at=start + timedelta(days=3 + m, minutes=n), released_at=start + timedelta(days=3 + m),
            )  # fmt: skip
    holder, team = people["holders"][0]
    StorageHold.objects.create(
        team=team, user=holder, what="home of a researcher", size_gb=120, price_per_gb_month=Decimal("0.1000"),
        started_at=BASE, ended_at=BASE + timedelta(days=9),
    )  # fmt: skip


def test_the_spend_page_and_the_api_group_by_project(people, admin_user, client_for):
    _clear()
    researcher, team = people["holders"][0]
    gpu = people["gpus"][0]
    sandbox = make_sandbox(owner=researcher, team=team, gpu_type=gpu.gpu_type, project="llm-eval")
    Allocation.objects.create(
        gpu=gpu, workload=sandbox, team=team, user=researcher, gpu_type=gpu.gpu_type, share_numerator=1,
        share_denominator=1, price_per_hour=Decimal("2.0000"), started_at=BASE, ended_at=BASE + timedelta(hours=3),
        released_at=BASE + timedelta(hours=3),
    )  # fmt: skip
    window = {"start": BASE.isoformat(), "end": (BASE + timedelta(days=1)).isoformat()}

    body = client_for(admin_user).get("/api/v1/spend", {"group_by": "project", **window}).json()

    rows = body["rows"] if "rows" in body else body["results"]
    assert [(r["key"], r["cost"]) for r in rows] == [("llm-eval", "6.00")]
    web = signed_in(admin_user).get(
        "/spend/", {"group_by": "project", "start": "2026-03-01", "end": "2026-03-01"}
    )
    assert web.status_code == 200 and "llm-eval" in web.content.decode()
    assert '<option value="project" selected>Project</option>' in web.content.decode()
