"""A stateful fake Kubernetes API server for testing the Kubernetes driver over real HTTP."""

from tests.fakekube.server import FakeKube
from tests.fakekube.validation import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "FakeKube"]
