"""Reconcile one workload (a sandbox or a deployment): compare what the database intends with
what the cluster has, act on the difference, and record the outcome on the row. Running it twice
changes nothing."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.utils import timezone

from portal.accounts.models import SshKey
from portal.accounts.selectors import owner_shut_out
from portal.deployments.services import deployment_observed, deployment_release_scaled_away
from portal.fleet.models import MigSlice, Node
from portal.fleet.services import mig_slices_observed
from portal.sandboxes.selectors import sandbox_datasets
from portal.sandboxes.services import (
    home_attached,
    home_claim,
    sandbox_kube_access_held,
    sandbox_kube_access_revoke,
    sandbox_kube_access_voided,
    sandbox_ssh_host_key,
    sandbox_ssh_host_key_forget,
    sandbox_ssh_host_key_kept,
)
from portal.workloads.models import Workload, WorkloadKind, WorkloadState
from portal.workloads.services import (
    workload_access_observed,
    workload_attempt_failed,
    workload_mark_ended,
    workload_mark_failed,
    workload_mark_running,
    workload_mark_waiting,
    workload_observed_health,
    workload_removal_stuck,
    workload_requeue,
    workload_restart_begun,
)
from workers.drivers.base import NODE_GONE, ClusterDriver, DriverError
from workers.manifests import workload_namespace_name
from workers.manifests.names import deployment_host_label, mig_resource_name
from workers.reconcile.clusters import driver_for
from workers.reconcile.homes import dataset_mount, home_volume, observe_home
from workers.reconcile.leases import lease_give_back, lease_take
from workers.reconcile.mig import reconcile_node_mig
from workers.spec import GpuClaim, ServingSpec, WorkloadSpec

log = logging.getLogger(__name__)
RECHECK_SECONDS = 1.0
SERVING_WATCH_SECONDS = 30.0
SCALED_TO_ZERO = "Scaled to zero: no replica runs and nothing is billed; scale up to serve again."


def namespace_for(workload: Workload) -> str:
    return workload_namespace_name(workload.team.slug, workload.name, workload.pk)


def _host_label(workload: Workload, namespace: str) -> str:
    """A sandbox is reached at its namespace's name (the sign-in gate finds it by that); a
    deployment's endpoint at `dep-<team>-<name>-<id>` (nothing routes by it but its clients)."""
    if workload.kind == WorkloadKind.DEPLOYMENT:
        return deployment_host_label(workload.team.slug, workload.name, workload.pk)
    return namespace


def _claims(workload: Workload) -> list[GpuClaim]:
    """One GPU claim per replica, from the live allocations (a sandbox has one replica)."""
    allocations = (
        workload.allocations.filter(released_at__isnull=True, ended_at__isnull=True)
        .select_related("gpu__node", "mig_slice")
        .order_by("replica", "gpu__index")
    )
    by_replica: dict[int, list] = {}
    for allocation in allocations:
        by_replica.setdefault(allocation.replica, []).append(allocation)
    claims = []
    cluster = workload.cluster
    dra = bool(cluster and cluster.driver == "kubernetes" and cluster.effective_mig_mode == "dynamic")
    for replica in range(workload.replicas):
        held = by_replica.get(replica, [])
        node = held[0].gpu.node.name if held else workload.node_name
        if workload.mig_profile:
            first = held[0] if held else None
            claims.append(
                GpuClaim(
                    resource=mig_resource_name(workload.mig_profile),
                    count=1,
                    node=node,
                    gpu_indices=(first.gpu.index,) if first else (),
                    mig_profile=workload.mig_profile,
                    mig_start=first.mig_slice.start if first and first.mig_slice else None,
                    dra_parent_uuid=first.gpu.uuid if first and dra else "",
                )
            )
        else:
            claims.append(
                GpuClaim(
                    resource="nvidia.com/gpu",
                    count=workload.gpu_count,
                    node=node,
                    gpu_indices=tuple(a.gpu.index for a in held),
                )
            )
    return claims


def _shape_claim(workload: Workload) -> GpuClaim:
    """What one replica claims, for a deployment scaled to zero (its namespace's quota then
    admits no pod and no GPU)."""
    if workload.mig_profile:
        return GpuClaim(resource=mig_resource_name(workload.mig_profile), count=1, node=workload.node_name,
                        gpu_indices=(), mig_profile=workload.mig_profile)  # fmt: skip
    return GpuClaim(
        resource="nvidia.com/gpu", count=workload.gpu_count, node=workload.node_name, gpu_indices=()
    )


def _serving_spec(workload: Workload, claims: list[GpuClaim]) -> ServingSpec:
    serving = workload.serving
    return ServingSpec(
        model=serving.model.slug,
        image=serving.image,
        command=tuple(serving.command),
        port=serving.port,
        health_path=serving.health_path,
        readiness_path=serving.readiness_path,
        api=serving.api,
        replicas=tuple(claims),
        hf_token=_readable_token(workload.team.hf_token),
        runtime=serving.runtime.slug,
        task=serving.model.task,
    )


def _readable_token(token: str | None) -> str:
    """The team's Hugging Face token, or "" where it could not be decrypted (a SECRET_KEY
    rotated without SECRET_KEY_FALLBACKS leaves the ciphertext, which must not go out)."""
    return token if token and token.startswith("hf_") else ""


def workload_spec(workload: Workload) -> WorkloadSpec:
    """The plain description of a placed sandbox or deployment that drivers and manifest
    builders take."""
    claims = _claims(workload)
    serving = _serving_spec(workload, claims) if workload.kind == WorkloadKind.DEPLOYMENT else None
    namespace = workload.namespace or namespace_for(workload)
    domain = workload.cluster.sandbox_base_domain if workload.cluster else ""
    # an owner deactivated or no longer in the team keeps no way in: no binding of their own
    # cluster identity, no ssh keys
    shut_out = owner_shut_out(workload.owner, team_id=workload.team_id)
    return WorkloadSpec(
        workload_id=workload.pk,
        name=workload.name,
        team=workload.team.slug,
        owner=workload.owner.username,
        namespace=namespace,
        image=serving.image if serving else workload.image.container_image,
        image_kind="shell" if serving else workload.image.kind,  # type: ignore[arg-type]
        cpu=workload.cpu,
        memory_gb=workload.memory_gb,
        storage_gb=workload.storage_gb,
        gpu=claims[0] if claims else _shape_claim(workload),
        expires_at=workload.expiry_from(timezone.now()),  # set once running; until then, if it started now
        access_host=f"{_host_label(workload, namespace)}.{domain}",
        user_identity="" if shut_out else workload.owner.cluster_identity,
        serving=serving,
        home=home_volume(home_attached(workload=workload)) if workload.kind == WorkloadKind.SANDBOX else None,
        datasets=tuple(dataset_mount(dataset) for dataset in sandbox_datasets(workload)),
        ssh_keys=() if shut_out else _ssh_keys(workload),
        ssh_host_key=_ssh_host_key(workload),
    )


def _ssh_host_key(workload: Workload) -> str:
    """A shell sandbox's ssh server's host key, made at its first spec while placed or running and
    the same after; one ending or ended is given the key it had, if any, never a new one (its spec
    only names what to remove)."""
    if not workload.is_ssh_sandbox:
        return ""
    if workload.state in (WorkloadState.PROVISIONING, WorkloadState.RUNNING):
        return sandbox_ssh_host_key(sandbox_id=workload.pk).private_key
    return sandbox_ssh_host_key_kept(sandbox_id=workload.pk)


def _ssh_keys(workload: Workload) -> tuple[str, ...]:
    """A shell sandbox's owner's public keys, oldest first (the order the Secret keeps them in)."""
    if not workload.is_ssh_sandbox:
        return ()
    return tuple(
        SshKey.objects.filter(user_id=workload.owner_id).order_by("pk").values_list("public_key", flat=True)
    )


def reconcile_workload(workload_id: int, *, now: datetime | None = None) -> None:
    """One step towards what the row intends. When to look again is kept on the row
    (`next_attempt_at`), where the periodic reconcile_due finds it."""
    now = now or timezone.now()
    row = Workload.objects.filter(pk=workload_id)
    lease = lease_take(row, "lease_until", now=now)
    if lease is None:
        return  # another worker is on it (or there is no such row)
    try:
        workload = (
            Workload.objects.select_related(
                "team", "owner", "image", "cluster", "gpu_type", "serving__model", "serving__runtime"
            )
            .filter(pk=workload_id)
            .first()
        )
        if workload is not None:
            _step(workload, now)
    finally:
        lease_give_back(row, "lease_until", lease)


def _step(workload: Workload, now: datetime) -> None:
    watching = workload.state == WorkloadState.RUNNING
    if workload.state not in (WorkloadState.PROVISIONING, WorkloadState.TERMINATING) and not watching:
        return
    if workload.cluster is None:
        workload_mark_failed(workload_id=workload.pk, message="placed on no cluster", now=now)
        return
    if workload.state == WorkloadState.PROVISIONING and not workload.namespace:
        # Decided once, before anything of the sandbox exists: its owner's home if free, else a
        # scratch /home for good (a StatefulSet's claim templates cannot change later).
        home_claim(workload=workload, now=now)
    spec = workload_spec(workload)
    if not workload.namespace:
        Workload.objects.filter(pk=workload.pk).update(namespace=spec.namespace)
    driver = driver_for(workload.cluster)
    try:
        if watching and workload.kind == WorkloadKind.DEPLOYMENT:
            _watch_serving(driver, workload, spec, now)
        elif watching:
            _watch_sandbox(driver, workload, spec, now)
        elif workload.state == WorkloadState.PROVISIONING:
            _provision(driver, workload, spec, now)
        else:
            _teardown(driver, workload, spec, now)
    except DriverError as error:
        log.warning("%s %s: %s (retryable=%s)", workload.kind, workload.pk, error.message, error.retryable)
        workload_attempt_failed(
            workload_id=workload.pk, error=error.message, retryable=error.retryable, now=now
        )


def _provision(driver: ClusterDriver, workload: Workload, spec: WorkloadSpec, now: datetime) -> None:
    overdue = _past_deadline(workload, now)
    if overdue:
        workload_mark_failed(workload_id=workload.pk, message=overdue, now=now)
        return
    waiting_for_slice = _slice_being_cut(workload)
    if waiting_for_slice is not None:
        state = reconcile_node_mig(waiting_for_slice.gpu.node_id, now=now)
        if state == "failed":
            workload_requeue(
                workload_id=workload.pk,
                message=f"The MIG layout change on {workload.node_name} failed.",
                now=now,
            )
            return
        if state == "pending":
            workload_mark_waiting(
                workload_id=workload.pk,
                message=_cutting_message(waiting_for_slice, workload.node_name, now),
                now=now,
                recheck_seconds=RECHECK_SECONDS,
            )
            return
    driver.apply_workload(spec)  # for a deployment this also removes replicas scaled away
    if spec.serving is not None:
        deployment_release_scaled_away(deployment_id=workload.pk, now=now)
        if not spec.serving.replicas:  # scaled to zero: its replicas are gone, nothing to wait for
            deployment_observed(deployment_id=workload.pk, ready_replicas=0, now=now)
            workload_mark_running(
                workload_id=workload.pk,
                access=workload.access,
                now=now,
                message=SCALED_TO_ZERO,
                tell_owner=False,
            )
            return
    observe_home(driver, spec, home_attached(workload=workload) if spec.home else None)
    status = driver.workload_status(spec)
    mig_slices_observed(holder=workload, starts=driver.claimed_mig_starts(spec))
    if spec.serving is not None:
        deployment_observed(deployment_id=workload.pk, ready_replicas=status.ready_replicas, now=now)
    if status.phase == "running":
        workload_mark_running(workload_id=workload.pk, access=status.access, now=now)
        return
    if status.phase == "failed":
        workload_mark_failed(workload_id=workload.pk, message=status.message, now=now)
        return
    workload_mark_waiting(
        workload_id=workload.pk, message=_sentence(status.message), now=now, recheck_seconds=RECHECK_SECONDS
    )


def _watch_serving(driver: ClusterDriver, workload: Workload, spec: WorkloadSpec, now: datetime) -> None:
    """A running deployment: keep its replica health current and its endpoint's route in place; a
    replica that cannot run fails it."""
    if not spec.serving or not spec.serving.replicas:
        deployment_observed(
            deployment_id=workload.pk, ready_replicas=0, now=now, message=SCALED_TO_ZERO,
            recheck_seconds=SERVING_WATCH_SECONDS,
        )  # fmt: skip
        if workload.access_problem:  # nothing serves, so nothing is refreshed: no stale warning
            workload_access_observed(workload_id=workload.pk, problem="")
        return
    status = driver.workload_status(spec)
    if status.phase == "failed":
        workload_mark_failed(workload_id=workload.pk, message=status.message, now=now)
        return
    deployment_observed(
        deployment_id=workload.pk,
        ready_replicas=status.ready_replicas,
        now=now,
        message="Running." if status.phase == "running" else _sentence(status.message),
        recheck_seconds=SERVING_WATCH_SECONDS,
    )
    if status.phase != "absent":
        _refresh_access(driver, workload, spec)


def _refresh_access(driver: ClusterDriver, workload: Workload, spec: WorkloadSpec) -> None:
    """Its route and an ssh sandbox's owner's keys as they are now (a key added or removed, a
    portal upgraded under it, a route deleted by hand), never its pods. A failure the cluster
    will not get over by itself (a missing grant, an object it refuses) is shown on its page until
    an update the driver checked goes well; a passing one (a timeout, a busy API server) is only
    logged. Either way it is tried again on the next watch, and the workload itself is as its
    health reading says."""
    try:
        checked = driver.refresh_access(spec)
    except DriverError as error:
        log.warning("%s %s: its route or keys: %s", workload.kind, workload.pk, error.message)
        if not error.retryable:
            workload_access_observed(workload_id=workload.pk, problem=error.message)
        return
    if checked and workload.access_problem:
        workload_access_observed(workload_id=workload.pk, problem="")


NODE_GONE_AFTER = timedelta(minutes=2)


def _watch_sandbox(driver: ClusterDriver, workload: Workload, spec: WorkloadSpec, now: datetime) -> None:
    """A running sandbox: well, degraded (crashing, OOM-killed, evicted, its objects gone, which
    drift repair puts back), or on a node that left the cluster, which ends it: nothing can run
    there again, and its GPUs are not the portal's to hold. A restart its owner asked for
    replaces the pod first. A well one gets its route and (ssh) its owner's keys as they are now."""
    asked = workload.restart_requested_at
    if asked is not None and (workload.restarted_at is None or workload.restarted_at < asked):
        # the new pod as the portal would make it now (an ssh sandbox's keys volume, say)
        driver.apply_workload(spec)
        driver.restart_workload(spec)
        workload_restart_begun(workload_id=workload.pk, now=now)
        return
    observe_home(driver, spec, home_attached(workload=workload) if spec.home else None)
    status = driver.workload_status(spec)
    if status.phase == "failed" and status.message.startswith(NODE_GONE):
        # Gone on two readings NODE_GONE_AFTER apart (a node re-registering under its name is
        # missing for a moment): degraded on the first, ended on the second.
        missing = workload.degraded_since if workload.message.startswith(f"Degraded: {NODE_GONE}") else None
        if missing is not None and now - missing >= NODE_GONE_AFTER:
            workload_mark_failed(workload_id=workload.pk, message=_sentence(status.message), now=now)
            return
    if status.phase == "running":
        workload_observed_health(workload_id=workload.pk, problem="", now=now)
        _refresh_access(driver, workload, spec)
        _void_kubeconfigs_of_the_shut_out(driver, workload, spec)
        return
    problem = status.message or status.phase
    if status.phase == "absent":
        problem = "its objects are gone from the cluster; drift repair puts them back"
    workload_observed_health(workload_id=workload.pk, problem=problem, now=now)
    if status.phase != "absent":  # degraded: its ways in follow its owner all the same
        _refresh_access(driver, workload, spec)
        _void_kubeconfigs_of_the_shut_out(driver, workload, spec)


def _void_kubeconfigs_of_the_shut_out(driver: ClusterDriver, workload: Workload, spec: WorkloadSpec) -> None:
    """An owner deactivated or removed from the team while their sandbox runs loses its
    kubeconfig at once, as the portal's other doors (its gate, their SSH keys) shut for them: the
    tokens would otherwise open a shell in it until they expire, up to a day later."""
    if not sandbox_kube_access_held(sandbox_id=workload.pk):
        return
    owner = workload.owner
    if not owner.is_active:
        why = f"{owner.username} is deactivated"
    elif owner_shut_out(owner, team_id=workload.team_id):
        why = f"{owner.username} is no longer in team {workload.team.slug}"
    else:
        return
    driver.revoke_kubectl(spec)
    sandbox_kube_access_voided(sandbox=workload, why=why)


def _slice_being_cut(workload: Workload) -> MigSlice | None:
    """The workload's MIG slice if the cluster has not made it yet."""
    if not workload.mig_profile:
        return None
    allocation = (
        workload.allocations.select_related("mig_slice__gpu")
        .filter(released_at__isnull=True, mig_slice__state=MigSlice.State.CREATING)
        .first()
    )
    return allocation.mig_slice if allocation else None


def _teardown(driver: ClusterDriver, workload: Workload, spec: WorkloadSpec, now: datetime) -> None:
    if driver.delete_workload(spec):
        workload_mark_ended(workload_id=workload.pk, now=now)
        sandbox_kube_access_revoke(sandbox_id=workload.pk)  # its tokens died with the namespace
        sandbox_ssh_host_key_forget(sandbox_id=workload.pk)  # its Secret too
        return
    workload_removal_stuck(workload_id=workload.pk, now=now)
    Workload.objects.filter(pk=workload.pk, state=WorkloadState.TERMINATING).update(
        message="Removing it from the cluster.", next_attempt_at=now + timedelta(seconds=RECHECK_SECONDS)
    )


def _past_deadline(workload: Workload, now: datetime) -> str:
    """Why the workload fails now, when it has been placed longer than its cluster's provisioning
    deadline without running; "" while it has time. The clock starts when it last went to
    provisioning: placed, placed again after a requeue, or rescaled."""
    cluster = workload.cluster
    if cluster is None or not cluster.provisioning_deadline_minutes:
        return ""
    placed = workload.provisioning_since
    if placed is None or now - placed < timedelta(minutes=cluster.provisioning_deadline_minutes):
        return ""
    last = workload.message.rstrip(".") if workload.message else "no word from the cluster"
    return (
        f"Not running {cluster.provisioning_deadline_minutes} minutes after it was placed on "
        f"{workload.node_name or cluster.name} (the cluster's provisioning deadline); last: {last}"
    )


def _cutting_message(mig_slice: MigSlice, node_name: str, now: datetime) -> str:
    """What a workload waiting for its slice tells its owner: which GPU is being re-partitioned,
    for how long so far, and what the cluster last said about the node."""
    waited = max(0, int((now - mig_slice.created_at).total_seconds()))
    so_far = f"{waited} s" if waited < 120 else f"{waited // 60} min"
    error = (
        Node.objects.filter(pk=mig_slice.gpu.node_id).values_list("mig_layout_last_error", flat=True).first()
    )
    detail = f"; {error}" if error else ""
    return (
        f"Re-partitioning {node_name} GPU {mig_slice.gpu.index} for a {mig_slice.profile} slice "
        f"(MIG reconfiguration), {so_far} so far{detail}"
    )


def _sentence(text: str) -> str:
    """The cluster's words as a sentence: first letter up, names such as NVIDIA left alone."""
    return text[:1].upper() + text[1:]
