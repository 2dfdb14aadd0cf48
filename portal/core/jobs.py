"""Enqueue background jobs by name, after the surrounding transaction commits.

The portal never imports the worker code: it names a task and the Celery app that the `workers`
Django app registered as current delivers it.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import current_app
from django.db import transaction

log = logging.getLogger(__name__)


def enqueue(task_name: str, *args: Any, countdown: float | None = None) -> None:
    def send() -> None:
        app = current_app
        if app.conf.task_always_eager and task_name in app.tasks:
            app.tasks[task_name].apply(args=args)
            return
        try:
            app.send_task(task_name, args=args, countdown=countdown)
        except Exception:  # the broker being down must not undo a committed request
            log.exception("could not enqueue %s%r; the periodic sweep will pick it up", task_name, args)

    transaction.on_commit(send)
