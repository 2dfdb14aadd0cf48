"""The database notes every hold whose billed end may have moved (an end set or changed, a deletion,
a workload's expiry changed), whoever writes it; reports check only those against what was rolled,
and the workers delete the notes they have applied."""

from __future__ import annotations

import importlib
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db import connection

from portal.fleet.models import Allocation, Gpu, StorageHold
from portal.spend import periods, selectors, services
from portal.spend.models import SpendHoldChange, SpendOpenHold
from portal.spend.services import spend_changes_apply, spend_rollup_due
from tests.rows import make_hold, make_sandbox
from tests.spend import reference

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 3, 20, 13, 30, tzinfo=UTC)
TRIGGERS = {
    "spend_allocation_end_changed",
    "spend_allocation_deleted",
    "spend_storage_end_changed",
    "spend_storage_deleted",
    "spend_expiry_changed",
}


def day(n: int, hour: int = 0) -> datetime:
    return datetime(2026, 3, n, hour, tzinfo=UTC)


@pytest.fixture
def gpus(fleet) -> list[Gpu]:
    return list(Gpu.objects.filter(mig_enabled=False).order_by("index"))


def noted() -> list[tuple]:
    return sorted(
        SpendHoldChange.objects.values_list("allocation_id", "storage_hold_id", "workload_id"),
        key=repr,
    )


def storage(user, team, **times) -> StorageHold:
    return StorageHold.objects.create(
        user=user, team=team, what="home", size_gb=73, price_per_gb_month=Decimal("0.1"), **times
    )


def test_the_triggers_are_there():
    """SQLite drops a table's triggers when Django rebuilds it to alter it: a migration that alters
    one of these tables there must create them again (see spend migration 0011)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
        else:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        found = {name for (name,) in cursor.fetchall()}
    assert found >= TRIGGERS


def test_ends_deletions_and_expiries_are_noted_only_when_they_change(gpus, team, researcher):
    sandbox = make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type, expires_at=day(15))
    hold = make_hold(
        gpu=gpus[0], user=researcher, team=team, workload=sandbox, started_at=day(3), ended_at=None
    )
    other = make_hold(gpu=gpus[1], user=researcher, team=team, started_at=day(3), ended_at=None)
    home = storage(researcher, team, started_at=day(2))
    assert noted() == []  # inserted holds are the watermark's
    Allocation.objects.filter(pk=hold.pk).update(released_at=day(4))  # not what it costs
    Allocation.objects.filter(pk=hold.pk).update(ended_at=None)  # the same end
    sandbox.save(update_fields=["expires_at"])  # the same expiry
    assert noted() == []
    Allocation.objects.filter(pk=hold.pk).update(ended_at=day(5))
    sandbox.expires_at = day(16)
    sandbox.save(update_fields=["expires_at"])
    StorageHold.objects.filter(pk=home.pk).update(ended_at=day(6))
    other_id = other.pk
    other.delete()
    assert noted() == sorted(
        [(hold.pk, None, None), (None, None, sandbox.pk), (None, home.pk, None), (other_id, None, None)],
        key=repr,
    )


def test_a_storage_hold_ended_in_the_past_counts_to_its_end_at_once(gpus, team, researcher, admin_user):
    home = storage(researcher, team, started_at=day(2))
    spend_rollup_due(now=NOW, days_per_run=100)
    assert SpendOpenHold.objects.filter(storage_hold=home).exists()
    before = selectors.team_month_spend(team=team, now=NOW)
    StorageHold.objects.filter(pk=home.pk).update(ended_at=day(6))  # ended, backdated
    after = selectors.team_month_spend(team=team, now=NOW)
    assert after == reference.team_month_spend(team=team, now=NOW) < before
    spend_rollup_due(now=NOW, days_per_run=100)
    assert selectors.team_month_spend(team=team, now=NOW) == after


def test_the_workers_delete_the_notes_they_applied_and_keep_those_noted_meanwhile(
    gpus, team, researcher, monkeypatch
):
    holds = [
        make_hold(gpu=gpu, user=researcher, team=team, started_at=day(10, 6), ended_at=None)
        for gpu in gpus[:3]
    ]
    spend_rollup_due(now=NOW, days_per_run=100)
    assert SpendOpenHold.objects.count() == 3
    assert periods.changes(now=NOW, before=NOW) == []  # open and unchanged: nothing to check
    Allocation.objects.filter(pk=holds[0].pk).update(ended_at=day(12, 18))
    found = periods.changes(now=NOW, before=NOW)
    assert [change.allocation_id for change in found] == [holds[0].pk]

    def changes_while_another_ends(**kwargs):
        # another hold ends after the workers read the notes, its transaction committing first
        Allocation.objects.filter(pk=holds[1].pk).update(ended_at=day(13))
        return periods.changes(**kwargs)

    monkeypatch.setattr(services, "changes", changes_while_another_ends)
    assert spend_changes_apply(now=NOW) > 0
    assert noted() == [(holds[1].pk, None, None)]  # seen and applied, but kept for the next run
    monkeypatch.undo()
    assert spend_changes_apply(now=NOW) == 0  # applied already: nothing more goes stale
    assert noted() == []
    assert not SpendOpenHold.objects.filter(allocation__in=holds[:2]).exists()
    assert SpendOpenHold.objects.filter(allocation=holds[2]).exists()


def test_upgrading_notes_every_open_hold_remembered_so_that_the_next_check_sees_each(gpus, team, researcher):
    """Changes made before the triggers existed went unnoted: the migration notes all open holds."""
    migration = importlib.import_module("portal.spend.migrations.0011_hold_changes")
    hold = make_hold(gpu=gpus[0], user=researcher, team=team, started_at=day(10, 6), ended_at=None)
    home = storage(researcher, team, started_at=day(2))
    spend_rollup_due(now=NOW, days_per_run=100)
    with connection.cursor() as cursor:  # ended in the past before the triggers were there
        cursor.execute("UPDATE fleet_allocation SET ended_at = %s WHERE id = %s", [day(12, 18), hold.pk])
        cursor.execute("DELETE FROM spend_spendholdchange")
        for statement in migration.NOTE_ALL_OPEN:
            cursor.execute(statement)
    assert noted() == sorted([(hold.pk, None, None), (None, home.pk, None)], key=repr)
    assert [change.allocation_id for change in periods.changes(now=NOW, before=NOW)] == [hold.pk]
