"""How fast a workload's utilization chart reads, with a fleet's telemetry in the database.

    python bench/telemetry.py                        # 100 GPUs, 14 days of minutes, a year of hours
    python bench/telemetry.py --gpus 300 --database-url postgres://postgres@127.0.0.1:5432/bench  # empty

Builds a throwaway database (SQLite by default, or the empty PostgreSQL database the URL names),
fills it with what the node agents' readings fold into for every GPU of the fleet: per-minute rows
for the minute retention (14 days) and per-hour rows for a year. Then it reads a sandbox's series
as its page does: the last day by minute, the last 14 days by minute, a year by hour, 20 times
each, and reports the median and the worst. Target: under 100 ms.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _setup(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _fill(gpus: int, rng: random.Random, now: datetime):
    from decimal import Decimal

    from portal.accounts.models import Team, User
    from portal.fleet.models import Allocation, Cluster, Gpu, GpuHour, GpuMinute, GpuType, Node
    from portal.workloads.models import Workload, WorkloadKind, WorkloadState

    cluster = Cluster.objects.create(name="bench", driver="kubernetes")
    gpu_type = GpuType.objects.create(slug="h100-80gb", name="H100", memory_gb=80)
    nodes = [
        Node.objects.create(cluster=cluster, name=f"n{i}", gpu_type=gpu_type) for i in range(gpus // 8 + 1)
    ]
    fleet = Gpu.objects.bulk_create(
        Gpu(node=nodes[i // 8], index=i % 8, uuid=f"GPU-{i}", gpu_type=gpu_type) for i in range(gpus)
    )
    team = Team.objects.create(slug="t", name="T")
    user = User.objects.create(username="u")
    year_ago = now - timedelta(days=365)
    sandbox = Workload.objects.create(
        kind=WorkloadKind.SANDBOX, name="long", team=team, owner=user, gpu_type=gpu_type,
        state=WorkloadState.RUNNING, expires_at=now + timedelta(days=1), started_at=year_ago,
    )  # fmt: skip
    Allocation.objects.create(
        gpu=fleet[0], workload=sandbox, team=team, user=user, gpu_type=gpu_type,
        price_per_hour=Decimal("6.88"), started_at=year_ago,
    )  # fmt: skip
    first_minute = (now - timedelta(days=14)).replace(second=0, microsecond=0)
    first_hour = year_ago.replace(minute=0, second=0, microsecond=0)
    for gpu in fleet:
        GpuMinute.objects.bulk_create(
            (
                GpuMinute(
                    gpu=gpu,
                    device=gpu.uuid,
                    minute=first_minute + timedelta(minutes=m),
                    samples=12,
                    utilization_sum=rng.uniform(0, 1200),
                    utilization_samples=12,
                    memory_used_mb_max=40000,
                    memory_total_mb=81559,
                )
                for m in range(14 * 1440)
            ),
            batch_size=5000,
        )
        GpuHour.objects.bulk_create(
            (
                GpuHour(
                    gpu=gpu,
                    device=gpu.uuid,
                    hour=first_hour + timedelta(hours=h),
                    samples=720,
                    utilization_sum=rng.uniform(0, 72000),
                    utilization_samples=720,
                    memory_used_mb_max=40000,
                    memory_total_mb=81559,
                )
                for h in range(365 * 24)
            ),
            batch_size=5000,
        )
    return sandbox


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=100)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--seed", type=int, default=20261130)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        _setup(args.database_url or f"sqlite:///{Path(directory) / 'bench.sqlite3'}")
        from portal.fleet.telemetry import workload_utilization

        now = datetime.now(UTC)
        started = time.perf_counter()
        sandbox = _fill(args.gpus, random.Random(args.seed), now)
        print(f"{args.gpus} GPUs: {args.gpus * 14 * 1440:,} minute rows and {args.gpus * 8760:,} hour rows "
              f"written in {time.perf_counter() - started:.0f} s")  # fmt: skip
        for label, start, step in (
            ("last day, by minute", now - timedelta(days=1), 60),
            ("14 days, by minute", now - timedelta(days=14), 60),
            ("a year, by hour", now - timedelta(days=365), 3600),
        ):
            times, points = [], 0
            for _ in range(20):
                began = time.perf_counter()
                points = len(workload_utilization(workload=sandbox, start=start, end=now, step=step))
                times.append((time.perf_counter() - began) * 1000)
            print(
                f"  {label:<20} {points:>6} points  median {statistics.median(times):7.1f} ms  worst {max(times):7.1f} ms"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
