"""Middleware of the portal's own."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


class FormAddressVisited:
    """A web address that only takes a form (a view under `require_POST`) opened in the browser,
    as a reload of the address a form came back with errors at, or a bookmark: a page that says so
    with the way back, not the empty 405 Django answers (which browsers show as a broken page).
    The API answers its own 405s, in its error shape."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code == 405
            and request.method in ("GET", "HEAD")
            and not request.path.startswith("/api/")
            and not response.content
        ):
            page = render(request, "405.html", status=405)
            page["Allow"] = response.get("Allow", "POST")
            return page
        return response
