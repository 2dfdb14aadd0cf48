"""Integration tests: PostgreSQL and a real Celery worker subprocess on Redis.

Run by `make integration` (which points DATABASE_URL and CELERY_BROKER_URL at 127.0.0.1). They
skip when those services are not configured or not reachable, unless PORTAL_REQUIRE_INTEGRATION=1
(CI), where a missing service fails the run instead (see `pytest_collection_modifyitems` in
tests/conftest.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


class CeleryWorker:
    """A real `celery -A workers worker` (with embedded beat) on the test database and Redis, in a
    process group of its own so that it can be stopped, or killed outright, and started again."""

    def __init__(self, *, extra_env: dict[str, str] | None = None):
        db = connection.settings_dict
        self.env = {
            **os.environ,
            "DATABASE_URL": f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "PORTAL_SIM_POD_START_SECONDS": "1",
            "PORTAL_SIM_MIG_RECONFIG_SECONDS": "0",
            "PORTAL_SWEEP_SECONDS": "1",
            "CELERY_LOG_LEVEL": "INFO",  # start() waits for the worker's "ready" line
            "PORTAL_RECONCILE_SECONDS": "1",
            "PORTAL_VAR_DIR": str(ROOT / "var" / "integration"),
            **(extra_env or {}),
        }
        (ROOT / "var" / "integration").mkdir(parents=True, exist_ok=True)
        self.log_path = ROOT / "var" / "integration" / "worker.log"
        self.process: subprocess.Popen | None = None
        self.starts = 0
        self.logs: list[Path] = []

    def start(self) -> subprocess.Popen:
        """Start the worker and wait until it is ready to take jobs. Each start's log is kept
        (worker.log, worker.1.log ...) so a failure can be traced to the run that caused it."""
        log_path = self.log_path.with_suffix(f".{self.starts}.log") if self.starts else self.log_path
        self.starts += 1
        self.logs.append(log_path)
        with open(log_path, "w") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "workers",
                    "worker",
                    "-B",
                    "--pool=solo",
                    "--loglevel=INFO",
                ],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while "ready" not in log_path.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the Celery worker did not start:\n" + log_path.read_text()[-3000:])
            time.sleep(0.2)
        return self.process

    def errors(self) -> list[str]:
        """The lines of every run's log that tell of a job failing (an error or a traceback)."""
        return [
            line
            for path in self.logs
            for line in path.read_text().splitlines()
            if "ERROR/" in line or "CRITICAL/" in line or line.startswith("Traceback")
        ]

    def kill(self) -> None:
        """SIGKILL the worker and its beat at once: no shutdown, no message given back."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()


@pytest.fixture
def celery_worker(transactional_db) -> Iterator[CeleryWorker]:
    """A worker that is not started yet: the test starts, kills and restarts it."""
    import redis

    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()
    worker = CeleryWorker()
    try:
        yield worker
    finally:
        worker.stop()
        connection.close()


@pytest.fixture
def celery_worker_process(celery_worker) -> subprocess.Popen:
    """A real `celery -A workers worker` (with embedded beat) on the test database and Redis."""
    return celery_worker.start()
