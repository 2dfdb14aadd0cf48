import pytest

from portal.catalog.demo import catalog_seed


@pytest.fixture
def catalog(db):
    catalog_seed()
