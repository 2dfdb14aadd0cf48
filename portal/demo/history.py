"""Two weeks of ended sandboxes for the demo, so that *Spend*, its charts, the budget forecast and
the monthly statement have something to show at the first sign-in.

Each sandbox is written as the portal leaves one that has ended: the workload (terminated, or
expired where it ran to its end), its holds on GPUs of the demo fleet at the price book's price
of the day, released, and the audit events of its request and its end at their own times. The
spend roll-ups pick the days up like any others. Nothing here is live: no hold is open, no slice
or quota is taken, and no two holds share a GPU at the same time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from portal.accounts.models import Team, User
from portal.audit.models import AuditEvent
from portal.audit.services import audit_record
from portal.fleet.models import Allocation, Gpu
from portal.fleet.selectors import current_prices, slice_share
from portal.workloads.models import Workload, WorkloadState

HISTORY_DAYS = 14


@dataclass(frozen=True)
class Habit:
    """A sandbox someone starts at `hour` (UTC) on the days `every` divides, for `hours` hours:
    `count` whole GPUs from `first_gpu` of `node`, or one `profile` slice on that GPU."""

    owner: str
    team: str
    name: str
    project: str
    node: str
    first_gpu: int
    hour: int
    hours: int
    every: int = 1
    count: int = 1
    profile: str = ""
    expired: bool = False  # ran to its expiry rather than being ended by its owner


HABITS = (
    Habit("alice", "vision", "detector-dev", "detector", "gpu-h100-a", 0, 9, 7, every=1),
    Habit("alice", "vision", "label-check", "detector", "gpu-h100-b", 0, 14, 3, every=2, profile="1g.10gb"),
    Habit("bob", "vision", "backbone-train", "", "gpu-h100-a", 2, 20, 10, every=3, count=2, expired=True),
    Habit("carol", "nlp", "eval-harness", "llm-eval", "gpu-h200-a", 0, 8, 8, every=1),
    Habit("carol", "nlp", "tokenizer-sweep", "llm-eval", "gpu-a100-a", 1, 12, 4, every=2, profile="3g.40gb"),
)


def demo_history(*, now: datetime) -> int:
    """Write the habits' sandboxes of the last HISTORY_DAYS days that ended before `now`; returns
    how many sandboxes it wrote. Call it once, on a fleet and teams `demo_seed` has just made."""
    teams = {team.slug: team for team in Team.objects.filter(slug__in={h.team for h in HABITS})}
    users = {user.username: user for user in User.objects.filter(username__in={h.owner for h in HABITS})}
    gpus = {(gpu.node.name, gpu.index): gpu for gpu in Gpu.objects.select_related("node", "gpu_type")}
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    written = 0
    for days_ago in range(HISTORY_DAYS, 0, -1):
        day = today - timedelta(days=days_ago)
        for habit in HABITS:
            start = day + timedelta(hours=habit.hour)
            end = start + timedelta(hours=habit.hours)
            if days_ago % habit.every or end > now:
                continue
            held = [
                gpus[(habit.node, habit.first_gpu + n)] for n in range(1 if habit.profile else habit.count)
            ]
            _ended_sandbox(habit, teams[habit.team], users[habit.owner], held, start, end)
            written += 1
    return written


def _ended_sandbox(
    habit: Habit, team: Team, owner: User, gpus: list[Gpu], start: datetime, end: datetime
) -> None:
    gpu_type = gpus[0].gpu_type
    state = WorkloadState.EXPIRED if habit.expired else WorkloadState.TERMINATED
    # asked for two hours more than it ran, unless it ran to its expiry
    ttl_hours = habit.hours if habit.expired else habit.hours + 2
    sandbox = Workload.objects.create(
        name=habit.name,
        team=team,
        owner=owner,
        image=team.default_image,
        purpose="demo history",
        project=habit.project,
        gpu_type=gpu_type,
        gpu_count=1 if habit.profile else habit.count,
        mig_profile=habit.profile,
        state=state,
        message="ran to its expiry" if habit.expired else "ended by its owner",
        ttl_hours=Decimal(ttl_hours),
        expires_at=start + timedelta(hours=ttl_hours),
        queued_at=start,
        started_at=start,
        ended_at=end,
        cluster=gpus[0].node.cluster,
        node_name=gpus[0].node.name,
    )
    share = (1, 1)
    if habit.profile:
        shape = gpu_type.model.profile(habit.profile) if gpu_type.model else None
        assert shape is not None, f"{gpu_type.slug} has no {habit.profile}"
        share = slice_share(shape)
    price = current_prices(start)[gpu_type.pk]
    for gpu in gpus:
        Allocation.objects.create(
            gpu=gpu,
            mig_profile=habit.profile,
            workload=sandbox,
            team=team,
            user=owner,
            gpu_type=gpu_type,
            share_numerator=share[0],
            share_denominator=share[1],
            price_per_hour=price,
            started_at=start,
            ended_at=end,
            released_at=end,
        )
    events = [
        audit_record(
            actor=owner,
            action="sandbox.request",
            obj=sandbox,
            team=team,
            to_state=WorkloadState.QUEUED,
            detail=f"{sandbox.gpu_label} for {ttl_hours} h",
        ),
        audit_record(
            actor=None if habit.expired else owner,
            action=f"sandbox.{state}",
            obj=sandbox,
            team=team,
            from_state=WorkloadState.RUNNING,
            to_state=state,
        ),
    ]
    # when it happened, not now
    Workload.objects.filter(pk=sandbox.pk).update(created_at=start)
    for event, at in zip(events, (start, end), strict=True):
        AuditEvent.objects.filter(pk=event.pk).update(created_at=at)
