"""The OpenAPI schema's error responses, in one place: every operation documents the error shape
(`{"error": {"code", "message", "fields"}}`) for the statuses it can answer with, so a client
generated from the schema knows them. A drf-spectacular postprocessing hook."""

from __future__ import annotations

import re
from typing import Any

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "fields"],
            "properties": {
                "code": {
                    "type": "string",
                    "description": "invalid, quota_exceeded, not_found, conflict, ...",
                },
                "message": {"type": "string", "description": "What went wrong, for people."},
                "fields": {
                    "type": "object",
                    "description": "Per field (dotted keys, such as gpu.type): what is wrong with it.",
                    "additionalProperties": True,
                },
            },
        }
    },
}
MEANINGS = {
    "400": "Bad input (or a quota or policy refusal): nothing was changed.",
    "401": "No valid credentials (a bearer token or a session).",
    "403": "Signed in, but not allowed to do this.",
    "404": "No such object that you may see (or a page past the last).",
    "409": "The object's state does not allow this now.",
    "413": "The body is too large.",
    "429": "Too many requests: wait and try again.",
}
WRITES = {"post", "put", "patch", "delete"}


# Operations without a path parameter that still answer 404: the caller's home volume (none yet).
NOT_FOUND_TOO = {"/api/v1/home"}


def _finds_something(path: str, operation: dict) -> bool:
    """Whether the operation can find nothing: an object in its path, a page past the last, a
    team named in its query that the caller may not see."""
    query = {p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"}
    return "{" in path or path in NOT_FOUND_TOO or bool(query & {"page", "team"})


def _statuses(path: str, method: str, operation: dict) -> list[str]:
    public = operation.get("security") == [{}] or {} in operation.get("security", [])
    codes = ["400", "429"] + ([] if public else ["401", "403"])
    if _finds_something(path, operation):
        codes.append("404")
    if method in WRITES:
        codes.append("413")
        if "{" in path:
            codes.append("409")
    return codes


def add_error_responses(result: dict, generator: Any, request: Any, public: bool) -> dict:
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    body = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if method not in {"get", "head", "options", *WRITES}:
                continue
            responses = operation.setdefault("responses", {})
            for code in _statuses(path, method, operation):
                response = responses.setdefault(code, {"description": MEANINGS[code]})
                response.setdefault("content", body)
    return result


# drf-spectacular writes a decimal sent as a string as `^-?\d{0,P}(?:\.\d{0,S})?$`, which lets
# through "" and "-" (DRF refuses both): at least one digit, before or after the point.
_DECIMAL = re.compile(r"^\^-\?\\d\{0,(\d+)\}\(\?:\\\.\\d\{0,(\d+)\}\)\?\$$")


def _tighten(node: Any) -> None:
    if isinstance(node, dict):
        match = _DECIMAL.match(node.get("pattern", "")) if node.get("format") == "decimal" else None
        if match:
            whole, fraction = match.groups()
            node["pattern"] = rf"^-?(?:\d{{1,{whole}}}(?:\.\d{{0,{fraction}}})?|\.\d{{1,{fraction}}})$"
        for value in node.values():
            _tighten(value)
    elif isinstance(node, list):
        for value in node:
            _tighten(value)


def require_decimal_digits(result: dict, generator: Any, request: Any, public: bool) -> dict:
    """A drf-spectacular postprocessing hook: decimal strings' patterns say what DRF accepts."""
    _tighten(result)
    return result
