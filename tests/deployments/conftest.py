import pytest

from portal.catalog.demo import catalog_seed
from portal.deployments.gate import endpoint_gate_cache_clear


@pytest.fixture
def catalog(db):
    catalog_seed()


@pytest.fixture(autouse=True)
def _fresh_endpoint_gate():
    """Each test starts and ends with the endpoint check's short-lived cache empty."""
    endpoint_gate_cache_clear()
    yield
    endpoint_gate_cache_clear()
