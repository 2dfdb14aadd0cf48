"""API rate limits are counted in a cache every process shares: Redis (PORTAL_CACHE_URL) in
production, the database without it (the embedded portal, one process, in its memory). With each
process counting in its own memory, four gunicorn workers gave a user four times the limit.
Which cache a deployment gets is tested in test_deploy_settings.py."""

from __future__ import annotations

import os
import uuid
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.core.cache import cache, caches
from django.core.cache.backends.db import DatabaseCache
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from rest_framework.throttling import UserRateThrottle as DrfUserRateThrottle

from portal.core.throttling import UserRateThrottle

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
TABLE = "portal_throttle_cache"  # made by portal/core/migrations/0002_throttle_cache.py


def allowed(cache_client, user, requests: int) -> list[bool]:
    """What the portal's user throttle (2 a minute) answers, counting in `cache_client`: one
    client per process, as each gunicorn worker makes its own."""
    throttle_class = type("Throttle", (UserRateThrottle,), {"cache": cache_client, "rate": "2/minute"})
    request = SimpleNamespace(user=user)
    return [throttle_class().allow_request(request, view=None) for _ in range(requests)]


def test_the_api_counts_requests_in_the_throttle_cache(fleet, alice, researcher, monkeypatch):
    monkeypatch.setattr(DrfUserRateThrottle, "THROTTLE_RATES", {"user": "2/minute"})
    key = f"throttle_user_{researcher.pk}"

    assert [alice.get("/api/v1/me").status_code for _ in range(2)] == [200, 200]
    assert len(caches["throttle"].get(key)) == 2
    assert cache.get(key) is None  # not in the default cache

    cache.clear()
    assert alice.get("/api/v1/me").status_code == 429


def test_the_api_throttles_are_the_portals():
    assert settings.REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"] == [
        "portal.core.throttling.UserRateThrottle",
        "portal.core.throttling.AnonRateThrottle",
    ]


def test_two_database_cache_clients_see_one_count(researcher):
    """Without Redis a deployment counts in the table the migrations made, whichever worker asks."""
    first_worker, second_worker = DatabaseCache(TABLE, {}), DatabaseCache(TABLE, {})

    assert allowed(first_worker, researcher, 2) == [True, True]
    assert allowed(second_worker, researcher, 1) == [False]


def test_two_processes_memories_would_each_give_the_whole_limit(researcher):
    """What went wrong: each worker's own memory counts alone (the embedded portal, one process,
    is the only one left counting in memory)."""
    first_worker, second_worker = LocMemCache("worker-1", {}), LocMemCache("worker-2", {})

    assert allowed(first_worker, researcher, 2) == [True, True]
    assert allowed(second_worker, researcher, 2) == [True, True]


@pytest.fixture
def redis_clients():
    """Two clients of the Redis at TEST_REDIS_URL, each with its own connection pool."""
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except redis.RedisError as error:
        pytest.skip(f"Redis at {REDIS_URL} (TEST_REDIS_URL) is not reachable: {error}")
    prefix = f"test-throttle-{uuid.uuid4().hex}"
    clients = [RedisCache(REDIS_URL, {"KEY_PREFIX": prefix}) for _ in range(2)]
    yield clients
    server = redis.Redis.from_url(REDIS_URL)
    for key in server.scan_iter(f"{prefix}:*"):
        server.delete(key)


def test_two_redis_clients_see_one_count(researcher, redis_clients):
    first_worker, second_worker = redis_clients

    assert allowed(first_worker, researcher, 2) == [True, True]
    assert allowed(second_worker, researcher, 1) == [False]
