"""Shared fixtures: a small fleet, a team with a researcher and a lead, a second team, an admin.

Unit tests run on SQLite with Celery eager; jobs enqueued on commit run when the test's
`on_commit` callbacks are executed (see `run_jobs`).
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from celery import current_app

from portal.accounts.models import Membership
from tests.factories import (
    ClusterFactory,
    GpuTypeFactory,
    ImageFactory,
    MembershipFactory,
    PriceFactory,
    TeamFactory,
    UserFactory,
    make_node,
)


@pytest.fixture(autouse=True)
def _fast_simulation(request, settings):
    """Simulated pods start at once and jobs run in-process; integration tests keep a real broker."""
    from workers.drivers.factory import get_driver

    settings.PORTAL_SIM_POD_START_SECONDS = 0
    settings.PORTAL_SIM_MIG_RECONFIG_SECONDS = 0
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    previous = current_app.conf.task_always_eager
    current_app.conf.task_always_eager = request.node.get_closest_marker("integration") is None
    get_driver.cache_clear()
    yield
    current_app.conf.task_always_eager = previous
    get_driver.cache_clear()


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """Users are made by the dozen in tests; the production hasher would cost seconds each."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def run_jobs(django_capture_on_commit_callbacks):
    """Run the jobs a block enqueues (on commit), and the jobs those enqueue, until none are left."""

    class Runner:
        def __call__(self, action):
            result = None
            with django_capture_on_commit_callbacks(execute=True):
                result = action()
            return result

    return Runner()


@pytest.fixture
def h100(db):
    gpu_type = GpuTypeFactory(slug="h100-80gb", name="NVIDIA H100 80GB", memory_gb=80)
    PriceFactory(gpu_type=gpu_type, price_per_hour=Decimal("6.88"))
    return gpu_type


@pytest.fixture
def fleet(db, h100):
    """One node of 8 whole H100s and one of 8 MIG-enabled H100s."""
    cluster = ClusterFactory(name="test", driver="simulated")
    return {
        "whole": make_node(name="gpu-h100-a", gpu_type=h100, gpus=8, mig=False, cluster=cluster),
        "mig": make_node(name="gpu-h100-b", gpu_type=h100, gpus=8, mig=True, cluster=cluster),
    }


@pytest.fixture
def team(db):
    return TeamFactory(slug="vision", name="Vision", default_image=ImageFactory())


@pytest.fixture
def other_team(db):
    return TeamFactory(slug="nlp", name="NLP", default_image=ImageFactory())


@pytest.fixture
def researcher(team):
    user = UserFactory(username="alice", first_name="Alice")
    MembershipFactory(user=user, team=team, role=Membership.Role.RESEARCHER)
    return user


@pytest.fixture
def lead(team):
    user = UserFactory(username="bob", first_name="Bob")
    MembershipFactory(user=user, team=team, role=Membership.Role.LEAD)
    return user


@pytest.fixture
def other_researcher(other_team):
    user = UserFactory(username="carol")
    MembershipFactory(user=user, team=other_team, role=Membership.Role.RESEARCHER)
    return user


@pytest.fixture
def admin_user(db):
    return UserFactory(username="admin", is_staff=True, is_superuser=True)


@pytest.fixture
def slice_request():
    """Keyword arguments of a one-hour 1g.10gb request by the researcher's team."""
    return {
        "team": "vision",
        "name": "mig-small",
        "gpu_type": "h100-80gb",
        "mig_profile": "1g.10gb",
        "ttl_hours": 1,
    }
