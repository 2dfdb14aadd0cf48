"""Job state lives in rows, not messages: a node's MIG layout job is kept on the Node row, the
periodic schedule re-drives whatever is due, and tasks carry ids only. So a lost message still
settles, a repeated one changes nothing, and a failing node backs off."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from celery import current_app
from django.utils import timezone

from portal.fleet.models import NODE_MIG_JOB_FIELDS, Allocation, MigSlice, Node, SimulatedObject
from portal.fleet.services import mig_layout_changed
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Workload, WorkloadKind, WorkloadState
from portal.workloads.services import workload_terminate
from workers import celery as celery_module
from workers.drivers.base import DriverError
from workers.drivers.factory import get_driver
from workers.reconcile import mig as mig_module
from workers.reconcile.clusters import cluster_config
from workers.reconcile.mig import mig_layouts_due, reconcile_node_mig
from workers.reconcile.workloads import reconcile_workload
from workers.tasks import workloads as workload_tasks
from workers.tasks.fleet import apply_mig_layout, apply_mig_layouts_due

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("dynamic_mig")]
START = datetime(2030, 1, 7, 9, 0, tzinfo=UTC)
MIG_FIELDS = NODE_MIG_JOB_FIELDS


def mig_node() -> Node:
    return Node.objects.get(name="gpu-h100-b")


def job_state() -> tuple:
    return Node.objects.filter(name="gpu-h100-b").values_list(*MIG_FIELDS).get()


def layout_request() -> SimulatedObject | None:
    return SimulatedObject.objects.filter(kind="MigLayout", name="gpu-h100-b").first()


def at(moment: datetime):
    return time_machine.travel(moment, tick=False)


def lost_slice_request(researcher, slice_request) -> Workload:
    """A slice request whose on-commit messages are never delivered (the test's transaction
    never commits), like a broker that dropped them."""
    with at(START):
        return sandbox_request(user=researcher, **slice_request)


class CountingDriver:
    """Wraps the simulated driver, counting what the MIG reconciler asks of the cluster."""

    def __init__(self, inner, *, state: str | None = None, error: DriverError | None = None):
        self.inner, self.state, self.error = inner, state, error
        self.applied: list[dict] = []

    def apply_mig_layout(self, node, layout, retry=False):
        self.applied.append(layout)
        if self.error is not None:
            raise self.error
        self.inner.apply_mig_layout(node, layout)

    def mig_layout_state(self, node, layout=None):
        return self.state or self.inner.mig_layout_state(node, layout)


@pytest.fixture
def counting(monkeypatch):
    """Install a CountingDriver for the MIG reconciler; returns a function to configure it."""

    def install(**kwargs) -> CountingDriver:
        driver = CountingDriver(get_driver.__wrapped__(_sim_config()), **kwargs)
        monkeypatch.setattr(mig_module, "driver_for", lambda cluster: driver)
        return driver

    return install


def _sim_config():

    return cluster_config(mig_node().cluster)


def test_a_lost_layout_message_is_re_driven_by_the_beat_until_the_node_settles(
    settings, fleet, researcher, slice_request
):
    settings.PORTAL_SIM_MIG_RECONFIG_SECONDS = 60
    get_driver.cache_clear()
    sandbox = lost_slice_request(researcher, slice_request)
    mig_slice = Allocation.objects.get(workload=sandbox).mig_slice
    node = mig_node()
    # The portal recorded the intent only; what the cluster says is the workers' to write.
    assert (node.mig_layout_wanted, node.mig_layout_applied, node.mig_config_state) == (1, 0, "")
    assert layout_request() is None and mig_slice.state == MigSlice.State.CREATING

    with at(START):
        apply_mig_layouts_due.delay()  # the beat's periodic job, run eagerly
    node = mig_node()
    assert layout_request().body["layout"][str(mig_slice.gpu.index)] == [["1g.10gb", mig_slice.start]]
    assert node.mig_config_state == "pending" and node.mig_layout_applied == 0
    assert node.mig_layout_next_attempt_at == START + timedelta(seconds=mig_module.RECHECK_SECONDS)
    assert mig_layouts_due(now=START + timedelta(seconds=1)) == []  # not before its next check
    assert mig_layouts_due(now=START + timedelta(seconds=2)) == [node.pk]

    with at(START + timedelta(seconds=61)):  # the MIG manager has finished
        apply_mig_layouts_due.delay()
        node = mig_node()
        assert (node.mig_layout_applied, node.mig_config_state, node.mig_layout_attempts) == (1, "success", 0)
        assert node.mig_layout_next_attempt_at is None and node.mig_layout_lease_until is None
        assert MigSlice.objects.get(pk=mig_slice.pk).state == MigSlice.State.READY
        assert mig_layouts_due(now=START + timedelta(days=1)) == []
        reconcile_workload(sandbox.pk)  # its own lost message: the periodic reconcile takes it on
    assert Workload.objects.get(pk=sandbox.pk).state == WorkloadState.RUNNING


def test_a_duplicated_layout_message_changes_nothing(run_jobs, fleet, researcher, slice_request, counting):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    assert Workload.objects.get(pk=sandbox.pk).state == WorkloadState.RUNNING
    before = (job_state(), layout_request().body, list(MigSlice.objects.values_list("pk", "state")))
    assert before[0][1:3] == (1, 1)  # wanted == applied: settled

    driver = counting()
    apply_mig_layout.delay(mig_node().pk)
    apply_mig_layout.delay(mig_node().pk)

    assert driver.applied == []  # a settled node is not even asked of the cluster again
    assert (job_state(), layout_request().body, list(MigSlice.objects.values_list("pk", "state"))) == before


def test_a_repeated_message_during_the_change_asks_the_cluster_for_the_same_layout_only(
    settings, fleet, researcher, slice_request
):
    settings.PORTAL_SIM_MIG_RECONFIG_SECONDS = 60
    get_driver.cache_clear()
    lost_slice_request(researcher, slice_request)
    node_id = mig_node().pk
    with at(START):
        apply_mig_layout.delay(node_id)
    asked = layout_request().body
    with at(START + timedelta(seconds=5)):
        apply_mig_layout.delay(node_id)  # the same message again, while the MIG manager works
    # The reconfiguration clock is not restarted, and the slice is not settled early.
    assert layout_request().body == asked
    assert mig_node().mig_layout_applied == 0
    assert MigSlice.objects.get().state == MigSlice.State.CREATING


def test_a_message_for_a_node_another_worker_holds_does_nothing(fleet, researcher, slice_request, counting):
    lost_slice_request(researcher, slice_request)
    Node.objects.filter(name="gpu-h100-b").update(mig_layout_lease_until=START + timedelta(seconds=30))
    driver = counting()
    with at(START):
        assert reconcile_node_mig(mig_node().pk) == "pending"
    assert driver.applied == []
    assert mig_node().mig_layout_lease_until == START + timedelta(seconds=30)  # the holder's lease stands


def test_a_failing_layout_backs_off_on_the_row_and_the_beat_waits_for_it(
    fleet, researcher, slice_request, counting
):
    lost_slice_request(researcher, slice_request)
    driver = counting(state="failed")
    with at(START):
        apply_mig_layouts_due.delay()
    node = mig_node()
    assert (node.mig_config_state, node.mig_layout_attempts) == ("failed", 1)
    assert node.mig_layout_next_attempt_at == START + timedelta(seconds=2)
    assert "could not apply the layout" in node.mig_layout_last_error

    with at(START + timedelta(seconds=1)):
        apply_mig_layouts_due.delay()
    assert len(driver.applied) == 1  # backing off: not asked again yet

    with at(START + timedelta(seconds=2)):
        apply_mig_layouts_due.delay()
    node = mig_node()
    assert len(driver.applied) == 2 and node.mig_layout_attempts == 2
    assert node.mig_layout_next_attempt_at == START + timedelta(seconds=2 + 4)
    assert node.mig_layout_applied == 0 and MigSlice.objects.get().state == MigSlice.State.CREATING


def test_a_driver_error_is_recorded_on_the_node_and_retried_by_the_beat(
    fleet, researcher, slice_request, counting
):
    lost_slice_request(researcher, slice_request)
    counting(error=DriverError("the Kubernetes API timed out", retryable=True))
    with at(START):
        apply_mig_layouts_due.delay()  # the task does not fail: the row says what went wrong
    node = mig_node()
    assert node.mig_layout_last_error == "the Kubernetes API timed out"
    assert node.mig_layout_attempts == 1 and node.mig_layout_lease_until is None
    assert mig_layouts_due(now=START + timedelta(seconds=2)) == [node.pk]

    counting()  # the API answers again
    with at(START + timedelta(seconds=2)):
        apply_mig_layouts_due.delay()
    node = mig_node()
    assert (node.mig_layout_applied, node.mig_layout_attempts, node.mig_layout_last_error) == (1, 0, "")


def test_a_layout_changed_while_it_was_applied_is_not_settled_as_the_old_one(
    fleet, researcher, slice_request, counting
):
    sandbox = lost_slice_request(researcher, slice_request)
    node_id = mig_node().pk
    driver = counting()

    def state_after_a_concurrent_change(node, layout=None):
        mig_layout_changed(node_ids=[node_id])  # e.g. another slice cut on the node meanwhile
        driver.mig_layout_state = driver.inner.mig_layout_state
        return "success"

    driver.mig_layout_state = state_after_a_concurrent_change
    with at(START):
        assert reconcile_node_mig(node_id) == "pending"
    node = mig_node()
    assert (node.mig_layout_wanted, node.mig_layout_applied) == (2, 0)
    assert Allocation.objects.get(workload=sandbox).mig_slice.state == MigSlice.State.CREATING
    assert mig_layouts_due(now=START) == [node_id]  # checked again at once, for the newer layout

    with at(START):
        assert reconcile_node_mig(node_id) == "success"
    assert mig_node().mig_layout_applied == 2
    assert Allocation.objects.get(workload=sandbox).mig_slice.state == MigSlice.State.READY


def test_freeing_a_layout_hands_it_to_the_nodes_job_even_when_its_message_is_lost(
    run_jobs, fleet, researcher, slice_request
):

    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    cut = Allocation.objects.get(workload=sandbox).mig_slice
    index = str(cut.gpu.index)
    workload_terminate(
        user=researcher, workload_id=sandbox.pk, kind=WorkloadKind.SANDBOX
    )  # its jobs are lost
    reconcile_workload(sandbox.pk)  # the periodic reconcile ends it; the freed layout's message is lost
    assert not MigSlice.objects.exists()
    assert layout_request().body["layout"][index] == [["1g.10gb", cut.start]]  # the cluster not told yet
    node = mig_node()
    assert node.mig_layout_wanted > node.mig_layout_applied

    apply_mig_layouts_due.delay()
    assert layout_request().body["layout"][index] == []
    node = mig_node()
    assert node.mig_layout_wanted == node.mig_layout_applied


def test_the_beat_re_drives_mig_layouts_and_every_task_takes_ids_only():
    schedule = celery_module._schedule()
    assert schedule["apply-mig-layouts"]["task"] == "fleet.apply_mig_layouts_due"
    ours = {
        name: task for name, task in current_app.tasks.items() if name.split(".")[0] in ("fleet", "workloads")
    }
    assert "fleet.apply_mig_layout" in ours and workload_tasks.reconcile.name in ours
    for name, task in ours.items():
        parameters = inspect.signature(task.run).parameters.values()
        assert all(p.name.endswith("_id") and p.annotation in (int, "int") for p in parameters), name


def test_a_pass_that_outran_its_lease_leaves_the_next_workers_lease_alone(fleet, researcher, monkeypatch):
    node = Node.objects.filter(gpus__mig_enabled=True).first()
    mig_layout_changed(node_ids=[node.pk])
    later = timezone.now() + timedelta(minutes=5)
    real_apply = get_driver(cluster_config(node.cluster)).apply_mig_layout

    def slow_apply(name, layout, retry=False):
        # This pass stalls past its lease; another worker claims the node meanwhile.
        Node.objects.filter(pk=node.pk).update(mig_layout_lease_until=later)
        return real_apply(name, layout)

    monkeypatch.setattr(get_driver(cluster_config(node.cluster)), "apply_mig_layout", slow_apply)
    reconcile_node_mig(node.pk)

    assert Node.objects.get(pk=node.pk).mig_layout_lease_until == later


def test_a_step_holds_its_row_for_the_lease_the_operator_set(
    fleet, researcher, slice_request, monkeypatch, settings
):
    """PORTAL_LEASE_SECONDS: how long a worker that dies mid-step keeps others off the row, for a
    workload and for a node's MIG layout alike."""
    settings.PORTAL_LEASE_SECONDS = 20
    lost_slice_request(researcher, slice_request)
    with at(START):
        whole = sandbox_request(user=researcher, **{**slice_request, "name": "whole", "mig_profile": None})
    node = mig_node()
    driver = get_driver(cluster_config(node.cluster))
    real_apply_workload, real_apply_layout = driver.apply_workload, driver.apply_mig_layout
    seen = {}

    def apply_workload(spec):
        seen["workload"] = Workload.objects.get(pk=whole.pk).lease_until
        return real_apply_workload(spec)

    def apply_mig_layout(name, layout, retry=False):
        seen["node"] = Node.objects.get(pk=node.pk).mig_layout_lease_until
        return real_apply_layout(name, layout)

    monkeypatch.setattr(driver, "apply_workload", apply_workload)
    monkeypatch.setattr(driver, "apply_mig_layout", apply_mig_layout)
    with at(START):
        reconcile_node_mig(node.pk)
        reconcile_workload(whole.pk)
    assert seen == {"node": START + timedelta(seconds=20), "workload": START + timedelta(seconds=20)}
    assert Workload.objects.get(pk=whole.pk).lease_until is None  # given back when the step ended
