"""pytest fixtures for the fake API server; import them into a test module explicitly:

from tests.fakekube.fixtures import fake_kube, kube_driver  # noqa: F401
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakekube.server import FakeKube
from workers.drivers.base import ClusterConfig
from workers.drivers.kubernetes import KubernetesDriver, KubernetesOptions


@pytest.fixture
def fake_kube() -> Iterator[FakeKube]:
    """A fresh fake cluster per test, listening on 127.0.0.1 on a free port."""
    with FakeKube() as fake:
        yield fake


@pytest.fixture
def kube_driver(fake_kube: FakeKube) -> KubernetesDriver:
    """The real driver and client, pointed at the fake over plain HTTP, with short timeouts."""
    config = ClusterConfig(name="fake", driver="kubernetes", api_url=fake_kube.url)
    return KubernetesDriver(config, KubernetesOptions(timeout=(2.0, 2.0), mig_config_settle_seconds=0))
