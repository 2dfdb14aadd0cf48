"""The embedded portal: web server, Celery worker and beat in one process, on an in-memory broker."""

from __future__ import annotations

import logging

from celery.beat import EmbeddedService
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from portal.core.embedded import DEVELOPMENT_SECRET_KEY, serve_on
from workers.celery import app

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Serve the portal with an in-process Celery worker and beat (embedded default)."

    def add_arguments(self, parser):
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")

    def handle(self, *args, addrport: str, **options):
        if not settings.CELERY_BROKER_URL.startswith("memory://"):
            raise CommandError(
                "runportal runs its own worker on an in-memory broker; with CELERY_BROKER_URL set, run "
                "`celery -A workers worker` and `celery -A workers beat` beside gunicorn instead."
            )
        if settings.SECRET_KEY == DEVELOPMENT_SECRET_KEY:
            try:
                serve_on(bind_address(addrport))
            except ImproperlyConfigured as error:
                raise CommandError(str(error)) from None
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        settings.STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise serves from the finders
        # A developer's server: WhiteNoise reads static/ on each request, so an edited stylesheet is
        # served whole at once (read at start only, it would come back cut at its old size).
        settings.WHITENOISE_AUTOREFRESH = True
        beat = EmbeddedService(app, thread=True, schedule_filename=settings.CELERY_BEAT_SCHEDULE_FILENAME)
        with start_worker(
            app,
            pool="threads",
            concurrency=4,
            perform_ping_check=False,
            loglevel="WARNING",
            shutdown_timeout=10,
        ):
            beat.start()
            self.stdout.write(f"Worker and beat running in-process; serving on http://{addrport}/")
            try:
                call_command("runserver", addrport, use_reloader=False, use_threading=True)
            finally:
                beat.stop()


def bind_address(addrport: str) -> str:
    """The address of runserver's `addrport` ("8000", "0:8000", "[::1]:8000", "localhost:8000")."""
    if addrport.isdigit():
        return "127.0.0.1"
    addr = addrport.rsplit(":", 1)[0] if ":" in addrport and not addrport.endswith("]") else addrport
    return "0.0.0.0" if addr == "0" else addr
