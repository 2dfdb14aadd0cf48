"""Typed readers for environment variables.

Each helper refuses a malformed value with a message that names the variable, so a typo in a
deployment fails at start-up instead of surfacing later as odd behaviour.
"""

from __future__ import annotations

import ipaddress
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


def env_cidrs(name: str, default: str) -> tuple[str, ...]:
    """Comma-separated CIDRs, each checked (a typo stops the portal at start, not every sandbox)."""
    cidrs = tuple(part.strip() for part in env_str(name, default).split(",") if part.strip())
    for cidr in cidrs:
        try:
            ipaddress.ip_network(cidr)
        except ValueError as error:
            raise ConfigError(f"{name}: {cidr!r} is not a CIDR ({error})") from None
    return cidrs
