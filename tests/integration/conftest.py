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


@pytest.fixture
def celery_worker_process(transactional_db) -> Iterator[subprocess.Popen]:
    """A real `celery -A workers worker` (with embedded beat) on the test database and Redis."""
    import redis

    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()
    db = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "PORTAL_SIM_POD_START_SECONDS": "1",
        "PORTAL_SIM_MIG_RECONFIG_SECONDS": "0",
        "PORTAL_SWEEP_SECONDS": "1",
        "CELERY_LOG_LEVEL": "INFO",  # the fixture waits for the worker's "ready" line
        "PORTAL_RECONCILE_SECONDS": "1",
        "PORTAL_VAR_DIR": str(ROOT / "var" / "integration"),
    }
    (ROOT / "var" / "integration").mkdir(parents=True, exist_ok=True)
    log_path = ROOT / "var" / "integration" / "worker.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
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
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while "ready" not in log_path.read_text():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the Celery worker did not start:\n" + log_path.read_text()[-3000:])
            time.sleep(0.2)
        yield process
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        connection.close()
