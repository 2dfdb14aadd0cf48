"""Words people read: a count with its noun in the right number, a length of time in minutes or
hours and minutes."""

from __future__ import annotations

import re
from decimal import Decimal
from math import ceil


def sentence(text: str) -> str:
    """`text` with its first letter upper case and the rest as written ("GPUs" stays "GPUs", where
    str.capitalize would write "gpus")."""
    return text[:1].upper() + text[1:]


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """ "1 whole GPU", "2 whole GPUs", "1 replica", "0 replicas"."""
    return f"{number} {noun if number == 1 else (plural or noun + 's')}"


def hours_words(hours: Decimal | float | int | None) -> str:
    """A length of time given in hours, as people read it: under an hour in minutes ("2 minutes",
    "30 minutes"), else in hours and minutes ("1 h", "48 h", "1 h 30 min")."""
    exact = Decimal(str(hours or 0)) * 60
    return minutes_words(max(1, round(exact)) if exact > 0 else 0)  # a few seconds read as a minute


def seconds_words(seconds: int | float) -> str:
    """A wait in seconds, rounded up to the minute: "1 minute", "45 minutes", "1 h 56 min", "2 h"."""
    return minutes_words(ceil(max(0, seconds) / 60))


def minutes_words(minutes: int) -> str:
    """ "30 minutes" under an hour, "1 h", "1 h 56 min" from an hour on."""
    if minutes < 60:
        return counted(minutes, "minute")
    whole, rest = divmod(minutes, 60)
    return f"{whole} h" if rest == 0 else f"{whole} h {rest} min"


def plain_number(value: Decimal | float | int) -> str:
    """A number without trailing zeros, with thousands separators: "16", "2.5", "1,000"."""
    return f"{Decimal(str(value)).normalize():,f}"


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9]+", text)


def says(label: str, key: str) -> bool:
    """Whether `label` already says `key`, word for word as written: "Persistent storage (homes)"
    says "storage"; "Alice Researcher" does not say the username "alice", nor "Vision" the slug
    "vision"."""
    label_words, key_words = _words(label), _words(key)
    if not key_words:
        return True
    size = len(key_words)
    return any(label_words[i : i + size] == key_words for i in range(len(label_words) - size + 1))
