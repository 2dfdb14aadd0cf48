"""`/metrics` for Prometheus: the bearer token PORTAL_METRICS_TOKEN (what a scrape config sends),
or a platform admin's session. Anyone else gets 401 or 403: the figures say who spends what."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from portal.observability.metrics import PortalCollector

_registry = CollectorRegistry(auto_describe=False)
_registry.register(PortalCollector())


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    sent = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    token = settings.PORTAL_METRICS_TOKEN
    allowed = bool(token) and hmac.compare_digest(sent.encode(), token.encode())
    if not allowed and request.user.is_authenticated:
        if not request.user.is_platform_admin:
            return HttpResponse("Only platform admins and Prometheus read the metrics.", status=403)
        allowed = True
    if not allowed:
        response = HttpResponse("Send the metrics token as a bearer token.", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(generate_latest(_registry), content_type=CONTENT_TYPE_LATEST)
