"""Rebuild the spend roll-ups from the holds: after an import, a migration or a price correction."""

from __future__ import annotations

import time
from datetime import date, timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from portal.spend.holds import first_hold_at
from portal.spend.services import spend_rollup_rebuild


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise CommandError(f"Not a date (YYYY-MM-DD): {text!r}.") from None


class Command(BaseCommand):
    help = (
        "Roll up spend again from the holds, day by day (each day in its own transaction), then "
        "sum the months. Idempotent; --missing resumes an interrupted run. Days are UTC, both ends "
        "included; by default from the first hold to the last closed day. Idle cost is counted from "
        "the GPU minutes still kept (PORTAL_TELEMETRY_MINUTE_DAYS): older days rolled again lose it."
    )

    def add_arguments(self, parser):
        parser.add_argument("--from", dest="first", type=_day, help="First day (YYYY-MM-DD).")
        parser.add_argument("--to", dest="last", type=_day, help="Last day (YYYY-MM-DD).")
        parser.add_argument(
            "--missing", action="store_true", help="Only the days not rolled yet, or stale (resume)."
        )

    def handle(self, *args, first: date | None, last: date | None, missing: bool, **options):
        now = timezone.now()
        if first is None:
            began = first_hold_at()
            if began is None:
                self.stderr.write("No holds: nothing to roll up.")
                return
            first = began.date()
        last = last or (now - timedelta(days=1)).date()
        if last < first:
            raise CommandError(f"--to {last} is before --from {first}.")
        started = time.monotonic()
        days = rows = 0
        for day, written in spend_rollup_rebuild(first=first, last=last, now=now, only_missing=missing):
            days += 1
            rows += written
            if options["verbosity"] > 1:
                self.stderr.write(f"{day}: {written} rows")
        self.stdout.write(
            f"Rolled {days} days from {first} to {last}: {rows} rows in {time.monotonic() - started:.1f} s."
        )
