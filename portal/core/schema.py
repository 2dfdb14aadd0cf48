"""The OpenAPI schema's error responses, in one place: every operation documents the error shape
(`{"error": {"code", "message", "fields"}}`) for the statuses it can answer with, so a client
generated from the schema knows them. A drf-spectacular postprocessing hook."""

from __future__ import annotations

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
    "404": "No such object that you may see.",
    "409": "The object's state does not allow this now.",
    "413": "The body is too large.",
    "429": "Too many requests: wait and try again.",
}
WRITES = {"post", "put", "patch", "delete"}


def _statuses(path: str, method: str, operation: dict) -> list[str]:
    public = operation.get("security") == [{}] or {} in operation.get("security", [])
    codes = ["400", "429"] + ([] if public else ["401", "403"])
    if "{" in path:
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
