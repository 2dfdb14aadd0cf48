"""Errors as the API server sends them: a `Status` body with the HTTP code."""

from __future__ import annotations


class ApiError(Exception):
    """Raised inside the fake to answer a request with `code` and a real Status body."""

    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code = code
        self.body = status_body(code, reason, message, details)


def status_body(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    """A `Status` object as the API server sends with every error."""
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body
