"""Reads every app shares."""

from __future__ import annotations

from typing import TypeVar

from django.db.models import Model, QuerySet

from portal.core.errors import NotFound

M = TypeVar("M", bound=Model)


def one_visible(queryset: QuerySet[M], *, pk: int, what: str, lock: bool = False) -> M:
    """The row `pk` of `queryset` (what the caller may see), locked if asked; else NotFound
    naming `what` ("approval", "sandbox"): a row the caller may not see is never "forbidden"."""
    if lock:
        queryset = queryset.select_for_update(of=("self",))
    found = queryset.filter(pk=pk).first()
    if found is None:
        raise NotFound(f"No {what} {pk} that you can see.")
    return found
