"""What every web view shares: one response for the full page and for its htmx fragment."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import wraps
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.shortcuts import redirect, render, resolve_url
from django.templatetags.static import static
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views import defaults

from portal.core.api import error_body, refused_request_error


def wants_fragment(request: HttpRequest) -> bool:
    """An htmx request for part of a page (not a boosted link nor a history restore)."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.boosted and not htmx.history_restore_request


def login_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Django's login_required, except that an htmx request (a poll, say) of a signed-out user
    sends the whole window to the sign-in page instead of swapping it into a fragment."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.user.is_authenticated:
            return view(request, *args, **kwargs)
        if getattr(request, "htmx", None):
            next_path = request.htmx.current_url_abs_path or request.get_full_path()
            response = HttpResponse(status=204)
            response["HX-Redirect"] = f"{resolve_url(settings.LOGIN_URL)}?{urlencode({'next': next_path})}"
            return response
        return redirect_to_login(request.get_full_path())

    return wrapper


def part_of(page_name: str) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """For a GET that answers part of a page to htmx: opened on its own (a copied address, a
    reload of one), it sends the browser to the page that holds the part, not a bare fragment."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method == "GET" and not getattr(request, "htmx", None):
                return redirect(page_name)
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


def page(
    request: HttpRequest,
    template: str,
    context: Mapping[str, Any] | None = None,
    *,
    fragment: str | None = None,
    status: int = 200,
) -> HttpResponse:
    """Render `template`, or only `fragment` for htmx; a fragment carries the nav badges out of band."""
    data = dict(context or {})
    if fragment is not None and wants_fragment(request):
        data["fragment"] = True
        return render(request, fragment, data, status=status)
    return render(request, template, data, status=status)


def fragment(
    request: HttpRequest, template: str, context: Mapping[str, Any] | None = None, *, status: int = 200
) -> HttpResponse:
    """Render a partial as the answer to an htmx action, with the nav badges and messages out of band.
    A GET's (a poll, a section the page loads) leaves the messages shown alone: it would wipe the
    flash of the action that led to the page (what it adds waits for the next page)."""
    acted = request.method not in ("GET", "HEAD")
    return render(
        request, template, {**(context or {}), "fragment": True, "oob_messages": acted}, status=status
    )


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler400: on API paths the API's error shape (a body too large is a 413), else Django's page.

    Django answers with this a request it refuses outside a view (a body too large or with too many
    fields read by a middleware, a host not allowed); the API's views answer their own.
    """
    if request.path.startswith("/api/"):
        body, status = refused_request_error(exception) or (
            error_body("bad_request", "The request was refused as malformed."),
            400,
        )
        return JsonResponse(body, status=status)
    return defaults.bad_request(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler404: an API path that names no route (an id that is not a number, a slug with a
    character a slug cannot hold) is a 404 in the API's error shape; elsewhere the portal's page."""
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("not_found", "No such API endpoint or object."), status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: on API paths the API's error shape, so a client reads it as it reads any
    error; elsewhere templates/500.html, which needs no database."""
    if request.path.startswith("/api/"):
        message = "The portal failed on its side and the error was logged. Try again; if it keeps happening, tell the platform team."
        return JsonResponse(error_body("server_error", message), status=500)
    return defaults.server_error(request)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: a form posted from a page older than the sign-in (or without the cookie)
    gets the portal's page, with the way back to the page it came from, not Django's."""
    referer = request.headers.get("Referer", "")
    back = "/"
    if referer and url_has_allowed_host_and_scheme(referer, allowed_hosts={request.get_host()}):
        came_from = urlsplit(referer)
        back = (came_from.path or "/") + (f"?{came_from.query}" if came_from.query else "")
    return render(request, "403_csrf.html", {"back": back}, status=403)


def favicon(request: HttpRequest) -> HttpResponse:
    """/favicon.ico, which browsers ask for on pages that name no icon (the browsable API's):
    the portal's icon, not a 404 in every console."""
    return HttpResponsePermanentRedirect(static("favicon.svg"))
