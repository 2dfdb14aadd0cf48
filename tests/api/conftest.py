"""API fixtures: clients signed in with a real personal access token per user."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.utils import timezone
from rest_framework.test import APIClient

from portal.accounts.models import User
from portal.accounts.services import token_create
from portal.fleet.models import Allocation, Gpu
from portal.workloads.models import END_STATES, Workload


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    """Users are made with a password; the production hasher takes ~0.5 s per user."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _fresh_throttle():
    """Throttle counters live in the cache; start every test with none."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def client_for(db) -> Callable[[User], APIClient]:
    """An APIClient sending `Authorization: Bearer <token>` for a new token of the user."""

    def make(user: User) -> APIClient:
        _, raw = token_create(user=user, name="tests")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        return client

    return make


@pytest.fixture
def alice(client_for, researcher) -> APIClient:
    return client_for(researcher)


@pytest.fixture
def bob(client_for, lead) -> APIClient:
    return client_for(lead)


@pytest.fixture
def carol(client_for, other_researcher) -> APIClient:
    return client_for(other_researcher)


@pytest.fixture
def admin(client_for, admin_user) -> APIClient:
    return client_for(admin_user)


@pytest.fixture
def slice_body() -> dict:
    """A one-hour 1g.10gb request for team vision, as the API takes it."""
    return {
        "name": "mig-small",
        "team": "vision",
        "gpu": {"type": "h100-80gb", "mig_profile": "1g.10gb"},
        "ttl_hours": 1,
    }


@pytest.fixture
def big_body() -> dict:
    """Four whole H100s for two days: over the auto-approval line."""
    return {"name": "big-train", "team": "vision", "gpu": {"type": "h100-80gb", "count": 4}, "ttl_hours": 48}


def make_sandbox(*, owner, team, gpu_type, name: str, state: str = "terminated", **fields) -> Workload:
    """A sandbox row written directly (no services): for lists and figures with known values."""
    now = timezone.now()
    defaults = {
        "image": team.default_image,
        "expires_at": now + timedelta(hours=1),
        "ended_at": now if state in END_STATES else None,
    }
    return Workload.objects.create(
        owner=owner, team=team, gpu_type=gpu_type, name=name, state=state, **{**defaults, **fields}
    )


def make_hold(
    *,
    gpu: Gpu,
    user,
    team,
    started_at: datetime,
    ended_at: datetime | None,
    workload: Workload | None = None,
    mig_profile: str = "",
    share: tuple[int, int] = (1, 1),
    price: Decimal = Decimal("6.88"),
) -> Allocation:
    """An allocation with known times and price; released when it has ended."""
    return Allocation.objects.create(
        gpu=gpu,
        workload=workload,
        team=team,
        user=user,
        gpu_type=gpu.gpu_type,
        mig_profile=mig_profile,
        share_numerator=share[0],
        share_denominator=share[1],
        price_per_hour=price,
        started_at=started_at,
        ended_at=ended_at,
        released_at=ended_at,
    )
