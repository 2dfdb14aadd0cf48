"""What must hold of the fleet's records whatever ran, raced or crashed before: read back from
the database after a concurrency race or a run of worker crashes. Each check returns the
problems it finds, as sentences; an empty list means the records are sound."""

from __future__ import annotations

from collections import Counter, defaultdict
from fractions import Fraction

from portal.accounts.models import Team
from portal.fleet.geometry import fits
from portal.fleet.models import Allocation, Gpu, MigSlice
from portal.workloads.models import END_STATES, Approval, Workload, WorkloadState
from portal.workloads.policy import QUOTA_STATES, workload_share

S = WorkloadState
HOLDING = (S.PROVISIONING, S.RUNNING)  # every replica holds its GPUs, billed
NOTHING_HELD = (S.PENDING_APPROVAL, S.QUEUED, *END_STATES)


def quota_problems() -> list[str]:
    """No team commits more GPU equivalents than its quota, counted exactly (fractions of slices
    included), as the quota check counts them: every live workload but the ending ones."""
    problems = []
    for team in Team.objects.order_by("pk"):
        live = Workload.objects.filter(team=team, state__in=QUOTA_STATES).select_related("gpu_type")
        committed = sum((workload_share(w) for w in live), Fraction(0))
        if committed > Fraction(team.quota_gpus):
            problems.append(
                f"team {team.slug} commits {committed} GPU equivalents over its quota {team.quota_gpus}"
            )
    return problems


def hold_problems() -> list[str]:
    """No GPU or slice held twice, no slice held on a GPU held whole, every live slice where the
    MIG geometry allows it, and every hold on the GPU type and profile of its workload."""
    problems = []
    live = list(
        Allocation.objects.filter(released_at__isnull=True).select_related("gpu", "mig_slice", "workload")
    )
    whole = Counter(a.gpu_id for a in live if not a.mig_profile)
    sliced = Counter(a.mig_slice_id for a in live if a.mig_profile)
    sliced_gpus = {a.gpu_id for a in live if a.mig_profile}
    problems += [f"GPU {gpu} held whole {n} times" for gpu, n in whole.items() if n > 1]
    problems += [f"slice {s} held {n} times" for s, n in sliced.items() if n > 1]
    problems += [f"GPU {gpu} held whole and by a slice" for gpu in whole.keys() & sliced_gpus]
    for hold in live:
        workload = hold.workload
        if workload is None:
            problems.append(f"live hold {hold.pk} of no workload")
            continue
        if hold.gpu_type_id != workload.gpu_type_id or hold.gpu.gpu_type_id != workload.gpu_type_id:
            problems.append(f"hold {hold.pk} of workload {workload.pk} is on another GPU type")
        if hold.mig_profile != workload.mig_profile:
            problems.append(
                f"hold {hold.pk} is {hold.mig_profile or 'whole'}, workload {workload.pk} asked otherwise"
            )
        if not hold.mig_profile and hold.gpu.mig_enabled:
            problems.append(f"hold {hold.pk} holds MIG GPU {hold.gpu_id} whole")
        if hold.mig_profile and (
            hold.mig_slice is None
            or hold.mig_slice.gpu_id != hold.gpu_id
            or hold.mig_slice.profile != hold.mig_profile
        ):
            problems.append(f"slice hold {hold.pk} names no {hold.mig_profile} slice of GPU {hold.gpu_id}")
    problems += geometry_problems()
    return problems


def geometry_problems() -> list[str]:
    """Every GPU's slices (held or not) are valid MIG placements that do not overlap."""
    problems = []
    by_gpu: dict[int, list[MigSlice]] = defaultdict(list)
    for mig_slice in MigSlice.objects.order_by("gpu_id", "start"):
        by_gpu[mig_slice.gpu_id].append(mig_slice)
    gpus = Gpu.objects.select_related("gpu_type").in_bulk(list(by_gpu))
    for gpu_id, slices in by_gpu.items():
        gpu = gpus[gpu_id]
        model = gpu.gpu_type.model
        if not gpu.mig_enabled:
            problems.append(f"GPU {gpu_id} is not MIG-enabled but has slices")
        placed: list[tuple[int, int]] = []
        for mig_slice in slices:
            shape = model.profile(mig_slice.profile) if model else None
            if shape is None or shape.size != mig_slice.size or not fits(placed, shape, mig_slice.start):
                problems.append(f"slice {mig_slice} does not fit GPU {gpu_id} beside {placed}")
            placed.append((mig_slice.start, mig_slice.size))
        for profile, count in Counter(s.profile for s in slices).items():
            shape = model.profile(profile) if model else None
            if shape is not None and count > shape.max_count:
                problems.append(f"GPU {gpu_id} has {count} {profile} slices, at most {shape.max_count} fit")
    return problems


def state_problems() -> list[str]:
    """Every workload in a legal state, holding what that state holds: nothing before placement
    or after its end, every replica's GPUs while placed, nothing billed while ending."""
    problems = []
    holds: dict[int, list[Allocation]] = defaultdict(list)
    for hold in Allocation.objects.filter(released_at__isnull=True):
        holds[hold.workload_id].append(hold)
    pending = Counter(
        Approval.objects.filter(state=Approval.State.PENDING, kind=Approval.Kind.CREATE).values_list(
            "workload_id", flat=True
        )
    )
    for workload in Workload.objects.order_by("pk"):
        label = f"{workload.kind} {workload.pk} ({workload.state})"
        mine = holds.get(workload.pk, [])
        if workload.state not in S.values:
            problems.append(f"{label}: not a workload state")
        if workload.state in NOTHING_HELD and mine:
            problems.append(f"{label} holds {len(mine)} GPUs or slices")
        if workload.state in END_STATES and workload.ended_at is None:
            problems.append(f"{label} ended with no end time")
        if workload.state == S.PENDING_APPROVAL and pending[workload.pk] != 1:
            problems.append(f"{label} has {pending[workload.pk]} pending approvals")
        if workload.state != S.PENDING_APPROVAL and pending[workload.pk]:
            problems.append(f"{label} still has a pending request approval")
        if workload.state == S.TERMINATING:
            if not workload.ending_as or workload.ended_at is None:
                problems.append(f"{label} ends as nothing")
            if any(h.ended_at is None for h in mine):
                problems.append(f"{label} is still billed")
        if workload.state in HOLDING:
            billing = Counter(h.replica for h in mine if h.ended_at is None)
            per_replica = 1 if workload.mig_profile else workload.gpu_count
            wanted = dict.fromkeys(range(workload.replicas), per_replica)
            if dict(billing) != wanted:
                problems.append(f"{label} holds {dict(billing)} per replica, not {wanted}")
            if workload.cluster_id is None or not workload.node_name:
                problems.append(f"{label} is placed on no node")
    return problems


def fleet_problems() -> list[str]:
    return quota_problems() + hold_problems() + state_problems()
