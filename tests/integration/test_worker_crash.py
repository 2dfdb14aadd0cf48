"""A real Celery worker (with its beat) killed outright, again and again, while it provisions and
tears down sandboxes and deployments, then left to recover: nothing stays stuck, no GPU or slice
is held twice, the cluster holds exactly what the records say runs, and nothing else.

Each wave submits new workloads and ends older ones, gives the worker a moment (drawn from a
fixed seed) and kills it with SIGKILL, mid-step: messages it had taken are never acknowledged,
leases it held run out, and only the periodic re-drive (reconcile_due, the sweep, the MIG
re-drive) can finish the work. Drift repair is held off for the whole run, so a namespace left
behind, or one missing, is not quietly mended and shows.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections import Counter

import pytest
from django.db import connection
from django.utils import timezone

from portal.catalog.demo import catalog_seed
from portal.core.errors import Conflict
from portal.deployments.services import deployment_request
from portal.fleet.models import MigSlice, Node, SimulatedObject
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Workload, WorkloadKind, WorkloadState
from portal.workloads.services import workload_terminate
from tests.integration.conftest import CeleryWorker
from tests.integration.invariants import fleet_problems
from workers.manifests.names import SANDBOX_ID_KEY, WORKLOAD_NAME
from workers.manifests.serving import replica_name

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SEED = 1412
KILLS = 6
RECOVERY_SECONDS = 120  # a killed step's lease (15 s, below) runs out, then the re-drive finishes it
S = WorkloadState
TRANSITIONAL = (S.QUEUED, S.PROVISIONING, S.TERMINATING)


@pytest.fixture
def crash_worker(celery_worker: CeleryWorker) -> CeleryWorker:
    celery_worker.env["PORTAL_DRIFT_SECONDS"] = "3600"  # no drift repair within the run
    celery_worker.env["PORTAL_LEASE_SECONDS"] = "15"  # a killed step is taken up again sooner
    return celery_worker


def submit_wave(wave: int, draw: random.Random, owner) -> list[Workload]:
    """A whole-GPU sandbox, a MIG-slice sandbox and a deployment (two whole-GPU replicas, or one
    on a slice): all approved by policy and placed at once."""
    profile = draw.choice(["1g.10gb", "2g.20gb", "3g.40gb"])
    made = [
        sandbox_request(
            user=owner,
            team="vision",
            name=f"w{wave}-whole",
            gpu_type="h100-80gb",
            count=draw.choice([1, 2]),
            ttl_hours=2,
        ),
        sandbox_request(
            user=owner,
            team="vision",
            name=f"w{wave}-slice",
            gpu_type="h100-80gb",
            mig_profile=profile,
            ttl_hours=2,
        ),
    ]
    if wave % 2:
        made.append(
            deployment_request(
                user=owner,
                team="vision",
                name=f"w{wave}-serve",
                model="llama-3.1-8b-instruct",
                gpu_type="h100-80gb",
                count=1,
                replicas=2,
                ttl_hours=2,
            )
        )
    else:
        made.append(
            deployment_request(
                user=owner,
                team="vision",
                name=f"w{wave}-serve",
                model="qwen2.5-0.5b-instruct",
                gpu_type="h100-80gb",
                mig_profile="1g.10gb",
                ttl_hours=2,
            )
        )
    return made


def wait_for_a_step(*, timeout: float) -> bool:
    """Wait until the worker is inside a reconcile step of a workload or a node's MIG layout
    (it holds the row's lease), up to `timeout` seconds; whether it got there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = timezone.now()
        if (
            Workload.objects.filter(lease_until__gt=now).exists()
            or Node.objects.filter(mig_layout_lease_until__gt=now).exists()
        ):
            return True
        time.sleep(0.01)
    return False


def end(workloads: list[Workload], user) -> None:
    """End them, in whatever state the worker has got them to (a gone one is fine)."""
    for workload in workloads:
        with contextlib.suppress(Conflict):
            workload_terminate(user=user, workload_id=workload.pk, kind=workload.kind)


def settled() -> bool:
    if Workload.objects.filter(state__in=TRANSITIONAL).exists():
        return False
    return not any(node.mig_layout_applied != node.mig_layout_wanted for node in Node.objects.all())


def cluster_problems(cluster: str) -> list[str]:
    """What the simulated cluster holds against what the records say runs: one namespace per
    running workload and nothing for any other (no leak), and each running one's pods there (a
    sandbox's StatefulSet, a Deployment per replica of a deployment)."""
    problems = []
    objects = list(SimulatedObject.objects.filter(cluster=cluster))
    namespaces = [o for o in objects if o.kind == "Namespace"]
    owners = Counter(o.body.get("metadata", {}).get("labels", {}).get(SANDBOX_ID_KEY) for o in namespaces)
    problems += [f"workload {owner} has {n} namespaces" for owner, n in owners.items() if n > 1]
    running = {w.pk: w for w in Workload.objects.filter(state=S.RUNNING)}
    by_namespace = {o.name: o for o in namespaces}
    for namespace in namespaces:
        owner = namespace.body.get("metadata", {}).get("labels", {}).get(SANDBOX_ID_KEY)
        if owner is None or int(owner) not in running:
            problems.append(f"namespace {namespace.name} left behind (its workload {owner} does not run)")
    for obj in objects:
        if obj.namespace and obj.namespace not in by_namespace:
            problems.append(f"{obj.kind} {obj.namespace}/{obj.name} in a namespace that is gone")
    for workload in running.values():
        if not workload.namespace or workload.namespace not in by_namespace:
            problems.append(f"{workload.kind} {workload.pk} runs, but its namespace is not in the cluster")
            continue
        inside = Counter((o.kind, o.name) for o in objects if o.namespace == workload.namespace)
        if workload.kind == WorkloadKind.SANDBOX:
            wanted = {("StatefulSet", WORKLOAD_NAME)}
        else:
            wanted = {("Deployment", replica_name(index)) for index in range(workload.replicas)}
        pods = {key for key in inside if key[0] in ("StatefulSet", "Deployment")}
        if pods != wanted:
            problems.append(
                f"{workload.kind} {workload.pk} runs {sorted(pods)} in the cluster, not {sorted(wanted)}"
            )
    return problems + mig_layout_problems(objects)


def mig_layout_problems(objects: list[SimulatedObject]) -> list[str]:
    """Each MIG node's layout in the cluster is the one its slices' records describe."""
    problems = []
    layouts = {o.name: o.body.get("layout", {}) for o in objects if o.kind == "MigLayout"}
    for node in Node.objects.filter(gpus__mig_enabled=True).distinct():
        recorded: dict[str, list] = {}
        for mig_slice in (
            MigSlice.objects.filter(gpu__node=node).select_related("gpu").order_by("gpu__index", "start")
        ):
            recorded.setdefault(str(mig_slice.gpu.index), []).append([mig_slice.profile, mig_slice.start])
        applied = {index: slices for index, slices in layouts.get(node.name, {}).items() if slices}
        if applied != recorded:
            problems.append(
                f"node {node.name} has MIG layout {applied} in the cluster, records say {recorded}"
            )
    return problems


def test_a_worker_killed_again_and_again_mid_provisioning_leaves_nothing_stuck_doubled_or_leaked(
    crash_worker, fleet, team, researcher
):
    catalog_seed()
    team.auto_approve_max_gpus = 2
    team.save()
    draw = random.Random(SEED)
    started = time.monotonic()
    crash_worker.start()
    waves: list[list[Workload]] = []
    caught: Counter = Counter()  # the states the kills caught workloads in
    mid_step = 0  # kills that landed inside a reconcile step
    for wave in range(KILLS):
        waves.append(submit_wave(wave, draw, researcher))
        if wave >= 2:  # what is two waves old ends, so everything live fits the fleet
            end(waves[wave - 2], researcher)
        if wave % 2:  # the instant a reconcile step is under way (it holds its row's lease)
            mid_step += wait_for_a_step(timeout=3.0)
        else:  # at a random moment, mostly while the new workloads are starting
            time.sleep(draw.uniform(0.3, 2.5))
        caught.update(Workload.objects.filter(state__in=TRANSITIONAL).values_list("state", flat=True))
        crash_worker.kill()
        connection.close()
        crash_worker.start()

    deadline = time.monotonic() + RECOVERY_SECONDS
    while not settled() and time.monotonic() < deadline:
        time.sleep(1)

    assert caught[S.PROVISIONING] > 0, f"no kill caught a workload being provisioned: {caught}"
    assert mid_step > 0, "no kill landed inside a reconcile step"
    stuck = list(Workload.objects.filter(state__in=TRANSITIONAL).values_list("pk", "state", "message"))
    assert stuck == []
    assert settled(), "a MIG layout change was never applied"
    assert fleet_problems() == []
    assert cluster_problems(fleet["whole"].cluster.name) == []
    states = Counter(Workload.objects.values_list("state", flat=True))
    assert states[S.RUNNING] == 6 and states[S.TERMINATED] == 3 * (KILLS - 2), states
    assert crash_worker.errors() == []
    assert time.monotonic() - started < 240
