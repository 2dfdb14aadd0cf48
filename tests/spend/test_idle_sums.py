"""Idle time summed from the holds, exact: by device over a short stretch and hold by hold over a
long one (PostgreSQL picks by length; elsewhere the ORM counts hold by hold), against the
definition worked out here in fractions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest

from portal.fleet.models import Allocation, Gpu, GpuMinute, MigSlice
from portal.spend import holds
from portal.spend.cost import SHARES_BASE

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 10, 10, 0, tzinfo=UTC)
at = lambda minutes, seconds=0: T0 + timedelta(minutes=minutes, seconds=seconds)  # noqa: E731


def _minutes(gpu, mig_start, readings):
    """One reading a minute from T0: utilization percent, or None for a minute with no sample."""
    for n, utilization in enumerate(readings):
        samples = 0 if utilization is None else 2
        GpuMinute.objects.create(
            gpu=gpu, device=f"{gpu.uuid}/{mig_start}", mig_start=mig_start, minute=at(n),
            samples=2, utilization_sum=2 * (utilization or 0), utilization_samples=samples,
        )  # fmt: skip


def _reference(allocations, *, start, end, now):
    """Idle units by user: each idle minute's part within the hold's billed stretch, priced."""
    found = {}
    for a in allocations:
        a.refresh_from_db()
        low, high = max(a.started_at, start), min(a.ended_at or now, end)
        device = a.mig_slice.start if a.mig_slice_id else None
        for m in GpuMinute.objects.filter(gpu=a.gpu, mig_start=device, utilization_samples__gt=0):
            if m.utilization_sum / m.utilization_samples >= a.team.idle_threshold_percent:
                continue
            seconds = Fraction((min(m.minute + holds.MINUTE, high) - max(m.minute, low)).total_seconds())
            if seconds > 0:
                units = (
                    Fraction(a.price_per_hour)
                    * a.share_numerator
                    * seconds
                    * SHARES_BASE
                    / a.share_denominator
                )
                found[a.user_id] = found.get(a.user_id, 0) + units
    return found


@pytest.mark.parametrize("by_device_up_to", [timedelta(hours=4), timedelta(0)], ids=["by device", "by hold"])
def test_idle_time_over_a_stretch_is_exact_whichever_way_it_is_counted(
    fleet, h100, team, other_team, researcher, other_researcher, monkeypatch, by_device_up_to
):
    """Two teams with their own thresholds share a MIG GPU (a slice each, each with its own
    readings) and hold whole GPUs: over the whole stretch, starting and ending inside it at odd
    seconds, still open; minutes without samples and on other slices never count."""
    monkeypatch.setattr(holds, "BY_DEVICE_UP_TO", by_device_up_to)
    team.idle_threshold_percent, other_team.idle_threshold_percent = 5, 40
    team.save()
    other_team.save()
    whole = list(Gpu.objects.filter(node=fleet["whole"]).order_by("index")[:2])
    mig = Gpu.objects.filter(node=fleet["mig"]).order_by("index").first()
    slices = [
        MigSlice.objects.create(gpu=mig, profile="3g.40gb", start=s, size=4, compute_slices=3) for s in (0, 4)
    ]
    readings = [3, 1, None, 2, 50, 4, 35, 1, 0, 60, 4, 39, 41, 2, 3]
    _minutes(whole[0], None, readings)
    _minutes(whole[1], None, list(reversed(readings)))
    _minutes(mig, 0, readings)
    _minutes(mig, 4, [r if r is None else (r + 3) % 45 for r in readings])
    _minutes(mig, None, [0] * len(readings))  # the GPU as a whole: no slice holder's minutes

    def allocation(user, team, gpu, start, end=None, mig_slice=None, share=(1, 1), price="6.88"):
        return Allocation.objects.create(
            gpu=gpu, mig_slice=mig_slice, team=team, user=user, gpu_type=h100, price_per_hour=Decimal(price),
            share_numerator=share[0], share_denominator=share[1], started_at=start, ended_at=end, released_at=end,
        )  # fmt: skip

    made = [
        allocation(researcher, team, whole[0], at(-30), at(60)),  # over the whole stretch
        allocation(other_researcher, other_team, whole[1], at(3, 17), at(9, 41), price="2.45"),  # inside it
        allocation(other_researcher, other_team, whole[1], at(10, 5)),  # open, into "now"
        allocation(researcher, team, mig, at(-5), at(6, 30), mig_slice=slices[0], share=(3, 7)),
        allocation(other_researcher, other_team, mig, at(1, 59), mig_slice=slices[1], share=(3, 7)),
    ]
    start, end, now = at(1, 30), at(13, 45), at(12, 10)
    found = holds.spend_by_key(start=start, end=end, now=now, keys=("user",), storage=False)
    expected = _reference(made, start=start, end=end, now=now)
    assert set(expected) == {researcher.pk, other_researcher.pk}
    assert {user: Fraction(found[(user,)].idle_cost) for user in expected} == expected
    assert all(0 < found[(user,)].idle_cost < found[(user,)].cost for user in expected)
    # one team's holds alone (counted hold by hold, whatever the length): the same figure
    mine = holds.spend_by_key(
        start=start,
        end=end,
        now=now,
        keys=("user",),
        storage=False,
        scope=holds.HoldScope(team_ids=frozenset({team.pk})),
    )
    assert {user: Fraction(amount.idle_cost) for (user,), amount in mine.items()} == {
        researcher.pk: expected[researcher.pk]
    }
