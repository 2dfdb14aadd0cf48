"""The address a request came from, through the proxies the deployment says are in front."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str | None:
    """The client's address: with N trusted proxies (PORTAL_TRUSTED_PROXY_COUNT), the one the
    outermost proxy saw, N-th from the right of X-Forwarded-For (what a client writes there itself
    stands to the left and is ignored); with none, the peer address. DRF's throttles use the same
    rule (NUM_PROXIES)."""
    remote = request.META.get("REMOTE_ADDR") or None
    proxies = settings.PORTAL_TRUSTED_PROXY_COUNT
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies <= 0 or not forwarded:
        return remote
    addresses = [part.strip() for part in forwarded.split(",") if part.strip()]
    if not addresses:
        return remote
    return addresses[-min(proxies, len(addresses))]
