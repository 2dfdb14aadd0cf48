"""Audit events as people read them on a page (portal/audit/words.py)."""

from __future__ import annotations

from django import template

from portal.audit import words

register = template.Library()


@register.filter
def action_words(action: str) -> str:
    return words.action_words(action or "")


@register.filter
def detail_words(detail: str) -> str:
    return words.detail_words(detail or "")
