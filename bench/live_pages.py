"""What 200 open live pages cost the server: their polls per minute, and the time of one poll
when nothing changed (a 204 from the version) and when something did (the region rendered).

    python bench/live_pages.py                     # SQLite in memory (under a minute)
    python bench/live_pages.py --pages 500         # more open pages
    python bench/live_pages.py --database-url postgres://postgres@127.0.0.1:5432/gpu_portal_bench_live

Builds its own database (SQLite in memory by default; a PostgreSQL one named by --database-url is dropped
and created first), seeds the demo (`seed_demo`) and adds rows: 10 more teams of a lead and six
researchers, 40 sandboxes per team (running, queued, waiting for a lead, ended), their approvals
and audit events. Then it opens --pages pages in-process through Django's test client, a mix of
40 % approvals inboxes and 40 % dashboards of leads and 20 % sandbox pages of owners, reads from
each page the interval of its polls (the region's and the nav badges' `hx-trigger="every Ns"`),
and times each page's polls with the version it shows (nothing changed), then after a new request
in every team (something changed: the region renders). CPU is process time for one core. The
minute in the versions is held still while it measures; a steady minute of a page is its idle
polls plus one render of its region (the minute turning), as the last line counts.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import statistics
import sys
import time
import warnings
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HTMX = {"HTTP_HX_REQUEST": "true"}
EXTRA_TEAMS, RESEARCHERS, SANDBOXES_PER_TEAM = 10, 6, 40


def _create_postgres(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(
        host=parts.hostname, port=parts.port or 5432, user=parts.username, dbname="postgres", autocommit=True
    ) as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        server.execute(f'CREATE DATABASE "{name}"')


def _setup(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    settings.ALLOWED_HOSTS = ["*"]
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    call_command("migrate", verbosity=0)
    call_command("seed_demo", verbosity=0, stdout=io.StringIO())


def _more_rows() -> list[tuple[object, list[object]]]:
    """Teams with a lead and researchers, and their sandboxes, approvals and audit events."""
    from django.utils import timezone

    from portal.accounts.models import Membership, Team, User
    from portal.audit.models import AuditEvent
    from portal.fleet.models import GpuType
    from portal.workloads.models import Approval, Image, Workload, WorkloadCounter, WorkloadState

    now = timezone.now()
    image = Image.objects.first()
    gpu_type = GpuType.objects.order_by("pk").first()
    states = [
        WorkloadState.RUNNING,
        WorkloadState.QUEUED,
        WorkloadState.PENDING_APPROVAL,
        WorkloadState.TERMINATED,
    ]
    teams = []
    for number in range(EXTRA_TEAMS):
        team = Team.objects.create(slug=f"bench-{number}", name=f"Bench {number}", default_image=image)
        lead = User.objects.create(username=f"lead-{number}")
        Membership.objects.create(user=lead, team=team, role=Membership.Role.LEAD)
        members = []
        for index in range(RESEARCHERS):
            member = User.objects.create(username=f"r-{number}-{index}")
            Membership.objects.create(user=member, team=team, role=Membership.Role.RESEARCHER)
            members.append(member)
        workloads = Workload.objects.bulk_create(
            Workload(
                name=f"box-{number}-{index}",
                kind="sandbox",
                team=team,
                owner=members[index % RESEARCHERS],
                image=image,
                gpu_type=gpu_type,
                gpu_count=1,
                state=states[index % len(states)],
                ttl_hours=Decimal(4),
                expires_at=now + timedelta(hours=index % 7 + 1),
                queued_at=now - timedelta(minutes=index),
                started_at=now - timedelta(hours=1) if index % 4 == 0 else None,
                number=number * SANDBOXES_PER_TEAM + index + 1,  # bulk: numbered here, not by save()
            )
            for index in range(SANDBOXES_PER_TEAM)
        )
        WorkloadCounter.objects.update_or_create(
            kind="sandbox", defaults={"last": (number + 1) * SANDBOXES_PER_TEAM}
        )
        Approval.objects.bulk_create(
            Approval(workload=w, team=team, requested_by=w.owner, why_needed="over the line")
            for w in workloads
            if w.state == WorkloadState.PENDING_APPROVAL
        )
        AuditEvent.objects.bulk_create(
            AuditEvent(
                actor=w.owner,
                action="sandbox.request",
                object_type="sandbox",
                object_id=str(w.pk),
                team=team,
                to_state=w.state,
            )
            for w in workloads
            for _ in range(3)
        )
        teams.append((team, lead, [w for w in workloads if w.state == WorkloadState.RUNNING]))
    return teams


@dataclass
class OpenPage:
    kind: str
    client: object
    url: str
    region: str
    version: str
    badges: str
    every: float  # seconds between the region's polls
    badges_every: float


def _interval(html: str, element_id: str) -> float:
    tag = re.search(rf'<(?:section|span) id="{element_id}"[^>]*>', html, re.S).group(0)
    return float(re.search(r'hx-trigger="every (\d+)s"', tag).group(1))


def _version(html: str, element_id: str) -> str:
    tag = re.search(rf'<(?:section|span) id="{element_id}"[^>]*>', html, re.S).group(0)
    return re.search(r'"X-Live-Version": "([^"]+)"', tag).group(1)


def _open(kind: str, user: object, url: str, region: str) -> OpenPage:
    from django.test import Client

    client = Client()
    client.force_login(user)
    html = client.get(url).content.decode()
    return OpenPage(
        kind=kind,
        client=client,
        url=url,
        region=region,
        version=_version(html, region),
        badges=_version(html, "nav-live"),
        every=_interval(html, region),
        badges_every=_interval(html, "nav-live"),
    )


def _poll(page: OpenPage, url: str, version: str) -> tuple[float, float, int]:
    wall, cpu = time.perf_counter(), time.process_time()
    response = page.client.get(url, HTTP_X_LIVE_VERSION=version, **HTMX)
    return time.perf_counter() - wall, time.process_time() - cpu, response.status_code


def _measure(pages: list[OpenPage]) -> dict[str, object]:
    """One poll of each page's region and badges: times, CPU, and the CPU of a minute of polls."""
    times, statuses, cpu_per_minute, region_cpu = [], {}, 0.0, 0.0
    for page in pages:
        for url, version, every in (
            (page.url, page.version, page.every),
            ("/live/badges/", page.badges, page.badges_every),
        ):
            wall, cpu, status = _poll(page, url, version)
            times.append(wall)
            statuses[status] = statuses.get(status, 0) + 1
            cpu_per_minute += cpu * 60 / every
            region_cpu += cpu if url == page.url else 0.0
    times.sort()
    return {
        "p50": statistics.median(times) * 1000,
        "p99": times[min(len(times) - 1, int(len(times) * 0.99))] * 1000,
        "cpu_per_minute": cpu_per_minute,
        "region_cpu": region_cpu,
        "statuses": statuses,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--database-url", default="")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="No directory at")
    url = args.database_url or "sqlite://:memory:"
    if url.startswith("postgres"):
        _create_postgres(url)
    started = time.perf_counter()
    _setup(url)
    teams = _more_rows()
    print(f"database ready in {time.perf_counter() - started:.1f} s ({url.split(':')[0]})")

    from portal.audit.models import AuditEvent
    from portal.workloads import live

    live._minute = lambda: 0  # held still: an idle poll stays idle however long the run takes

    pages: list[OpenPage] = []
    for number in range(args.pages):
        _team, lead, running = teams[number % len(teams)]
        share = number % 5
        if share < 2:
            pages.append(_open("inbox", lead, "/approvals/", "approval-table"))
        elif share < 4:
            pages.append(_open("dashboard", lead, "/?scope=team", "sandbox-table"))
        else:
            sandbox = running[number % len(running)]
            pages.append(_open("detail", sandbox.owner, f"/sandboxes/{sandbox.number}/", "sandbox-live"))
    per_minute = statistics.mean(60 / p.every + 60 / p.badges_every for p in pages)
    idle = _measure(pages)
    # Something changed: a new event in every team (a request, a decision, a state move).
    AuditEvent.objects.bulk_create(
        AuditEvent(action="sandbox.request", object_type="sandbox", object_id="0", team=team)
        for team, _lead, _running in teams
    )
    busy = _measure(pages)

    kinds = {kind: sum(1 for p in pages if p.kind == kind) for kind in ("inbox", "dashboard", "detail")}
    print(f"{len(pages)} open pages: {kinds}")
    print(f"requests per minute per open page (region + nav badges): {per_minute:.1f}")
    print(f"{'poll':<18}{'p50 ms':>9}{'p99 ms':>9}{'CPU s/min':>11}{'cores':>7}  answers")
    for label, figures in (("nothing changed", idle), ("something changed", busy)):
        print(
            f"{label:<18}{figures['p50']:>9.2f}{figures['p99']:>9.2f}{figures['cpu_per_minute']:>11.1f}"
            f"{figures['cpu_per_minute'] / 60:>7.2f}  {figures['statuses']}"
        )
    print("CPU s/min: process time of a minute of all pages' polls if every poll were of that kind.")
    steady = idle["cpu_per_minute"] + busy["region_cpu"] - idle["region_cpu"]
    print(f"steady minute, nothing happening (idle polls + one render per page): {steady:.1f} CPU s/min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
