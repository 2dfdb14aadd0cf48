"""Quota holds when many requests arrive at once (PostgreSQL row locks)."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from django.db import connection

from portal.core.errors import QuotaExceeded
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Workload

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_twenty_simultaneous_requests_never_exceed_the_team_quota(fleet, team, researcher):
    team.quota_gpus = Decimal(4)
    team.save()
    barrier = threading.Barrier(20)
    outcomes: list[str] = []
    lock = threading.Lock()

    def request(number: int) -> None:
        try:
            barrier.wait()
            sandbox_request(
                user=researcher,
                team="vision",
                name=f"race-{number}",
                gpu_type="h100-80gb",
                count=1,
                ttl_hours=1,
            )
            result = "created"
        except QuotaExceeded:
            result = "quota_exceeded"
        except Exception as error:  # reported in the assertion below
            result = f"error: {error!r}"
        finally:
            connection.close()
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=request, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(set(outcomes)) == ["created", "quota_exceeded"], outcomes
    assert outcomes.count("created") == 4
    assert Workload.objects.filter(team=team).count() == 4
