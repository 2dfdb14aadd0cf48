"""Two versions of the portal timed against each other on one spend bench database.

This machine's speed drifts by 10-15 % over minutes, so two separate `bench/spend.py` runs cannot
tell a 5 % change from noise. This script times the same reports with this checkout and with
another one (`--against`, for example a `git worktree` of the commit before), alternating the two
in fresh processes round after round over the same ranges and the same `now`, and prints each
range's median for both and the difference. It also checks that both versions give the same
figures, row for row.

    git worktree add /tmp/before HEAD~1
    python bench/spend_compare.py --database-url postgres://postgres@127.0.0.1:5432/gpu_portal_bench_spend \
        --against /tmp/before

The database is one `bench/spend.py` loaded (run that first); nothing in it is changed, and the
other checkout must be at the same migrations.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.spend import DEFAULT_URL, random_range  # noqa: E402 (the root is on the path first)


def ranges(now: datetime, seed: int) -> dict[str, tuple[datetime, datetime]]:
    """The ranges timed: for 30, 90 and 365 days, ending 12:30 yesterday, from 12:30 to now, and
    three between random seconds as `bench/spend.py` draws them; one day between random seconds."""
    rng = random.Random(seed)
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    noon = today - timedelta(days=1) + timedelta(hours=12, minutes=30)
    found = {}
    for days in (30, 90, 365):
        found[f"{days} d to 12:30"] = (noon - timedelta(days=days), noon)
        found[f"{days} d 12:30 to now"] = (noon - timedelta(days=days - 1), now)
        for n in range(3):
            found[f"{days} d random {n + 1}"] = tuple(random_range(rng, now, days).values())
    found["1 d random"] = tuple(random_range(rng, now, 1).values())
    return found


def side(*, root: str, url: str, now: datetime, group: str, runs: int, seed: int) -> dict:
    """In a process of its own: the reports with the portal at `root`, as JSON-ready figures."""
    import time

    sys.path.insert(0, root)
    os.chdir(root)
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    import django

    django.setup()
    from portal.accounts.models import User
    from portal.spend.selectors import spend_grouped

    admin = User.objects.get(username="admin")
    times, rows = {}, {}
    for label, (start, end) in ranges(now, seed).items():

        def report(start=start, end=end):
            return spend_grouped(user=admin, group_by=group, start=start, end=end, now=now)

        rows[label] = [[row.key, str(row.cost), str(row.gpu_hours)] for row in report()]  # also warms up
        spent = []
        for _ in range(runs):
            began = time.perf_counter()
            report()
            spent.append((time.perf_counter() - began) * 1000)
        times[label] = spent
    return {"times": times, "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--against", required=True, help="another checkout of the portal (a directory)")
    parser.add_argument("--group", default="workload", help="the report's grouping (default: workload)")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of one process per version")
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each report in a process")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--now", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:  # one process of a round
        now = datetime.fromisoformat(args.now)
        figures = side(
            root=args.side, url=args.database_url, now=now, group=args.group, runs=args.runs, seed=args.seed
        )
        print(json.dumps(figures))
        return 0
    against = str(Path(args.against).resolve())
    if not (Path(against) / "portal" / "settings.py").exists():
        parser.error(f"--against {args.against}: no checkout of the portal there")
    now = datetime.now(UTC)
    sides = {"against": against, "this": str(ROOT)}
    times: dict[str, dict[str, list[float]]] = {name: {} for name in sides}
    rows: dict[str, dict] = {}
    for n in range(args.rounds):
        order = list(sides) if n % 2 == 0 else list(reversed(sides))  # neither always goes first
        for name in order:
            command = [sys.executable, __file__, "--side", sides[name], "--now", now.isoformat()]
            command += ["--database-url", args.database_url, "--group", args.group, "--runs", str(args.runs)]
            command += ["--seed", str(args.seed), "--against", against]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode:
                sys.stderr.write(done.stderr)
                return done.returncode
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            for label, spent in figures["times"].items():
                times[name].setdefault(label, []).extend(spent)
            rows[name] = figures["rows"]
        print(f"round {n + 1} of {args.rounds} done", file=sys.stderr)
    print(f"{args.group} reports, median of {args.rounds * args.runs} runs each: --against, this checkout")
    for label in times["this"]:
        before, after = statistics.median(times["against"][label]), statistics.median(times["this"][label])
        print(f"{label:20} {before:7.1f} ms {after:7.1f} ms  {100 * (after - before) / before:+6.1f} %")
    differ = [label for label in rows["this"] if rows["this"][label] != rows["against"][label]]
    print("figures: the same in every range" if not differ else f"figures differ in: {', '.join(differ)}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
