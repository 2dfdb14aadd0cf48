"""API rate limits counted in the cache every process shares (settings: CACHES["throttle"]).

DRF's throttles count in the default cache, which is each process's own memory without Redis:
with four gunicorn workers a user would get four times the limit.
"""

from __future__ import annotations

from django.core.cache import caches
from rest_framework import throttling


class SharedCountMixin:
    @property
    def cache(self):
        return caches["throttle"]


class UserRateThrottle(SharedCountMixin, throttling.UserRateThrottle):
    pass


class AnonRateThrottle(SharedCountMixin, throttling.AnonRateThrottle):
    pass
