"""Words on a page: whether a row's label already says its key (then the key is not repeated)."""

from __future__ import annotations

from django import template

from portal.core import text

register = template.Library()


@register.filter
def says(label: object, key: object) -> bool:
    return text.says(str(label or ""), str(key or ""))
