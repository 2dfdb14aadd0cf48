"""Shared fixtures: a small fleet, a team with a researcher and a lead, a second team, an admin,
API clients with a personal access token for each (`alice`, `bob`, `carol`, `admin`) and signed-in
web clients (`researcher_client`, `lead_client`, `other_client`). Rows with known values are made
with `tests/rows.py`.

Unit tests run on SQLite with Celery eager; jobs enqueued on commit run when the test's
`on_commit` callbacks are executed (see `run_jobs`). `make unit-pg` runs those that reach the
database again on PostgreSQL (`--database-tests-only`).
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable
from decimal import Decimal

import pytest
from celery import current_app
from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.db import BaseDatabaseCache
from django.test import Client
from rest_framework.test import APIClient

from portal.accounts.models import Membership, User
from portal.accounts.services import token_create
from portal.fleet.models import Gpu
from tests.browser_support import CHROMIUM
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

# What a run needs and may lack: the integration tests need PostgreSQL and Redis, the browser tests
# Chromium and Playwright, and any test run against a PostgreSQL DATABASE_URL (`make unit-pg`) needs
# that server. A test whose needs are missing is skipped with the reason, unless the variable of its
# kind is 1 (CI sets all three): then the run stops at once with that reason and fails.
REQUIRE_INTEGRATION = "PORTAL_REQUIRE_INTEGRATION"
REQUIRE_BROWSER = "PORTAL_REQUIRE_BROWSER"
REQUIRE_POSTGRES = "PORTAL_REQUIRE_POSTGRES"


def _postgres_problem() -> str | None:
    """Why the PostgreSQL server of DATABASE_URL cannot be used, if it points at one."""
    db = settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.postgresql":
        return None
    import psycopg

    where = f"{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}"
    try:  # the maintenance database: the test database is created from there
        psycopg.connect(
            host=db["HOST"] or None,
            port=db["PORT"] or None,
            user=db["USER"] or None,
            password=db["PASSWORD"] or None,
            dbname="postgres",
            connect_timeout=3,
        ).close()
    except psycopg.Error as error:
        return f"PostgreSQL at {where} (DATABASE_URL) is not reachable: {str(error).strip()}"
    return None


def _integration_problem() -> str | None:
    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        return "DATABASE_URL does not point at PostgreSQL (run `make integration`)"
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        return "CELERY_BROKER_URL does not point at Redis (run `make integration`)"
    problem = _postgres_problem()
    if problem:
        return problem
    import redis

    try:
        redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=2).ping()
    except redis.RedisError as error:
        return f"Redis at {settings.CELERY_BROKER_URL} is not reachable: {error}"
    return None


def _browser_problem() -> str | None:
    if not os.access(CHROMIUM, os.X_OK):
        return f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)"
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed (make install-dev)"
    return _postgres_problem()


# Fixtures through which a test reaches the database (pytest-django blocks it for any other test).
DATABASE_FIXTURES = {"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback"}


def pytest_addoption(parser):
    parser.addoption(
        "--database-tests-only",
        action="store_true",
        help="run only the tests that reach the database (`make unit-pg`: the others gave their answer on SQLite)",
    )


def _reaches_database(item: pytest.Item) -> bool:
    return bool(item.get_closest_marker("django_db")) or bool(
        DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
    )


@pytest.hookimpl(trylast=True)  # after `-m` has deselected: only the tests that will run count
def pytest_collection_modifyitems(config, items):
    if config.getoption("--database-tests-only"):
        others = [item for item in items if not _reaches_database(item)]
        if others:
            config.hook.pytest_deselected(items=others)
            items[:] = [item for item in items if _reaches_database(item)]
    # The longest first: pytest-xdist hands tests out in this order, and one started last would
    # keep one worker busy for its whole length after the others had finished.
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
    kinds = {
        "integration": (REQUIRE_INTEGRATION, _integration_problem),
        "browser": (REQUIRE_BROWSER, _browser_problem),
        "unit": (REQUIRE_POSTGRES, _postgres_problem),
    }
    by_kind: dict[str, list[pytest.Item]] = {}
    for item in items:
        kind = next((k for k in ("integration", "browser") if item.get_closest_marker(k)), "unit")
        by_kind.setdefault(kind, []).append(item)
    for kind, selected in by_kind.items():
        variable, find_problem = kinds[kind]
        problem = find_problem()
        if problem is None:
            continue
        if os.environ.get(variable) == "1":
            raise pytest.UsageError(f"the {kind} tests must run ({variable}=1), but {problem}")
        skip = pytest.mark.skip(reason=f"{problem} (with {variable}=1 this fails the run)")
        for item in selected:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fast_simulation(request, settings):
    """Simulated pods start at once and jobs run in-process; integration tests keep a real broker."""
    from workers.drivers.factory import get_driver

    settings.PORTAL_SIM_POD_START_SECONDS = 0
    settings.PORTAL_SIM_MIG_RECONFIG_SECONDS = 0
    settings.PORTAL_MIG_CONFIG_SETTLE_SECONDS = 0  # the fake MIG manager's mounted file is refreshed by tests
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
def dynamic_mig(fleet):
    """The fleet's cluster cuts MIG slices one by one ("dynamic"), beside slices in use."""
    fleet["mig"].cluster.__class__.objects.filter(pk=fleet["mig"].cluster_id).update(mig_mode="dynamic")
    return fleet


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


@pytest.fixture(autouse=True)
def _fresh_throttle():
    """API throttle counters live in a cache (CACHES["throttle"]); start every test with none. A
    database cache needs no clearing: its rows roll back with the test."""
    memories = [
        caches[alias] for alias in settings.CACHES if not isinstance(caches[alias], BaseDatabaseCache)
    ]
    for memory in memories:
        memory.clear()
    yield
    for memory in memories:
        memory.clear()


@pytest.fixture
def whole_gpus(fleet) -> list[Gpu]:
    """The eight whole (non-MIG) H100s of the test fleet."""
    return list(Gpu.objects.filter(node=fleet["whole"]).order_by("index"))


# API clients: each sends `Authorization: Bearer <token>` for a new personal access token.


@pytest.fixture
def client_for(db) -> Callable[[User], APIClient]:
    """An APIClient sending `Authorization: Bearer <token>` for a new token of the user."""

    def make(user: User) -> APIClient:
        _, raw = token_create(user=user, name="tests", scope="admin")  # all the user may do
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


# Web clients: signed in with a session (pytest-django's `admin_client` signs in `admin_user`).


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def bearer(raw: str) -> APIClient:
    """An API client that sends `Authorization: Bearer <raw>`."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def token_client(user: User, scope: str) -> APIClient:
    """An API client with a new token of `user` of this scope."""
    _, raw = token_create(user=user, name=f"t-{scope}", scope=scope)
    return bearer(raw)


def field_html(page: str, name: str) -> str:
    """The markup of one form field's block (partials/field.html), errors included."""
    match = re.search(rf'id="field-{name}">(.*?)(?=<div class="field|</fieldset>|<details)', page, re.S)
    assert match, f"no field {name}"
    return match.group(1)


@pytest.fixture
def researcher_client(researcher) -> Client:
    return signed_in(researcher)


@pytest.fixture
def lead_client(lead) -> Client:
    return signed_in(lead)


@pytest.fixture
def other_client(other_researcher) -> Client:
    return signed_in(other_researcher)
