"""On PostgreSQL, a queue drain running beside a new request or an approval never deadlocks:
every path takes its locks in one order (workload, approval, team without key lock, GPU type).
Both tests deadlocked before that order was made one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from django.db import connection
from django.utils import timezone

from portal.approvals.services import approval_decide
from portal.fleet import services as fleet_services
from portal.fleet.models import Allocation
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Approval, Workload
from portal.workloads.services import workload_queue_drain

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def queued_request(user, name: str) -> Workload:
    """A one-GPU request waiting in the queue (placed, then its placement undone)."""
    sandbox = sandbox_request(user=user, team="vision", name=name, gpu_type="h100-80gb", count=1, ttl_hours=1)
    Allocation.objects.filter(workload=sandbox).delete()
    Workload.objects.filter(pk=sandbox.pk).update(state="queued", queued_at=timezone.now())
    return sandbox


def race_with_drain(monkeypatch, other: Callable[[], object]) -> dict[str, object]:
    """Run the drain, holding its GPU type lock for a second, while `other` runs."""
    monkeypatch.setattr("portal.workloads.services.lifecycle.enqueue", lambda *a, **k: None)
    real_snapshot = fleet_services.gpu_snapshot
    holding = threading.Event()

    def slow_snapshot(**kwargs):
        if threading.current_thread().name == "drain":
            holding.set()
            time.sleep(1.0)
        return real_snapshot(**kwargs)

    monkeypatch.setattr(fleet_services, "gpu_snapshot", slow_snapshot)
    outcome: dict[str, object] = {}

    def run(name: str, action: Callable[[], object], wait: bool) -> None:
        try:
            if wait:
                holding.wait(5)
            outcome[name] = action()
        except Exception as error:  # reported in the assertions
            outcome[name] = error
        finally:
            connection.close()

    threads = [
        threading.Thread(target=run, args=("drain", workload_queue_drain, False), name="drain"),
        threading.Thread(target=run, args=("other", other, True), name="other"),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return outcome


def test_a_drain_and_a_new_request_of_the_same_team_and_type_both_go_through(monkeypatch, fleet, researcher):
    queued = queued_request(researcher, "waiting")
    outcome = race_with_drain(
        monkeypatch,
        lambda: sandbox_request(
            user=researcher, team="vision", name="new", gpu_type="h100-80gb", count=1, ttl_hours=1
        ),
    )
    assert outcome["drain"] == [queued.pk]
    assert isinstance(outcome["other"], Workload)


def test_a_drain_and_an_approval_both_go_through(monkeypatch, fleet, researcher, lead):
    queued = queued_request(researcher, "waiting")
    big = sandbox_request(
        user=researcher, team="vision", name="big", gpu_type="h100-80gb", count=2, ttl_hours=1
    )
    approval = Approval.objects.get(workload=big)
    outcome = race_with_drain(
        monkeypatch, lambda: approval_decide(user=lead, approval_id=approval.pk, approve=True)
    )
    assert outcome["drain"] == [queued.pk]
    assert isinstance(outcome["other"], Approval)
