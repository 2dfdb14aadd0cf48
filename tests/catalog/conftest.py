"""Catalog fixtures: the demo catalog, a fleet with H100s (whole and MIG) and H200s, signed-in clients."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from portal.accounts.services import token_create
from portal.catalog.demo import catalog_seed
from portal.fleet.models import Allocation, Gpu
from tests.factories import ClusterFactory, GpuTypeFactory, PriceFactory, make_node


@pytest.fixture(autouse=True)
def _fast_passwords_and_fresh_throttle(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def catalog(db) -> int:
    """The demo catalog: 3 runtimes and 11 models."""
    return catalog_seed()


@pytest.fixture
def h200(db):
    gpu_type = GpuTypeFactory(slug="h200-141gb", name="NVIDIA H200 141GB", memory_gb=141)
    PriceFactory(gpu_type=gpu_type, price_per_hour=Decimal("7.91"))
    return gpu_type


@pytest.fixture
def big_fleet(fleet, h200):
    """The shared fleet (8 whole H100s, 8 MIG H100s) plus a node of 4 whole H200s."""
    cluster = ClusterFactory(name="test", driver="simulated")
    return {**fleet, "h200": make_node(name="gpu-h200-a", gpu_type=h200, gpus=4, mig=False, cluster=cluster)}


@pytest.fixture
def hold_whole_gpus(researcher, team):
    """Hold the free whole GPUs of a type (all, or `count`), one allocation each, as sandboxes would."""

    def hold(gpu_type, count: int | None = None) -> list[Allocation]:
        held = Allocation.objects.filter(released_at__isnull=True).values("gpu_id")
        gpus = Gpu.objects.filter(gpu_type=gpu_type, mig_enabled=False).exclude(pk__in=held).order_by("pk")
        gpus = gpus[:count] if count is not None else gpus
        return [
            Allocation.objects.create(
                gpu=gpu,
                team=team,
                user=researcher,
                gpu_type=gpu_type,
                price_per_hour=Decimal("6.88"),
                started_at="2026-01-02T00:00:00Z",
            )
            for gpu in gpus
        ]

    return hold


@pytest.fixture
def api(db, researcher) -> APIClient:
    """The researcher's API client, with a personal access token."""
    _, raw = token_create(user=researcher, name="tests")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def web(client, researcher):
    """The researcher signed in to the web UI."""
    client.force_login(researcher)
    return client
