"""Typed readers for environment variables.

Each helper refuses a malformed value with a message that names the variable, so a typo in a
deployment fails at start-up instead of surfacing later as odd behaviour.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Sequence


class ConfigError(ValueError):
    """A setting read from the environment is malformed."""


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{name} must be true or false (got {raw!r})")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number (got {raw!r})") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name} must be at least {minimum} (got {value})")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number (got {raw!r})") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name} must be at least {minimum} (got {value})")
    return value


def env_choice(name: str, default: str, choices: Sequence[str]) -> str:
    value = os.environ.get(name) or default
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)} (got {value!r})")
    return value


def env_list(name: str, default: Sequence[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """A header name such as X-Forwarded-Proto (empty: none) as Django's SECURE_PROXY_SSL_HEADER:
    a request carrying it with the value `https` came to the proxy over HTTPS."""
    raw = env_str(name, "").strip()
    if not raw:
        return None
    if not all(part.isalnum() for part in raw.split("-")):
        raise ConfigError(f"{name} must be a header name such as X-Forwarded-Proto (got {raw!r})")
    return ("HTTP_" + raw.upper().replace("-", "_"), "https")


def env_cidrs(name: str, default: str) -> tuple[str, ...]:
    """Comma-separated CIDRs, each checked (a typo stops the portal at start, not every sandbox)."""
    cidrs = tuple(part.strip() for part in env_str(name, default).split(",") if part.strip())
    for cidr in cidrs:
        try:
            ipaddress.ip_network(cidr)
        except ValueError as error:
            raise ConfigError(f"{name}: {cidr!r} is not a CIDR ({error})") from None
    return cidrs


# Volume sources a model repository may come from, and the Pod Security level each needs:
# restricted admits inline CSI volumes, an NFS export needs baseline. (Not a generic ephemeral
# volume: it is a claim, and serving namespaces' quota admits none.)
MODEL_VOLUME_KINDS = {"csi": "restricted", "nfs": "baseline"}


def env_volume_source(name: str, *, pod_security_level: str) -> dict:
    """A Kubernetes volume source as JSON (empty: none), of a kind the pods' Pod Security level admits."""
    raw = env_str(name, "").strip()
    if not raw:
        return {}
    try:
        source = json.loads(raw)
    except ValueError as error:
        raise ConfigError(f"{name}: not JSON ({error})") from None
    if not isinstance(source, dict) or len(source) != 1:
        raise ConfigError(f'{name} must be one volume source, such as {{"csi": {{...}}}} (got {raw!r})')
    (kind,) = source
    if kind not in MODEL_VOLUME_KINDS or not isinstance(source[kind], dict):
        raise ConfigError(
            f"{name}: the volume source must be one of {', '.join(MODEL_VOLUME_KINDS)} (got {kind!r})"
        )
    if MODEL_VOLUME_KINDS[kind] == "baseline" and pod_security_level == "restricted":
        raise ConfigError(
            f"{name}: Pod Security 'restricted' refuses {kind} volumes: use a CSI driver, "
            "or set PORTAL_POD_SECURITY_LEVEL=baseline"
        )
    return source
