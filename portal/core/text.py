"""Words people read: a count with its noun in the right number."""

from __future__ import annotations


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """ "1 whole GPU", "2 whole GPUs", "1 replica", "0 replicas"."""
    return f"{number} {noun if number == 1 else (plural or noun + 's')}"
