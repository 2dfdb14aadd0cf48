"""Reads every app shares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from django.db.models import Model, Q, QuerySet

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


def every_word_in(text: str, fields: Sequence[str]) -> Q:
    """Rows in which each word of `text` (split on spaces) is in one of `fields`, in any case, so
    that "llama 8b" finds "Llama 3.1 8B Instruct"; a text of no words matches every row."""
    match = Q()
    for word in text.split():
        in_any = Q()
        for field in fields:
            in_any |= Q(**{f"{field}__icontains": word})
        match &= in_any
    return match
