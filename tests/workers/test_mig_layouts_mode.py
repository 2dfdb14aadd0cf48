"""MIG on a "layouts" cluster (the GPU Operator's MIG manager, the default), through the portal's
services and the simulated cluster: a GPU is re-partitioned whole, only while it holds nothing,
into a layout shaped by demand; later requests take its free slices without a layout change;
released slices stay cut."""

from __future__ import annotations

import pytest
from django.utils import timezone

from portal.fleet.models import Allocation, MigSlice, Node
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import WorkloadKind, WorkloadState
from portal.workloads.services import workload_queue_drain, workload_requeue, workload_terminate
from tests.rows import make_sandbox

pytestmark = pytest.mark.django_db
S = WorkloadState


def wanted_version() -> int:
    return Node.objects.get(name="gpu-h100-b").mig_layout_wanted


def test_the_first_slice_re_partitions_a_gpu_and_the_next_takes_a_free_one(
    run_jobs, fleet, researcher, slice_request
):
    first = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    gpu = Allocation.objects.get(workload=first).gpu
    assert sorted(gpu.mig_slices.values_list("profile", flat=True)) == ["1g.10gb"] * 7
    assert first.placement_reason.startswith("no free 1g.10gb slice; re-partitions idle gpu-h100-b/")
    version = wanted_version()

    second = run_jobs(lambda: sandbox_request(user=researcher, **{**slice_request, "name": "second"}))
    second.refresh_from_db()
    assert second.state == S.RUNNING
    assert Allocation.objects.get(workload=second).gpu == gpu
    assert wanted_version() == version  # a free slice: no layout change at all
    assert "reuses the free 1g.10gb slice" in second.placement_reason


def test_released_slices_stay_cut_for_the_next_request(run_jobs, fleet, researcher, slice_request):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    run_jobs(lambda: workload_terminate(user=researcher, workload_id=sandbox.pk, kind=WorkloadKind.SANDBOX))
    assert MigSlice.objects.count() == 7
    assert not Allocation.objects.filter(released_at__isnull=True).exists()


def test_a_gpu_holding_a_slice_is_never_re_partitioned_for_another_profile(
    run_jobs, fleet, researcher, slice_request
):
    small = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    busy = Allocation.objects.get(workload=small).gpu
    big = run_jobs(
        lambda: sandbox_request(user=researcher, **{**slice_request, "name": "big", "mig_profile": "4g.40gb"})
    )
    target = Allocation.objects.get(workload=big).gpu
    assert target != busy
    assert sorted(busy.mig_slices.values_list("profile", flat=True)) == ["1g.10gb"] * 7
    # the recent demand (1g and 4g) shapes the new layout: the 4g, then 1g slices beside it
    layout = sorted(target.mig_slices.values_list("profile", "start"), key=lambda item: item[1])
    assert ("4g.40gb", 0) in layout and any(profile == "1g.10gb" for profile, _ in layout)


def test_when_every_gpu_holds_something_a_missing_profile_waits_with_the_reason(
    run_jobs, fleet, researcher, slice_request
):
    for number in range(8):  # one 7g on each MIG GPU
        run_jobs(
            lambda n=number: sandbox_request(
                user=researcher, **{**slice_request, "name": f"w{n}", "mig_profile": "7g.80gb"}
            )
        )
    waiting = run_jobs(lambda: sandbox_request(user=researcher, **{**slice_request, "name": "late"}))
    waiting.refresh_from_db()
    assert waiting.state == S.QUEUED
    assert "waiting for a h100-80gb GPU with nothing on it to re-partition" in waiting.message


def test_queued_slices_share_the_layout_one_drain_cuts_with_one_layout_change(
    run_jobs, fleet, researcher, team, h100
):
    queued = [
        make_sandbox(
            owner=researcher, team=team, state=S.QUEUED, name=f"q{n}", gpu_type=h100, mig_profile="1g.10gb"
        )
        for n in range(3)
    ]
    before = wanted_version()
    placed = run_jobs(lambda: workload_queue_drain())
    assert sorted(placed) == sorted(w.pk for w in queued)
    gpus = {Allocation.objects.get(workload=w).gpu_id for w in queued}
    assert len(gpus) == 1  # one GPU cut into 7 x 1g.10gb, three of them taken
    assert wanted_version() == before + 1  # one layout change, not one per slice
    assert MigSlice.objects.filter(gpu_id__in=gpus).count() == 7


def test_a_failed_change_keeps_the_new_layout_of_a_gpu_a_waiting_request_still_holds(
    fleet, researcher, slice_request
):
    first = sandbox_request(user=researcher, **slice_request)
    second = sandbox_request(user=researcher, **{**slice_request, "name": "second"})
    gpu = Allocation.objects.get(workload=first).gpu
    assert Allocation.objects.get(workload=second).gpu == gpu  # a free slice of the same new layout
    workload_requeue(
        workload_id=first.pk, message="The MIG layout change on gpu-h100-b failed.", now=timezone.now()
    )
    # second still holds one of the GPU's new slices: the GPU keeps its whole new layout
    assert MigSlice.objects.filter(gpu=gpu).count() == 7
    workload_requeue(
        workload_id=second.pk, message="The MIG layout change on gpu-h100-b failed.", now=timezone.now()
    )
    assert not MigSlice.objects.filter(gpu=gpu).exists()
