"""On-demand MIG layouts on a "dynamic" cluster, cut slice by slice: a new slice waits for the
node's layout change; an empty GPU's layout is freed again; a failed change puts the request back
in the queue. (tests/workers/test_mig_layouts_mode.py has the "layouts" clusters.)"""

from __future__ import annotations

import pytest

from portal.fleet.models import Allocation, MigSlice, SimulatedObject
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Workload, WorkloadKind, WorkloadState
from portal.workloads.services import workload_terminate
from workers.drivers.factory import get_driver
from workers.reconcile import mig as mig_module
from workers.reconcile import workloads as reconcile_module
from workers.reconcile.workloads import reconcile_workload

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("dynamic_mig")]
S = WorkloadState


class FailingMig:
    """A cluster whose MIG manager reports every layout change failed."""

    def apply_mig_layout(self, node, layout, retry=False):
        pass

    def mig_layout_state(self, node, layout=None):
        return "failed"


def layout_of(node: str) -> dict:
    return SimulatedObject.objects.get(kind="MigLayout", name=node).body["layout"]


def test_new_slice_is_cut_through_a_layout_change_then_runs(run_jobs, fleet, researcher, slice_request):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    sandbox.refresh_from_db()
    assert sandbox.state == S.RUNNING
    mig_slice = Allocation.objects.get(workload=sandbox).mig_slice
    assert mig_slice.state == MigSlice.State.READY
    assert layout_of("gpu-h100-b")[str(mig_slice.gpu.index)] == [["1g.10gb", mig_slice.start]]


def test_sandbox_waits_while_the_layout_changes_and_the_gpu_takes_nothing_else(
    settings, run_jobs, fleet, researcher, slice_request
):
    settings.PORTAL_SIM_MIG_RECONFIG_SECONDS = 600
    get_driver.cache_clear()
    first = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    first.refresh_from_db()
    assert first.state == S.PROVISIONING
    assert first.message.startswith("Re-partitioning gpu-h100-b GPU")
    assert "for a 1g.10gb slice (MIG reconfiguration), 0 s so far" in first.message
    second = run_jobs(lambda: sandbox_request(user=researcher, **{**slice_request, "name": "second"}))
    first_gpu = Allocation.objects.get(workload=first).gpu_id
    assert Allocation.objects.get(workload=second).gpu_id != first_gpu


def test_failed_layout_change_requeues_the_request_unbilled(monkeypatch, fleet, researcher, slice_request):
    sandbox = sandbox_request(user=researcher, **slice_request)

    monkeypatch.setattr(reconcile_module, "driver_for", lambda cluster: FailingMig())
    monkeypatch.setattr("workers.reconcile.mig.driver_for", lambda cluster: FailingMig())
    reconcile_workload(sandbox.pk)
    sandbox.refresh_from_db()
    assert sandbox.state == S.QUEUED and sandbox.next_attempt_at is None
    assert "MIG layout change on gpu-h100-b failed" in sandbox.message
    allocation = Allocation.objects.get(workload=sandbox)
    assert allocation.ended_at == allocation.started_at and allocation.released_at is not None
    assert not MigSlice.objects.exists()


def test_layout_of_a_gpu_left_empty_is_freed(run_jobs, fleet, researcher, slice_request):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    index = str(Allocation.objects.get(workload=sandbox).gpu.index)
    run_jobs(lambda: workload_terminate(user=researcher, workload_id=sandbox.pk, kind=WorkloadKind.SANDBOX))
    assert Workload.objects.get(pk=sandbox.pk).state == S.TERMINATED
    assert not MigSlice.objects.exists()
    assert layout_of("gpu-h100-b")[index] == []


def test_slices_still_in_use_keep_the_gpus_layout(run_jobs, fleet, researcher, slice_request):
    first = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    second = run_jobs(lambda: sandbox_request(user=researcher, **{**slice_request, "name": "second"}))
    assert Allocation.objects.get(workload=first).gpu_id == Allocation.objects.get(workload=second).gpu_id
    run_jobs(lambda: workload_terminate(user=researcher, workload_id=first.pk, kind=WorkloadKind.SANDBOX))
    assert MigSlice.objects.count() == 2  # the freed slice stays cut for the next 1g.10gb


def test_a_failed_layout_change_drops_the_slice_being_cut_even_beside_a_slice_in_use(
    monkeypatch, run_jobs, fleet, researcher, slice_request
):
    first = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    gpu = Allocation.objects.get(workload=first).gpu
    second = sandbox_request(
        user=researcher, **{**slice_request, "name": "second"}
    )  # cut beside it, not started
    assert Allocation.objects.get(workload=second).gpu == gpu

    monkeypatch.setattr(reconcile_module, "driver_for", lambda cluster: FailingMig())
    monkeypatch.setattr(mig_module, "driver_for", lambda cluster: FailingMig())
    reconcile_workload(second.pk)
    assert Workload.objects.get(pk=second.pk).state == S.QUEUED
    assert list(MigSlice.objects.filter(gpu=gpu).values_list("state", flat=True)) == [MigSlice.State.READY]
