"""How fast spend reads with millions of holds, and whether it is still exact to the cent.

    python bench/spend.py                        # 10 million holds over a year (about an hour)
    python bench/spend.py --holds 1000000        # one million
    python bench/spend.py --reuse                # measure again on the database already loaded (migrated first)
    python bench/spend.py --layout random        # the holds at random on disk, not as the portal writes them

Builds its own PostgreSQL database (`gpu_portal_bench_spend` on 127.0.0.1 unless --database-url
names another; it is dropped first), loads N GPU holds over the year before now, spread over 60
teams, 1,500 users, five GPU types (whole GPUs and MIG slices), workloads of one to eight holds and
a few long-running deployments (two thirds of workloads labelled with one of 40 projects per
team), with prices from a price book that changes every quarter (and 1 %
of holds at odd prices), log-normal durations, open holds (some of workloads already expired, not
yet swept), every user's home as storage holds, and the node agents' minutes for the last
--telemetry-hours (whole GPUs, 40 % of them idle). Loading uses COPY with the tables' indexes
dropped and built again after. The rows are then laid out on disk as the portal writes them: a
hold's row where it was last written, when it was released (an open one's when it was placed), a
workload's when it ended, the minutes a minute at a time for every GPU. `--layout random` keeps
them in the order they were made (each hold's start at random in the year), so the thousands of
holds at a range's edge lie on as many pages: a worse case than the portal's own writes make.

Then it rolls up the year as `manage.py spend_rollup` does, runs the periodic roll-up once (today's
hours), and times, as a platform admin: a team's month-to-date spend, the budget check of a request,
and the spend report by user, team, GPU type, day, workload and project over 1, 30, 90 and 365 days:
ending now, in whole days (as the web form asks), with an edge at 12:30 UTC (half a day from
midnight, half an hour from the hour), and between random seconds (a new range each run); and as
a team lead (a random one each run), in whole days and between random seconds. It also times the
project labels the request forms and the lists' filter suggest (a lead's and a researcher's, each
run another). Finally it checks
a sample of figures against the slow definition: every hold in Python, as spend was computed
before roll-ups, but in exact fractions.
Targets: month-to-date under 20 ms, budget check under 10 ms more, any report under 200 ms (and
the labels, read on every request form and list page, a few ms).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/gpu_portal_bench_spend"
GPU_TYPES = ("a100-80gb", "h100-80gb", "h200-141gb", "h100-nvl-94gb", "a100-40gb")
TEAMS, USERS, NODES = 60, 1500, 200
HOLDS_PER_COPY_BATCH = 200_000


def _create_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(
        host=parts.hostname, port=parts.port or 5432, user=parts.username, dbname="postgres", autocommit=True
    ) as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        server.execute(f'CREATE DATABASE "{name}"')


def _setup(url: str, *, migrate: bool) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)


@contextmanager
def _indexes_dropped(table: str):
    """Drop a table's indexes (not its primary key) and build them again after the block."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s AND indexname NOT IN "
            "(SELECT conname FROM pg_constraint WHERE contype IN ('p', 'u', 'x'))",
            [table],
        )
        found = cursor.fetchall()
        for name, _ in found:
            cursor.execute(f'DROP INDEX "{name}"')
    with connection.cursor() as cursor:  # no foreign key triggers: the rows are made consistent
        cursor.execute("SET session_replication_role = replica")
    yield
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = DEFAULT")
        cursor.execute("SET maintenance_work_mem = '1GB'")
        for _, definition in found:
            cursor.execute(definition)
        cursor.execute(f'ANALYZE "{table}"')


# How each table's rows lie on disk: as the portal writes them (`written`), or in the order they
# are generated, a hold's start at random across the year (`random`: a hold's neighbours on disk
# are unrelated to it, so the thousands of holds at a range's edge lie on as many pages).
LAYOUTS = {
    # a hold's row is last written when it is released (an open one's when it was placed), a
    # workload's when it ends (a live one's when it started running), the node agents' minutes a
    # minute at a time for every GPU
    "written": {
        "fleet_allocation": "COALESCE(released_at, started_at), id",
        "workloads_workload": "COALESCE(ended_at, started_at), id",
        "fleet_gpuminute": "minute, gpu_id",
    },
    "random": {},
}


def _lay_out(table: str, layout: str) -> None:
    """Rewrite `table` in the order `layout` gives it, if any (run with its indexes dropped, so only
    its primary key is built again)."""
    from django.db import connection

    order = LAYOUTS[layout].get(table)
    if order is None:
        return
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE INDEX bench_layout ON {table} ({order})")
        cursor.execute(f"CLUSTER {table} USING bench_layout")
        cursor.execute("DROP INDEX bench_layout")


def _copy(model, columns: list[str], rows) -> int:
    """COPY rows (tuples in the order of `columns`) into the model's table."""
    from django.db import connection

    table = model._meta.db_table
    count = 0
    with connection.cursor() as cursor:
        names = ", ".join(f'"{c}"' for c in columns)
        with cursor.cursor.copy(f'COPY "{table}" ({names}) FROM STDIN') as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
    return count


def _defaults(model, given: list[str]) -> tuple[list[str], tuple]:
    """All columns of the model but its primary key: the given ones first, then the rest with their
    defaults (ready for the database)."""
    from django.db import connection

    rest = [f for f in model._meta.concrete_fields if not f.primary_key and f.column not in given]
    values = []
    for field in rest:
        default = field.get_default()
        values.append(field.get_db_prep_save(default, connection))
    return given + [f.column for f in rest], tuple(values)


def _lognormal_seconds(rng: random.Random) -> float:
    # median 25 minutes, a long tail (mean about 50 minutes), at most 20 days
    return min(rng.lognormvariate(math.log(1500), 1.2), 20 * 86400)


def load(*, holds: int, seed: int, telemetry_hours: int, now: datetime, layout: str) -> dict:
    """Fill the database; returns what was made."""
    from django.contrib.auth.hashers import UNUSABLE_PASSWORD_PREFIX
    from django.db import connection, transaction

    from portal.accounts.models import Membership, Team, User
    from portal.fleet.geometry import gpu_model
    from portal.fleet.models import (
        Allocation,
        Cluster,
        Gpu,
        GpuMinute,
        GpuType,
        Node,
        PriceBookEntry,
        StorageHold,
        StoragePrice,
    )
    from portal.fleet.selectors import slice_share
    from portal.workloads.models import Workload, WorkloadCounter

    rng = random.Random(seed)
    year_ago = now - timedelta(days=365)
    started = time.monotonic()
    with transaction.atomic():
        types = [GpuType.objects.create(slug=s, name=s.upper(), memory_gb=80) for s in GPU_TYPES]
        book: dict[int, list[tuple[datetime, Decimal]]] = {}
        for gpu_type in types:
            base = Decimal(rng.choice(["1.8000", "2.4500", "3.1000", "4.2500", "6.8800"]))
            entries = []
            for quarter in range(4):
                effective = year_ago - timedelta(days=1) + timedelta(days=91 * quarter)
                price = (base * Decimal(1 + 0.05 * quarter)).quantize(Decimal("0.0001"))
                PriceBookEntry.objects.create(
                    gpu_type=gpu_type, price_per_hour=price, effective_from=effective
                )
                entries.append((effective, price))
            book[gpu_type.pk] = entries
        storage_book = [
            (year_ago - timedelta(days=1), Decimal("0.0800")),
            (now - timedelta(days=180), Decimal("0.1000")),
        ]
        for effective, price in storage_book:
            StoragePrice.objects.create(price_per_gb_month=price, effective_from=effective)
        teams = Team.objects.bulk_create(
            Team(slug=f"team-{n:02d}", name=f"Team {n:02d}") for n in range(TEAMS)
        )
        users = User.objects.bulk_create(
            User(username=f"user{n:04d}", first_name=f"User {n}", password=UNUSABLE_PASSWORD_PREFIX)
            for n in range(USERS)
        )
        Membership.objects.bulk_create(
            Membership(
                user=u, team=teams[n % TEAMS], role=Membership.Role.LEAD if n < TEAMS else "researcher"
            )
            for n, u in enumerate(users)
        )
        User.objects.create(username="admin", is_staff=True, password=UNUSABLE_PASSWORD_PREFIX)
        cluster = Cluster.objects.create(name="bench", driver="kubernetes")
        nodes = Node.objects.bulk_create(
            Node(cluster=cluster, name=f"node-{n:03d}", gpu_type=types[n % len(types)]) for n in range(NODES)
        )
        gpus = Gpu.objects.bulk_create(
            Gpu(node=node, index=i, uuid=f"GPU-{node.pk}-{i}", gpu_type=node.gpu_type, mig_enabled=i >= 4)
            for node in nodes
            for i in range(8)
        )
    gpus_of = defaultdict(list)
    for gpu in gpus:
        gpus_of[gpu.gpu_type_id].append(gpu.pk)
    shapes = {}
    for gpu_type in types:
        model = gpu_model(gpu_type.slug)
        slices = [(p.name, *slice_share(p)) for p in model.profiles]
        shapes[gpu_type.pk] = slices

    def price_at(gpu_type_id: int, moment: datetime) -> Decimal:
        price = book[gpu_type_id][0][1]
        for effective, value in book[gpu_type_id]:
            if effective <= moment:
                price = value
        return price

    # Workloads and their holds, generated together; workload ids are known in advance.
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(pg_get_serial_sequence('workloads_workload', 'id'))")
        first_workload = cursor.fetchone()[0] + 1
    workload_columns, workload_defaults = _defaults(
        Workload,
        ["id", "kind", "name", "team_id", "owner_id", "gpu_type_id", "gpu_count", "replicas", "mig_profile",
         "state", "expires_at", "created_at", "started_at", "ended_at", "project", "number"],
    )  # fmt: skip
    numbers = {"sandbox": 0, "deployment": 0}  # each kind counts its own (sandbox 1, deployment 1)
    labels = random.Random(seed + 1)  # its own stream: the holds stay those of earlier runs of a seed
    workloads: list[tuple] = []
    allocation_columns = [
        "gpu_id", "mig_slice_id", "mig_profile", "replica", "workload_id", "team_id", "user_id", "gpu_type_id",
        "share_numerator", "share_denominator", "price_per_hour", "started_at", "ended_at", "released_at",
    ]  # fmt: skip
    open_whole: set[int] = set()
    made = {"holds": 0, "workloads": 0, "open": 0, "expired_open": 0}

    def holds_and_workloads():
        workload_id = first_workload
        span = (now - year_ago).total_seconds()
        while made["holds"] < holds:
            owner = rng.randrange(USERS)
            user_id, team_id = users[owner].pk, teams[owner % TEAMS].pk
            gpu_type = types[rng.randrange(len(types))]
            long_running = rng.random() < 0.002
            start = year_ago + timedelta(seconds=rng.random() * span)
            seconds = rng.uniform(7, 120) * 86400 if long_running else _lognormal_seconds(rng)
            end = start + timedelta(seconds=seconds, microseconds=rng.randrange(1_000_000))
            is_open = end > now
            if rng.random() < 0.55:
                count, profile, share = rng.choice((1, 1, 1, 2, 4, 8)), "", (1, 1)
            else:
                name, numerator, denominator = rng.choice(shapes[gpu_type.pk])
                count, profile, share = rng.choice((1, 1, 2, 3)), name, (numerator, denominator)
            count = min(count, holds - made["holds"])
            price = price_at(gpu_type.pk, start)
            if rng.random() < 0.01:
                price = Decimal(rng.randrange(5000, 120000)).scaleb(-4)
            expires = (
                end + timedelta(minutes=rng.randrange(0, 600))
                if not is_open
                else now + timedelta(hours=rng.randrange(1, 72))
            )
            if is_open and rng.random() < 0.03:
                expires = now - timedelta(minutes=rng.randrange(1, 600))  # expired, the sweep not run yet
                made["expired_open"] += count
            kind = "deployment" if long_running or count > 2 else "sandbox"
            numbers[kind] += 1
            workloads.append(
                (workload_id, kind, f"w{workload_id}", team_id,
                 user_id, gpu_type.pk, 1 if profile else count, count if profile else 1, profile,
                 "running" if is_open else "terminated", expires, start, start, None if is_open else end,
                 f"project-{labels.randrange(40)}" if labels.random() < 2 / 3 else "", numbers[kind])
            )  # fmt: skip
            for replica in range(count):
                pool = gpus_of[gpu_type.pk]
                gpu_id = pool[rng.randrange(len(pool))]
                ended = None if is_open else end
                released = ended
                if is_open:
                    made["open"] += 1
                    if not profile:
                        if gpu_id in open_whole:
                            released = now  # one live whole hold per GPU: free the rare collision
                        open_whole.add(gpu_id)
                yield (
                    gpu_id, None, profile, replica, workload_id, team_id, user_id, gpu_type.pk, share[0], share[1],
                    price, start, ended, released,
                )  # fmt: skip
                made["holds"] += 1
            made["workloads"] += 1
            workload_id += 1

    with _indexes_dropped("fleet_allocation"):
        batch = []
        for row in holds_and_workloads():
            batch.append(row)
            if len(batch) >= HOLDS_PER_COPY_BATCH:
                with transaction.atomic():
                    _copy(Allocation, allocation_columns, batch)
                batch.clear()
                print(f"  {made['holds']:,} holds", file=sys.stderr, end="\r")
        with transaction.atomic():
            _copy(Allocation, allocation_columns, batch)
        _lay_out("fleet_allocation", layout)
    with _indexes_dropped("workloads_workload"), transaction.atomic():
        _copy(Workload, workload_columns, (row + workload_defaults for row in workloads))
        _lay_out("workloads_workload", layout)
        workload_id_max = first_workload + len(workloads)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT setval(pg_get_serial_sequence('workloads_workload', 'id'), %s)", [workload_id_max]
            )
        for kind, last in numbers.items():
            WorkloadCounter.objects.update_or_create(kind=kind, defaults={"last": last})
    workloads.clear()
    loaded = time.monotonic() - started

    # Homes: every user's, resized now and then; the last one still open.
    storage = []
    for user_index, user in enumerate(users):
        moment = year_ago + timedelta(days=rng.uniform(0, 300))
        size = rng.choice((50, 100, 200))
        while True:
            price = storage_book[0][1] if moment < storage_book[1][0] else storage_book[1][1]
            stop = moment + timedelta(days=rng.uniform(10, 200), seconds=rng.random())
            storage.append(
                StorageHold(user=user, team=teams[user_index % TEAMS], key=f"home:{user.pk}", what="home",
                            size_gb=size, price_per_gb_month=price, started_at=moment,
                            ended_at=None if stop >= now else stop)
            )  # fmt: skip
            if stop >= now:
                break
            moment, size = stop, size + 50
    StorageHold.objects.bulk_create(storage, batch_size=5000)

    # The node agents' minutes for the last hours, whole GPUs only.
    first_minute = (now - timedelta(hours=telemetry_hours)).replace(second=0, microsecond=0)
    minutes = int((now - first_minute).total_seconds() // 60)
    minute_columns = [
        "gpu_id", "device", "mig_start", "samples", "utilization_sum", "utilization_samples",
        "memory_used_mb_max", "memory_total_mb", "power_watts_sum", "processes_max", "minute",
    ]  # fmt: skip

    def minute_rows():
        for gpu in gpus:
            for m in range(minutes):
                utilization = rng.uniform(0, 4) if rng.random() < 0.4 else rng.uniform(5, 100)
                yield (gpu.pk, gpu.uuid, None, 4, utilization * 4, 4, 40000, 81559, 1200.0, 1,
                       first_minute + timedelta(minutes=m))  # fmt: skip

    with _indexes_dropped("fleet_gpuminute"), transaction.atomic():
        telemetry = _copy(GpuMinute, minute_columns, minute_rows())
        _lay_out("fleet_gpuminute", layout)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return {
        **made,
        "storage_holds": len(storage),
        "gpu_minutes": telemetry,
        "load_seconds": loaded,
        "all_seconds": time.monotonic() - started,
        "workload_id_max": workload_id_max,
    }


def rollup(now: datetime) -> dict:
    from portal.spend.holds import first_hold_at
    from portal.spend.models import SpendRollup, WorkloadSpend
    from portal.spend.services import spend_rollup_due, spend_rollup_rebuild

    started = time.monotonic()
    first = first_hold_at()
    days = 0
    for day, _ in spend_rollup_rebuild(first=first.date(), last=(now - timedelta(days=1)).date(), now=now):
        days += 1
        if days % 30 == 0:
            print(f"  rolled {day}", file=sys.stderr, end="\r")
    rebuilt = time.monotonic() - started
    started = time.monotonic()
    run = spend_rollup_due()
    return {
        "days": days,
        "rebuild_seconds": rebuilt,
        "due_seconds": time.monotonic() - started,
        "due_partial": len(run.partial),
        "due_blocks": run.blocks,
        "rollup_rows": SpendRollup.objects.count(),
        "workload_rows": WorkloadSpend.objects.count(),
    }


def _timed(call, runs: int) -> list[float]:
    spent = []
    for _ in range(runs):
        began = time.perf_counter()
        call()
        spent.append((time.perf_counter() - began) * 1000)
    return spent


def _figures(spent: list[float]) -> str:
    ordered = sorted(spent)
    p99 = ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]
    return f"p50 {statistics.median(ordered):7.1f} ms  p99 {p99:7.1f} ms  worst {ordered[-1]:7.1f} ms"


def measure(*, runs: int, seed: int) -> list[tuple[str, list[float]]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from portal.accounts.models import Team, User
    from portal.spend.selectors import GROUPS, spend_grouped, team_month_spend
    from portal.workloads.policy import budget_left

    rng = random.Random(seed)
    admin = User.objects.get(username="admin")
    leads = list(User.objects.filter(memberships__role="lead").distinct().order_by("pk"))
    teams = list(Team.objects.order_by("pk"))
    results = []
    now = timezone.now()
    with CaptureQueriesContext(connection) as queries:
        team_month_spend(team=teams[0])
    print(f"month-to-date: {len(queries)} queries")
    results.append(
        ("team month-to-date", _timed(lambda: team_month_spend(team=rng.choice(teams)), runs * 10))
    )
    results.append(
        (
            "budget check (budget_left)",
            _timed(lambda: budget_left(team=rng.choice(teams), now=timezone.now()), runs * 10),
        )
    )
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    half_past_noon = today - timedelta(days=1) + timedelta(hours=12, minutes=30)  # yesterday's
    as_admin = lambda: admin  # noqa: E731
    a_lead = lambda: rng.choice(leads)  # noqa: E731 (a team lead: their team and their own holds elsewhere)
    fixed = lambda start, end: lambda: {"start": start, "end": end}  # noqa: E731
    for days in (1, 30, 90, 365):
        # a new range each run (random_range)
        between_random = lambda d=days: random_range(rng, now, d)  # noqa: E731
        whole_days = fixed(today - timedelta(days=days - 1), today + timedelta(days=1))
        for style, viewer, window in (
            ("ending now", as_admin, fixed(now - timedelta(days=days), now)),
            ("whole days", as_admin, whole_days),
            # the worst time of day for an edge before idle time was counted by device: half a
            # day from either midnight, half an hour from either hour
            ("12:30 to now", as_admin, fixed(half_past_noon - timedelta(days=days - 1), now)),
            ("to 12:30", as_admin, fixed(half_past_noon - timedelta(days=days), half_past_noon)),
            ("random edges", as_admin, between_random),
            ("lead, whole days", a_lead, whole_days),
            ("lead, random edges", a_lead, between_random),
        ):
            for group in GROUPS:
                label = f"{group:8} {days:3} d, {style}"
                spent = _timed(
                    lambda g=group, v=viewer, w=window: spend_grouped(user=v(), group_by=g, **w()), runs
                )
                results.append((label, spent))
                print(f"{label:40} {_figures(spent)}", file=sys.stderr)
    return results + _measure_labels(rng, runs=runs, leads=leads)


def _measure_labels(rng: random.Random, *, runs: int, leads: list) -> list[tuple[str, list[float]]]:
    """The project labels of the request forms (`team_projects`) and of a list's filter
    (`listed_projects`), for a lead (their team's work) and a researcher (their own)."""
    from portal.accounts.models import Membership, User
    from portal.workloads.selectors import listed_projects, team_projects

    researchers = list(User.objects.filter(memberships__role="researcher").distinct().order_by("pk"))

    def teams_of(user) -> list[int]:
        return list(Membership.objects.filter(user=user).values_list("team_id", flat=True))

    results = []
    for who, people in (("lead", leads), ("researcher", researchers)):
        for label, read in (
            (f"labels: request form, {who}", lambda u: team_projects(u, teams_of(u))),
            (f"labels: list filter, {who}", lambda u: listed_projects(u, scope="team")),
            (f"labels: list filter, {who}, mine", lambda u: listed_projects(u, scope="mine")),
        ):
            spent = _timed(lambda r=read, p=people: r(rng.choice(p)), runs)
            results.append((label, spent))
            print(f"{label:40} {_figures(spent)}", file=sys.stderr)
    return results


def random_range(rng: random.Random, now: datetime, days: int) -> dict[str, datetime]:
    """A range of about `days` days between random seconds: the end within the telemetry window (the
    last 36 hours), the start the range's length before it, give or take half a day."""
    end = now - timedelta(seconds=rng.randrange(36 * 3600))
    start = end - timedelta(days=days) + timedelta(seconds=rng.randrange(-12 * 3600, 12 * 3600))
    return {"start": min(start, end - timedelta(hours=1)), "end": end}


def _seconds(low: datetime, high: datetime) -> Fraction:
    held = high - low
    return Fraction((held.days * 86400 + held.seconds) * 1_000_000 + held.microseconds, 1_000_000)


def _cost(price, numerator: int, denominator: int, seconds: Fraction) -> Fraction:
    """The definition, exactly: share x hours x price."""
    return Fraction(price) * numerator * seconds / (denominator * 3600)


def _round(value: Fraction, *, half_even: bool = False) -> Decimal:
    hundredths = value * 100
    whole = hundredths.numerator // hundredths.denominator
    rest = hundredths - whole
    up = rest > Fraction(1, 2) or (rest == Fraction(1, 2) and (not half_even or whole % 2 == 1))
    return Decimal(whole + up).scaleb(-2)


def verify(*, seed: int, samples: int) -> tuple[int, int]:
    """Compare report figures for a few teams with the slow definition; returns (figures, wrong)."""
    from django.db.models import Q
    from django.utils import timezone

    from portal.accounts.models import Team, User
    from portal.fleet.models import Allocation, GpuMinute, StorageHold
    from portal.spend.cost import billed_until
    from portal.spend.selectors import GROUPS, NO_PROJECT_KEY, month_start, spend_grouped, team_month_spend

    rng = random.Random(seed + 1)
    admin = User.objects.get(username="admin")
    now = timezone.now()
    telemetry_from = GpuMinute.objects.order_by("minute").values_list("minute", flat=True).first()
    figures = wrong = 0

    def idle_seconds(hold, low, high) -> Fraction:
        """Seconds of [low, high) (within the hold's billed stretch) in minutes read idle: each
        minute counts the part of it held."""
        if telemetry_from is None or high <= max(low, telemetry_from - timedelta(minutes=1)):
            return Fraction(0)
        rows = GpuMinute.objects.filter(
            gpu_id=hold.gpu_id, mig_start=None, minute__gt=low - timedelta(minutes=1), minute__lt=high
        )
        threshold = hold.team.idle_threshold_percent
        return sum(
            (
                _seconds(max(m.minute, low), min(m.minute + timedelta(minutes=1), high))
                for m in rows
                if m.utilization_samples and m.utilization_sum / m.utilization_samples < threshold
            ),
            Fraction(0),
        )

    def slow(team, group_by, start, end):
        amounts = defaultdict(lambda: [Fraction(0), Fraction(0), Fraction(0)])
        overlapping = Q(started_at__lt=end) & (Q(ended_at__isnull=True) | Q(ended_at__gt=start))
        for hold in Allocation.objects.filter(overlapping, team=team).select_related(
            "workload", "team", "user", "gpu_type"
        ):
            held_from, held_to = max(hold.started_at, start), min(billed_until(hold, now=now), end)
            if held_to <= held_from:
                continue
            if group_by == "day":
                day = held_from.replace(hour=0, minute=0, second=0, microsecond=0)
                windows = []
                while day < held_to:
                    windows.append(
                        (day.date().isoformat(), max(day, held_from), min(day + timedelta(days=1), held_to))
                    )
                    day += timedelta(days=1)
            else:
                key = {"user": hold.user.username, "team": hold.team.slug, "gpu_type": hold.gpu_type.slug,
                       "workload": f"{hold.workload.kind}-{hold.workload.number}" if hold.workload_id else "",
                       "project": (hold.workload.project if hold.workload_id else "") or NO_PROJECT_KEY,
                       }[group_by]  # fmt: skip
                windows = [(key, start, end)]
            for key, low, high in windows:
                amount = amounts[key]
                low, high = max(low, held_from), min(high, held_to)
                seconds = _seconds(low, high)
                n, d = hold.share_numerator, hold.share_denominator
                amount[0] += _cost(hold.price_per_hour, n, d, seconds)
                amount[1] += Fraction(n) * seconds / (d * 3600)
                if high > low:
                    amount[2] += _cost(hold.price_per_hour, n, d, idle_seconds(hold, low, high))
        for hold in StorageHold.objects.filter(overlapping, team=team).select_related("user", "team"):
            held_from, held_to = max(hold.started_at, start), min(billed_until(hold, now=now), end)
            if held_to <= held_from:
                continue
            if group_by == "day":
                day = held_from.replace(hour=0, minute=0, second=0, microsecond=0)
                while day < held_to:
                    key = day.date().isoformat()
                    seconds = _seconds(max(day, held_from), min(day + timedelta(days=1), held_to))
                    amounts[key][0] += _cost(hold.price_per_gb_month, hold.size_gb, 730, seconds)
                    day += timedelta(days=1)
            else:
                key = {
                    "user": hold.user.username,
                    "team": hold.team.slug,
                    "gpu_type": "storage",
                    "workload": "storage",
                    "project": "storage",
                }[group_by]
                amounts[key][0] += _cost(
                    hold.price_per_gb_month, hold.size_gb, 730, _seconds(held_from, held_to)
                )
        return {key: (_round(c), _round(h, half_even=True), _round(i)) for key, (c, h, i) in amounts.items()}

    teams = rng.sample(list(Team.objects.all()), samples)
    for team in teams:
        figures += 1
        expected = slow(team, "team", month_start(now), now + timedelta(days=400))[team.slug][0]
        if team_month_spend(team=team, now=now) != expected:
            wrong += 1
            print(
                f"  month-to-date of {team.slug}: {team_month_spend(team=team, now=now)} != {expected}",
                file=sys.stderr,
            )
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    for team in teams:
        half_past_noon = today - timedelta(days=1) + timedelta(hours=12, minutes=30)
        for start, end in ((now - timedelta(days=1), now), (today - timedelta(days=29), today + timedelta(days=1)),
                           (now - timedelta(days=365), now), (half_past_noon, now),
                           (half_past_noon - timedelta(days=30, minutes=17), half_past_noon)):  # fmt: skip
            for group in GROUPS:
                got = spend_grouped(
                    user=admin, group_by=group, start=start, end=end, team=team, now=now, limit=10**6
                )
                expected = slow(team, group, start, end)
                got = {r.key: (r.cost, r.gpu_hours, r.idle_cost) for r in got}
                for key, value in expected.items():
                    figures += 1
                    if got.get(key) != value:
                        wrong += 1
                        print(
                            f"  {team.slug} {group} {start:%m-%d %H:%M}..{end:%m-%d %H:%M} {key}: {got.get(key)} != {value}",
                            file=sys.stderr,
                        )
                if set(got) != set(expected):
                    wrong += 1
                    print(
                        f"  {team.slug} {group}: keys differ: {sorted(set(got) ^ set(expected))[:5]}",
                        file=sys.stderr,
                    )
    return figures, wrong


def _settled() -> None:
    """Vacuum and analyze what the roll-up wrote, as autovacuum would have by the time people read
    reports: index-only scans need the visibility map, the planner fresh statistics."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "VACUUM ANALYZE spend_spendrollup, spend_workloadspend, spend_spendperiod, spend_spendopenhold,"
            " fleet_allocation"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--holds", type=int, default=10_000_000)
    parser.add_argument(
        "--database-url", default=DEFAULT_URL, help="a PostgreSQL database; dropped and made again"
    )
    parser.add_argument(
        "--reuse", action="store_true", help="measure the database already loaded (no load, no roll-up)"
    )
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument(
        "--runs", type=int, default=20, help="timed runs of each report (month-to-date: 10 times as many)"
    )
    parser.add_argument("--telemetry-hours", type=int, default=36)
    parser.add_argument(
        "--layout",
        choices=sorted(LAYOUTS),
        default="written",
        help="how the holds, workloads and minutes lie on disk: as the portal writes them, or at random",
    )
    parser.add_argument("--verify-teams", type=int, default=3)
    args = parser.parse_args()
    if not args.database_url.startswith("postgres"):
        parser.error("--database-url must name a PostgreSQL database")
    if not args.reuse:
        _create_database(args.database_url)
    _setup(args.database_url, migrate=True)  # a database kept with --reuse gets new indexes too
    from django.utils import timezone

    if not args.reuse:
        now = timezone.now()
        made = load(
            holds=args.holds,
            seed=args.seed,
            telemetry_hours=args.telemetry_hours,
            now=now,
            layout=args.layout,
        )
        print(
            f"loaded {made['holds']:,} holds of {made['workloads']:,} workloads ({made['open']:,} open, "
            f"{made['expired_open']:,} of expired workloads), {made['storage_holds']:,} storage holds, "
            f"{made['gpu_minutes']:,} GPU minutes: holds in {made['load_seconds']:.0f} s, all in {made['all_seconds']:.0f} s"
        )
        rolled = rollup(timezone.now())
        print(
            f"rolled up {rolled['days']} days in {rolled['rebuild_seconds']:.0f} s "
            f"({rolled['rebuild_seconds'] / max(rolled['days'], 1):.2f} s a day, blocks included); the periodic run "
            f"(today so far) in {rolled['due_seconds']:.1f} s: {rolled['rollup_rows']:,} roll-up rows, "
            f"{rolled['workload_rows']:,} workload totals"
        )
    else:
        from portal.spend.services import spend_rollup_due

        spend_rollup_due()
    _settled()
    results = measure(runs=args.runs, seed=args.seed)
    print()
    for label, spent in results:
        print(f"{label:40} {_figures(spent)}")
    worst_report = max(max(s) for label, s in results[2:] if not label.startswith("labels"))
    print(
        f"\nworst report: {worst_report:.1f} ms (target 200); worst month-to-date {max(results[0][1]):.1f} ms (target 20)"
    )
    figures, wrong = verify(seed=args.seed, samples=args.verify_teams)
    print(f"exactness: {figures:,} figures checked against the slow definition, {wrong} wrong")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
