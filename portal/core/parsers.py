"""DRF's JSON parser with a nesting limit: no request body of this API is more than a few levels
deep, and one nested a thousand deep made the decoder raise RecursionError (a 500)."""

from __future__ import annotations

from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

MAX_JSON_DEPTH = 32


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        too_deep = ParseError(f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels.")
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise too_deep from None
        if nesting_exceeds(data, MAX_JSON_DEPTH):
            raise too_deep
        return data


def nesting_exceeds(value: Any, limit: int) -> bool:
    """Whether objects and arrays nest more than `limit` deep (walked without recursion)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False
