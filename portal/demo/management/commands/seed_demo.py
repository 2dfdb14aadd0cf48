from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from portal.demo.seed import demo_seed


class Command(BaseCommand):
    help = (
        "Create the demo fleet, teams, users, images and price book, and two weeks of ended"
        " sandboxes on a new database (safe to run again)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--no-history", action="store_true", help="leave out the two weeks of ended sandboxes"
        )

    def handle(self, *args, **options):
        summary = demo_seed(history=not options["no_history"])
        self.stdout.write(f"Demo data ready ({summary.created} objects created).")
        self.stdout.write(f"Sign in at {settings.PORTAL_BASE_URL}/ as one of:")
        self.stdout.write(
            "  alice (researcher, vision), bob (lead, vision), carol (researcher, nlp), admin (platform admin)"
        )
        self.stdout.write(f"Password for every demo user: {summary.password}")
