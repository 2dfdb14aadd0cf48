"""The one family of domain errors services raise.

The REST exception handler and the web helper turn each into an HTTP status and a message a
person can act on; `code` is the stable machine-readable part of the API's error body.
"""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    status = 400
    code = "invalid"

    def __init__(self, message: str, *, fields: dict[str, Any] | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.fields = fields or {}
        if code:
            self.code = code


class ValidationFailed(DomainError):
    """Bad input: nothing was changed."""

    status = 400
    code = "invalid"


class QuotaExceeded(DomainError):
    status = 400
    code = "quota_exceeded"


class NotAllowed(DomainError):
    status = 403
    code = "forbidden"


class NotFound(DomainError):
    status = 404
    code = "not_found"


class Conflict(DomainError):
    """The object's state does not allow the action (e.g. extending a terminated sandbox)."""

    status = 409
    code = "conflict"
