"""Two hundred users at once on PostgreSQL, across three teams with tight quotas and a small
fleet: whole-GPU and MIG-slice sandboxes, deployments with replicas, scale-ups and scale-downs,
extensions, terminations, leads' decisions, queue drains and teardowns finishing, all mixed.
Afterwards the records must be sound (see `invariants.py`), and nothing may have failed but the
refusals a person is meant to see (over quota, a state that moved on, a bad value).

The plan is drawn from a fixed seed. At most DB_SLOTS actors talk to the database at once (the
server takes about a hundred connections); each opens its own and closes it when done.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

import pytest
from django.db import connection
from django.utils import timezone

from portal.accounts.models import Membership, Team, User
from portal.approvals.services import approval_decide
from portal.catalog.demo import catalog_seed
from portal.core.errors import Conflict, QuotaExceeded, ValidationFailed
from portal.deployments.services import deployment_release_scaled_away, deployment_request, deployment_scale
from portal.fleet.models import Allocation
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Approval, Workload, WorkloadKind, WorkloadState
from portal.workloads.services import (
    workload_extend,
    workload_mark_ended,
    workload_mark_running,
    workload_queue_drain,
    workload_terminate,
)
from tests.factories import (
    ClusterFactory,
    GpuTypeFactory,
    ImageFactory,
    MembershipFactory,
    PriceFactory,
    TeamFactory,
    UserFactory,
    make_node,
)
from tests.integration.invariants import fleet_problems

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SEED = 20261201
ACTORS = 200
DB_SLOTS = 40
TEAMS = {"vision": Decimal(6), "nlp": Decimal(5), "speech": Decimal("4.5")}
PROFILES = ["1g.10gb", "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
# Refusals a person is meant to see (a 4xx); anything else raised is a failure of the portal.
EXPECTED = (QuotaExceeded, Conflict, ValidationFailed)
S = WorkloadState


@dataclass(frozen=True)
class Actor:
    number: int
    team: str
    action: str
    seed: int


@pytest.fixture
def contested_fleet(db):
    """Eight whole H100s and four MIG H100s, three teams each with a researcher and a lead, a
    running sandbox and a running deployment each to scale, extend and end, and two requests
    each waiting for the lead (an extension and a scale-up)."""
    h100 = GpuTypeFactory(slug="h100-80gb", name="NVIDIA H100 80GB", memory_gb=80)
    PriceFactory(gpu_type=h100, price_per_hour=Decimal("6.88"))
    cluster = ClusterFactory(name="race", driver="simulated")
    make_node(name="race-whole", gpu_type=h100, gpus=8, mig=False, cluster=cluster)
    make_node(name="race-mig", gpu_type=h100, gpus=4, mig=True, cluster=cluster)
    catalog_seed()
    image = ImageFactory()
    for slug, quota in TEAMS.items():
        team = TeamFactory(
            slug=slug,
            quota_gpus=quota,
            auto_approve_max_gpus=2,
            budget_policy=Team.BudgetPolicy.WARN,
            default_image=image,
        )
        researcher = UserFactory(username=f"{slug}-researcher")
        lead = UserFactory(username=f"{slug}-lead")
        MembershipFactory(user=researcher, team=team, role=Membership.Role.RESEARCHER)
        MembershipFactory(user=lead, team=team, role=Membership.Role.LEAD)
        now = timezone.now()
        running = [
            sandbox_request(
                user=researcher, team=slug, name="steady", gpu_type="h100-80gb", count=1, ttl_hours=4
            ),
            deployment_request(
                user=researcher,
                team=slug,
                name="served",
                model="qwen2.5-0.5b-instruct",
                gpu_type="h100-80gb",
                mig_profile="1g.10gb",
                ttl_hours=4,
            ),
        ]
        for workload in running:
            workload_mark_running(
                workload_id=workload.pk, access="https://race.example", now=now, tell_owner=False
            )
        sandbox, deployment = running
        # Waiting for the lead from the start: a longer life, and a second slice replica.
        workload_extend(user=researcher, workload_id=sandbox.pk, hours=30, kind=WorkloadKind.SANDBOX)
        deployment_scale(user=researcher, deployment_id=deployment.pk, replicas=2)


def plan() -> list[Actor]:
    draw = random.Random(SEED)
    actions = {
        "sandbox_whole": 30,
        "sandbox_slice": 30,
        "deploy": 20,
        "scale": 25,
        "extend": 15,
        "terminate": 20,
        "decide": 20,
        "drain": 10,
        "teardown": 15,
    }
    kinds, weights = list(actions), list(actions.values())
    return [
        Actor(n, draw.choice(list(TEAMS)), draw.choices(kinds, weights)[0], draw.randrange(2**32))
        for n in range(ACTORS)
    ]


def _live(team: str, *, kind: str | None = None, states=(S.PROVISIONING, S.RUNNING)) -> list[int]:
    rows = Workload.objects.filter(team__slug=team, state__in=states)
    if kind:
        rows = rows.filter(kind=kind)
    return list(rows.order_by("pk").values_list("pk", flat=True))


def act(actor: Actor) -> str:
    """Carry out one actor's action; returns what came of it."""
    draw = random.Random(actor.seed)
    researcher = User.objects.get(username=f"{actor.team}-researcher")
    lead = User.objects.get(username=f"{actor.team}-lead")
    name = f"race-{actor.number}"
    match actor.action:
        case "sandbox_whole":
            count = draw.choice([1, 1, 1, 2, 2, 3, 4, 8])
            sandbox_request(
                user=researcher,
                team=actor.team,
                name=name,
                gpu_type="h100-80gb",
                count=count,
                ttl_hours=draw.choice([1, 2, 8]),
            )
        case "sandbox_slice":
            sandbox_request(
                user=researcher,
                team=actor.team,
                name=name,
                gpu_type="h100-80gb",
                mig_profile=draw.choice(PROFILES),
                ttl_hours=2,
            )
        case "deploy":
            if draw.random() < 0.5:
                shape = {"model": "qwen2.5-0.5b-instruct", "mig_profile": draw.choice(["1g.10gb", "2g.20gb"])}
            else:
                shape = {"model": "llama-3.1-8b-instruct", "count": 1}
            deployment_request(
                user=researcher,
                team=actor.team,
                name=name,
                gpu_type="h100-80gb",
                replicas=draw.choice([1, 1, 2, 3]),
                ttl_hours=2,
                **shape,
            )
        case "scale":
            targets = _live(actor.team, kind=WorkloadKind.DEPLOYMENT)
            if not targets:
                return "nothing to scale"
            deployment_scale(
                user=draw.choice([researcher, lead]),
                deployment_id=draw.choice(targets),
                replicas=draw.choice([0, 1, 2, 2, 3, 4]),
            )
        case "extend":
            targets = _live(actor.team, states=(S.PENDING_APPROVAL, S.QUEUED, S.PROVISIONING, S.RUNNING))
            if not targets:
                return "nothing to extend"
            target = Workload.objects.get(pk=draw.choice(targets))
            workload_extend(
                user=draw.choice([researcher, lead]),
                workload_id=target.pk,
                hours=draw.choice([1, 4, 30, 500]),
                kind=target.kind,
            )
        case "terminate":
            targets = _live(actor.team, states=(S.PENDING_APPROVAL, S.QUEUED, S.PROVISIONING, S.RUNNING))
            if not targets:
                return "nothing to end"
            target = Workload.objects.get(pk=draw.choice(targets))
            workload_terminate(user=researcher, workload_id=target.pk, kind=target.kind)
        case "decide":
            pending = list(
                Approval.objects.filter(team__slug=actor.team, state=Approval.State.PENDING)
                .order_by("pk")
                .values_list("pk", flat=True)[:3]
            )
            if not pending:
                return "nothing to decide"
            approve = draw.random() < 0.75
            approval_decide(
                user=lead,
                approval_id=draw.choice(pending),
                approve=approve,
                comment="" if approve else "not this week",
            )
        case "drain":
            workload_queue_drain()
        case "teardown":
            # What a worker does once a workload's objects are gone from the cluster.
            ending = _live(actor.team, states=(S.TERMINATING,))
            if ending:
                workload_mark_ended(workload_id=draw.choice(ending), now=timezone.now())
            scaled = Allocation.objects.filter(
                team__slug=actor.team,
                ended_at__isnull=False,
                released_at__isnull=True,
                workload__state__in=[S.PROVISIONING, S.RUNNING],
            ).values_list("workload_id", flat=True)
            for deployment_id in sorted(set(scaled))[:2]:
                deployment_release_scaled_away(deployment_id=deployment_id, now=timezone.now())
            if not ending and not scaled:
                return "nothing to tear down"
        case _:
            raise AssertionError(actor.action)
    return "done"


def race(actors: list[Actor], action: Callable[[Actor], str]) -> list[tuple[Actor, str]]:
    """Start every actor at once; each waits for a database slot, acts, and closes its connection."""
    barrier = threading.Barrier(len(actors))
    slots = threading.BoundedSemaphore(DB_SLOTS)
    outcomes: list[tuple[Actor, str]] = []
    lock = threading.Lock()

    def run(actor: Actor) -> None:
        barrier.wait()
        with slots:
            try:
                result = action(actor)
            except EXPECTED as error:
                result = type(error).__name__
            except Exception as error:  # reported in the assertion
                result = f"unexpected {type(error).__name__}: {error}"
            finally:
                connection.close()
        with lock:
            outcomes.append((actor, result))

    threads = [threading.Thread(target=run, args=(actor,), name=f"actor-{actor.number}") for actor in actors]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "an actor never finished (a lock wait?)"
    return outcomes


def test_two_hundred_users_at_once_never_overcommit_quota_or_double_hold_a_gpu(contested_fleet):
    assert fleet_problems() == []
    assert Approval.objects.filter(state=Approval.State.PENDING).count() == 2 * len(TEAMS)
    started = time.monotonic()

    outcomes = race(plan(), act)

    took = time.monotonic() - started
    unexpected = [(a.number, a.action, result) for a, result in outcomes if result.startswith("unexpected")]
    assert unexpected == []
    assert len(outcomes) == ACTORS
    assert fleet_problems() == []
    # The race was a real one: requests went through and others were refused for quota.
    tally = Counter((a.action, result) for a, result in outcomes)
    assert tally[("sandbox_whole", "done")] and tally[("sandbox_slice", "done")], tally
    assert tally[("deploy", "done")] and tally[("scale", "done")] and tally[("decide", "done")], tally
    assert sum(n for (_, result), n in tally.items() if result == "QuotaExceeded") >= 5, tally
    assert Allocation.objects.filter(released_at__isnull=True, mig_profile="").exists()
    assert Allocation.objects.filter(released_at__isnull=True).exclude(mig_profile="").exists()

    # What the race left queued is placed by a drain, and that too keeps the records sound.
    workload_queue_drain()
    assert fleet_problems() == []
    assert took < 90, f"the race took {took:.0f} s"
