"""The sandbox gate's endpoints: the ingress's forward-auth check (ingress-nginx, a Gateway's
ExternalAuth), the sign-in step that hands out one-time tickets, and the simulated cluster's
stand-in for a sandbox's app behind the same check. The decisions are in `portal.sandboxes.gate`."""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods

from portal.core.errors import DomainError
from portal.core.proxies import original_url, url_hostname
from portal.core.views import login_required
from portal.sandboxes.gate import (
    COOKIE,
    TICKET_PARAM,
    gate_decide,
    gate_door,
    gate_ticket_issue,
    ticket_in,
    with_ticket,
    without_ticket,
)
from portal.sandboxes.selectors import sandbox_inside


@require_http_methods(["GET", "HEAD"])
def sandbox_gate_check(request: HttpRequest) -> HttpResponse:
    """ingress-nginx's forward-auth check, before every request to every sandbox: 200 lets it
    through (naming the user in X-Portal-User), 401 sends the browser to sign in, 403 refuses."""
    return _gate_answer(original_url(request), request.COOKIES.get(COOKIE, ""))


@require_http_methods(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
@csrf_exempt
def sandbox_gate_external(request: HttpRequest, path: str = "") -> HttpResponse:
    """The same check for a Gateway's ExternalAuth filter, which sends the request's own method,
    host and path (under this prefix). Only a refusal reaches the browser (a 200's headers go
    to the sandbox), so the browser is sent to sign in from here, and a redeemed ticket answers
    with a redirect to the same address without it, carrying the gate cookie."""
    scheme = request.headers.get("X-Forwarded-Proto", "https")
    query = request.META.get("QUERY_STRING", "")
    url = f"{scheme}://{request.headers.get('Host', '')}/{path}" + (f"?{query}" if query else "")
    answer = _gate_answer(url, request.COOKIES.get(COOKIE, ""))
    browsing = request.method in ("GET", "HEAD")
    if answer.status_code == 401 and browsing:
        signin = f"{settings.PORTAL_BASE_URL}{reverse('sandbox-gate-signin')}"
        response = redirect(f"{signin}?{urlencode({'rd': without_ticket(url)})}")
    elif answer.status_code == 200 and COOKIE in answer.cookies and browsing:
        response = redirect(without_ticket(url))
        response.cookies = answer.cookies
    else:
        return answer
    response["Cache-Control"] = "no-store"
    return response


def _gate_answer(url: str, cookie: str) -> HttpResponse:
    decision = gate_decide(host=url_hostname(url), cookie=cookie, ticket=ticket_in(url))
    response = HttpResponse(decision.reason, status=decision.status, content_type="text/plain")
    if decision.username:
        response["X-Portal-User"] = decision.username
    if decision.cookie:
        response.set_cookie(
            COOKIE,
            decision.cookie,
            max_age=decision.cookie_seconds,
            secure=url.startswith("https://"),
            httponly=True,
            samesite="Lax",
        )
    response["Cache-Control"] = "no-store"
    # A refusal is this endpoint's everyday answer (every request of a browser not signed in
    # yet), not a client error worth a warning line each: keep django.request quiet about it.
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response


@login_required
@require_GET
def sandbox_gate_signin(request: HttpRequest) -> HttpResponse:
    """Where the ingress sends a browser without a gate cookie (`rd`: where it was going): a
    signed-in owner, or someone it is shared with, goes back with a one-time ticket."""
    target = request.GET.get("rd", "")
    simulated = _simulated_target(target)
    try:
        ticket = gate_ticket_issue(user=request.user, url=simulated or target)
    except DomainError as error:
        return render(request, "sandboxes/gate_refused.html", {"reason": error.message}, status=error.status)
    return redirect(with_ticket(target, ticket))


def _simulated_target(target: str) -> str:
    """For a simulated sandbox's portal path, the sandbox URL it stands for; else ""."""
    prefix = reverse("sandbox-simulated", args=["h"])[: -len("h/")]
    if not target.startswith(prefix):
        return ""
    host = target[len(prefix) :].split("/", 1)[0]
    return f"https://{host}/"


@require_GET
def sandbox_simulated(request: HttpRequest, host: str, path: str = "") -> HttpResponse:
    """A simulated sandbox's app, served by the portal behind the same gate as a real one: what
    the container would see. The gate cookie is kept to this sandbox's path."""
    here = reverse("sandbox-simulated", args=[host])
    ticket = request.GET.get(TICKET_PARAM, "")
    decision = gate_decide(host=host, cookie=request.COOKIES.get(COOKIE, ""), ticket=ticket)
    if decision.status == 401:
        signin = reverse("sandbox-gate-signin")
        return redirect(f"{signin}?{urlencode({'rd': without_ticket(request.get_full_path())})}")
    if decision.status != 200:
        return render(
            request, "sandboxes/gate_refused.html", {"reason": decision.reason}, status=decision.status
        )
    if decision.cookie:
        response = redirect(without_ticket(request.get_full_path()))
        response.set_cookie(
            COOKIE, decision.cookie, max_age=decision.cookie_seconds, path=here, httponly=True, samesite="Lax"
        )
        return response
    door = gate_door(host)
    assert door is not None
    inside = sandbox_inside(workload_id=door.workload_id, username=decision.username)
    return render(request, "sandboxes/simulated_app.html", {"inside": inside, "host": host, "path": path})
