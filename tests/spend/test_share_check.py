"""A hold whose share is not counted exactly (its denominator does not divide cost.SHARES_BASE) is
refused loudly by every report that costs it from the holds, the workload report included (on
PostgreSQL it costs its edges inside its ranking statement), never summed with a rounding."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from portal.fleet.models import Gpu
from portal.spend import selectors
from tests.rows import make_hold, make_sandbox

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 9, 20, 12, 30, tzinfo=UTC)
HOUR = timedelta(hours=1)


@pytest.mark.parametrize("group_by", ["workload", "team", "gpu_type"])
def test_a_share_not_counted_exactly_is_refused_with_the_fix(fleet, team, researcher, admin_user, group_by):
    gpu = Gpu.objects.filter(mig_enabled=False).order_by("index").first()
    box = make_sandbox(owner=researcher, team=team, gpu_type=gpu.gpu_type, expires_at=NOW + HOUR)
    make_hold(
        gpu=gpu,
        user=researcher,
        team=team,
        workload=box,
        started_at=NOW - 2 * HOUR,
        ended_at=None,
        share=(1, 17),
    )
    with pytest.raises(ValueError, match="SHARES_BASE"):
        selectors.spend_grouped(user=admin_user, group_by=group_by, start=NOW - 3 * HOUR, end=NOW, now=NOW)
