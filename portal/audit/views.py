"""The audit page: who did what, filterable; leads see their teams, admins everything."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.views.decorators.http import require_GET

from portal.audit.exports import audit_export
from portal.audit.filters import AuditEventFilter
from portal.audit.forms import style_audit_filter
from portal.audit.selectors import audit_events_visible_to, audit_log_allowed, audit_object_urls
from portal.core.views import login_required, page

PAGE_SIZE = 50


@login_required
@require_GET
def audit(request: HttpRequest) -> HttpResponse:
    user = request.user
    if not audit_log_allowed(user):
        raise PermissionDenied("The audit log is for team leads and platform admins.")
    event_filter = AuditEventFilter(request.GET, queryset=audit_events_visible_to(user))
    style_audit_filter(event_filter.form)
    page_obj = Paginator(event_filter.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    export_query = request.GET.copy()
    export_query.pop("page", None)
    page_obj.object_list = audit_object_urls(page_obj.object_list)
    context = {"filter": event_filter, "page_obj": page_obj, "export_query": export_query.urlencode()}
    return page(request, "audit/audit.html", context, fragment="audit/partials/audit_table.html")


@login_required
@require_GET
def audit_download(request: HttpRequest) -> HttpResponse:
    """The audit page's events (same filters, same visibility, every page) as a CSV download."""
    user = request.user
    if not audit_log_allowed(user):
        raise PermissionDenied("The audit log is for team leads and platform admins.")
    params = request.GET.copy()
    params.pop("page", None)
    event_filter = AuditEventFilter(params, queryset=audit_events_visible_to(user))
    if not event_filter.is_valid():
        errors = "; ".join(
            f"{name}: {error}" for name, messages in event_filter.errors.items() for error in messages
        )
        return HttpResponseBadRequest(errors, content_type="text/plain; charset=utf-8")
    return audit_export(user=user, events=event_filter.qs)
