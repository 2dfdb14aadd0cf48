"""The estimated wait of a queued request: from its place in the queue and the expiries of what
holds its GPU pool."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.utils import timezone

from portal.workloads.models import WorkloadState
from portal.workloads.queue_wait import QueueWait, estimated_wait, estimated_waits
from tests.factories import make_node
from tests.rows import HTMX, make_sandbox

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(microsecond=0)


@pytest.fixture
def two_gpus(h100):
    """A node of two whole H100s, nothing else of the type."""
    return make_node(name="gpu-pair", gpu_type=h100, gpus=2, mig=False)


def running(owner, team, h100, *, ends_in: timedelta | None, gpus: int = 1):
    return make_sandbox(
        owner=owner,
        team=team,
        gpu_type=h100,
        state=WorkloadState.RUNNING,
        gpu_count=gpus,
        expires_at=None if ends_in is None else NOW + ends_in,
        ttl_hours=None,
    )


def queued(owner, team, h100, *, minutes_ago: int, gpus: int = 1, hours: str = "1", **fields):
    return make_sandbox(
        owner=owner,
        team=team,
        gpu_type=h100,
        state=WorkloadState.QUEUED,
        gpu_count=gpus,
        expires_at=None,
        ttl_hours=Decimal(hours),
        queued_at=NOW - timedelta(minutes=minutes_ago),
        **fields,
    )


def test_a_request_that_fits_now_waits_nothing(two_gpus, h100, researcher, team):
    running(researcher, team, h100, ends_in=timedelta(hours=1))
    waiting = queued(researcher, team, h100, minutes_ago=1)
    assert estimated_wait(waiting, now=NOW) == QueueWait(seconds=0, start_at=NOW)


def test_capacity_freed_by_an_expiry_at_t_starts_it_at_t(two_gpus, h100, researcher, team):
    running(researcher, team, h100, ends_in=timedelta(minutes=30))
    running(researcher, team, h100, ends_in=timedelta(minutes=90))
    waiting = queued(researcher, team, h100, minutes_ago=1)
    wait = estimated_wait(waiting, now=NOW)
    assert wait.seconds == 30 * 60
    assert wait.start_at == NOW + timedelta(minutes=30)
    assert wait.label == "about 30 minutes"


def test_one_ahead_takes_the_first_expiry_and_it_waits_for_the_next(two_gpus, h100, researcher, team):
    running(researcher, team, h100, ends_in=timedelta(minutes=30))
    running(researcher, team, h100, ends_in=timedelta(minutes=90))
    ahead = queued(researcher, team, h100, minutes_ago=10)
    behind = queued(researcher, team, h100, minutes_ago=5)
    waits = estimated_waits([ahead, behind], now=NOW)
    assert waits[ahead.pk].seconds == 30 * 60
    assert waits[behind.pk].seconds == 90 * 60


def test_the_one_ahead_frees_its_gpus_when_its_own_lifetime_ends(two_gpus, h100, researcher, team):
    running(researcher, team, h100, ends_in=timedelta(minutes=30))
    running(researcher, team, h100, ends_in=None)  # holds one GPU with no end
    queued(researcher, team, h100, minutes_ago=10, hours="2")  # ahead of it
    behind = queued(researcher, team, h100, minutes_ago=5)
    # ahead starts at +30 min and runs 2 h: the one behind starts at +150 min
    assert estimated_wait(behind, now=NOW).seconds == 150 * 60


def test_a_bigger_request_waits_for_enough_expiries(two_gpus, h100, researcher, team):
    running(researcher, team, h100, ends_in=timedelta(minutes=20))
    running(researcher, team, h100, ends_in=timedelta(minutes=45))
    waiting = queued(researcher, team, h100, minutes_ago=1, gpus=2)
    assert estimated_wait(waiting, now=NOW).seconds == 45 * 60


def test_running_work_without_expiry_makes_the_wait_unknown(two_gpus, h100, researcher, team):
    running(researcher, team, h100, ends_in=None, gpus=2)
    waiting = queued(researcher, team, h100, minutes_ago=1)
    wait = estimated_wait(waiting, now=NOW)
    assert wait == QueueWait(seconds=None, start_at=None)
    assert wait.label == "unknown"


def test_a_request_bigger_than_the_pool_has_no_estimate(two_gpus, h100, researcher, team):
    waiting = queued(researcher, team, h100, minutes_ago=1, gpus=4)
    assert estimated_wait(waiting, now=NOW).seconds is None


def test_a_scheduled_start_waits_at_least_until_its_start(two_gpus, h100, researcher, team):
    waiting = queued(researcher, team, h100, minutes_ago=1, start_at=NOW + timedelta(hours=3))
    assert estimated_wait(waiting, now=NOW).seconds == 3 * 3600


def test_mig_slices_queue_apart_from_whole_gpus(fleet, h100, researcher, team):
    for _ in range(8):
        running(researcher, team, h100, ends_in=None)  # the whole GPUs, all held for good
    waiting = queued(researcher, team, h100, minutes_ago=1, gpus=1, mig_profile="1g.10gb")
    assert estimated_wait(waiting, now=NOW).seconds == 0


def test_a_workload_not_queued_has_no_estimate(two_gpus, h100, researcher, team):
    assert estimated_wait(running(researcher, team, h100, ends_in=None), now=NOW) is None


def test_the_estimate_takes_a_bounded_number_of_queries(
    two_gpus, h100, researcher, team, django_assert_max_num_queries
):
    running(researcher, team, h100, ends_in=timedelta(minutes=30), gpus=2)
    waiting = [queued(researcher, team, h100, minutes_ago=60 - i) for i in range(20)]
    with django_assert_max_num_queries(4):
        waits = estimated_waits(waiting, now=NOW)
    assert len(waits) == 20


def test_the_sandbox_page_and_api_show_the_estimate(client, alice, two_gpus, h100, researcher, team):
    running(researcher, team, h100, ends_in=timedelta(minutes=40), gpus=2)
    waiting = queued(researcher, team, h100, minutes_ago=1)
    client.force_login(researcher)
    # The rows are made relative to NOW (taken when the module was imported): read them at NOW.
    with time_machine.travel(NOW, tick=False):
        page = client.get(f"/sandboxes/{waiting.number}/").content.decode()
        listed = client.get("/", HTMX).content.decode()
        body = alice.get(f"/api/v1/sandboxes/{waiting.number}").json()
    assert "Estimated start" in page and "about 40 minutes" in page
    assert "about 40 minutes" in listed
    assert body["estimated_wait_seconds"] == 40 * 60
    assert body["estimated_start_at"] is not None
