"""The one family of domain errors services raise.

The REST exception handler and the web helper turn each into an HTTP status and a message a
person can act on; `code` is the stable machine-readable part of the API's error body.
"""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """A rule said no: `message` for people, `fields` for the field errors, `code` for machines.
    Each kind names its HTTP status and code in its class line."""

    status = 400
    code = "invalid"

    def __init_subclass__(cls, *, status: int, code: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.status, cls.code = status, code

    def __init__(self, message: str, *, fields: dict[str, Any] | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.fields = fields or {}
        if code:
            self.code = code


class ValidationFailed(DomainError, status=400, code="invalid"):
    """Bad input: nothing was changed."""


class QuotaExceeded(DomainError, status=400, code="quota_exceeded"):
    """More than the team has left; `fields` says how much is left and how much was asked."""


class NotAllowed(DomainError, status=403, code="forbidden"):
    """The caller may see the object but not do this to it."""


class NotFound(DomainError, status=404, code="not_found"):
    """No such object that the caller may see (what they may not see is never "forbidden")."""


class Conflict(DomainError, status=409, code="conflict"):
    """The object's state does not allow the action (e.g. extending a terminated sandbox)."""
