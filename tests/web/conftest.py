"""Fixtures for the web pages: signed-in clients and sandboxes made directly as rows."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from itertools import count

import pytest
from django.test import Client
from django.utils import timezone

from portal.accounts.models import Team, User
from portal.fleet.models import Allocation, Gpu
from portal.workloads.models import Image, Workload, WorkloadState

HTMX = {"HTTP_HX_REQUEST": "true"}
_names = count(1)


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    """Page tests sign users in, not test hashing: a cheap hasher keeps them fast."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def researcher_client(researcher) -> Client:
    return signed_in(researcher)


@pytest.fixture
def lead_client(lead) -> Client:
    return signed_in(lead)


@pytest.fixture
def other_client(other_researcher) -> Client:
    return signed_in(other_researcher)


def make_sandbox(
    *,
    owner: User,
    team: Team,
    state: str = WorkloadState.RUNNING,
    name: str | None = None,
    gpu: Gpu | None = None,
    hours_ago: float = 2,
    price: Decimal = Decimal("6.88"),
    **fields: object,
) -> Workload:
    """A sandbox row in `state`; with `gpu`, holding it whole since `hours_ago` at `price` an hour."""
    now = timezone.now()
    gpu_type = gpu.gpu_type if gpu else fields.pop("gpu_type")
    sandbox = Workload.objects.create(
        name=name or f"box-{next(_names)}",
        team=team,
        owner=owner,
        image=team.default_image or Image.objects.first(),
        gpu_type=gpu_type,
        state=state,
        expires_at=now + timedelta(hours=6),
        node_name=gpu.node.name if gpu else "",
        queued_at=now - timedelta(hours=hours_ago),
        started_at=now - timedelta(hours=hours_ago) if gpu else None,
        **fields,
    )
    if gpu is not None:
        Allocation.objects.create(
            gpu=gpu,
            workload=sandbox,
            team=team,
            user=owner,
            gpu_type=gpu.gpu_type,
            price_per_hour=price,
            started_at=now - timedelta(hours=hours_ago),
        )
    return sandbox


@pytest.fixture
def whole_gpus(fleet) -> list[Gpu]:
    """The eight whole (non-MIG) H100s of the test fleet."""
    return list(Gpu.objects.filter(node=fleet["whole"]).order_by("index"))
