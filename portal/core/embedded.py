"""The embedded portal (`make run`): what only it may do, because nobody but this machine reaches it.

It signs sessions with a public development key when SECRET_KEY is unset. That is safe only
while the portal answers on loopback alone: settings refuse the key when ALLOWED_HOSTS names any
other host, `runportal` refuses to bind anything but a loopback address, and the WSGI entry point
(gunicorn and every other server) refuses it outright.
"""

from __future__ import annotations

import ipaddress

from django.core.exceptions import ImproperlyConfigured

DEVELOPMENT_SECRET_KEY = "embedded-development-key-not-for-production"  # noqa: S105

# Host names that reach only this machine ("testserver" is the name Django's test client uses).
LOOPBACK_NAMES = frozenset({"localhost", "testserver"})

_serving_on_loopback = False


def is_loopback(host: str) -> bool:
    """A loopback address or name: 127.0.0.0/8, ::1 (bracketed or not), localhost."""
    host = host.strip().lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False


def non_loopback_hosts(hosts: list[str]) -> list[str]:
    """The hosts of ALLOWED_HOSTS that are not loopback (a wildcard or `.domain` counts as not)."""
    return [host for host in hosts if not is_loopback(host)]


def serve_on(addr: str) -> None:
    """Record that the embedded server binds `addr`; refuse one other machines could reach."""
    global _serving_on_loopback  # one flag per process, set once by runportal
    if not is_loopback(addr):
        raise ImproperlyConfigured(
            f"The portal runs on the public development key (SECRET_KEY is unset), so it serves on "
            f"loopback only, not on {addr!r}: set SECRET_KEY (and ALLOWED_HOSTS) to serve other machines."
        )
    _serving_on_loopback = True


def check_wsgi_key(secret_key: str) -> None:
    """Refuse to serve with the development key unless `runportal` serves on loopback."""
    if secret_key == DEVELOPMENT_SECRET_KEY and not _serving_on_loopback:
        raise ImproperlyConfigured(
            "SECRET_KEY is unset: the public development key is for the embedded portal on loopback "
            "(`make run`) only. Set SECRET_KEY to a long random string to serve the portal."
        )
