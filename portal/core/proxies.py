"""What the proxies in front say of a request: the address it came from (as far as the deployment
trusts them), and the URL an ingress's forward-auth subrequest asks about."""

from __future__ import annotations

from urllib.parse import urlsplit

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


def original_url(request: HttpRequest) -> str:
    """The URL an ingress's forward-auth check asks about: ingress-nginx's X-Original-URL, else
    the forwarded host and path a Gateway's ExternalAuth (Envoy, Traefik) sends; "" for neither."""
    original = request.headers.get("X-Original-URL", "")
    if original:
        return original
    host = request.headers.get("X-Forwarded-Host", "")
    if not host:
        return ""
    scheme = request.headers.get("X-Forwarded-Proto", "https")
    return f"{scheme}://{host}{request.headers.get('X-Forwarded-Uri', '/')}"


def url_hostname(url: str) -> str:
    """The lower-cased host of a URL without its port; "" for none or one that does not parse
    (`https://[x/`)."""
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""
