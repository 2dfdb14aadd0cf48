"""The web side's counterpart of the API exception handler."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import HttpRequest

from portal.core.errors import DomainError


def run_service(request: HttpRequest, action: Callable[[], Any], *, success: str | None = None) -> Any:
    """Call a service; show its domain error as a message instead of a 500. Returns the result or None."""
    try:
        result = action()
    except DomainError as error:
        messages.error(request, error.message)
        return None
    if success:
        messages.success(request, success)
    return result
