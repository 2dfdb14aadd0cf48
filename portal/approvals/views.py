"""The approvals inbox: leads decide requests over their team's line, inline."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from portal.approvals.filters import ApprovalFilter
from portal.approvals.forms import DecisionForm
from portal.approvals.selectors import (
    approval_get_for,
    approval_rows,
    approvals_visible_to,
    pending_count_for,
    unread_count,
)
from portal.approvals.services import approval_decide
from portal.core.errors import DomainError, NotFound
from portal.core.views import fragment, login_required, page, part_of, wants_fragment
from portal.workloads.live import badges_version, events_version, nothing_changed, unchanged
from portal.workloads.models import Approval

PAGE_SIZE = 50
# the kinds as the filter names them: the stored values ("create", "extend") are no words for people
KIND_LABELS = [
    (Approval.Kind.CREATE, "New request"),
    (Approval.Kind.EXTEND, "Extension"),
    (Approval.Kind.SCALE, "Scale"),
]


@login_required
@require_GET
def inbox(request: HttpRequest) -> HttpResponse:
    """Pending requests by default; `?state=` for the history (empty for every state). The table
    polls with its version: a poll when nothing changed is a 204 (portal.workloads.live)."""
    version = events_version(request.user)
    if wants_fragment(request) and unchanged(request, version):
        return nothing_changed()
    data = request.GET.copy()
    data.setdefault("state", Approval.State.PENDING)
    approval_filter = ApprovalFilter(data, queryset=approvals_visible_to(request.user))
    page_obj = Paginator(approval_filter.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "filter": approval_filter,
        "state": data.get("state", ""),
        "states": Approval.State.choices,
        "kinds": KIND_LABELS,
        "page_obj": page_obj,
        "rows": approval_rows(list(page_obj.object_list), user=request.user),
        "live_version": version,
    }
    return page(request, "approvals/inbox.html", context, fragment="approvals/partials/approval_table.html")


@login_required
@require_POST
def approval_decide_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Approve or reject; htmx gets the decided row back and the pending badge out of band. A
    request the user may not see is a 404, whatever was posted."""
    try:
        approval_get_for(user=request.user, approval_id=pk)
    except NotFound as missing:
        raise Http404(missing.message) from missing
    form = DecisionForm(request.POST)
    error = ""
    if form.has_error("comment"):
        error = (
            f"A comment is at most 1,000 characters; this one has {len(request.POST.get('comment', '')):,}."
        )
    elif not form.is_valid():
        error = "Choose approve or reject."
    else:
        try:
            approval_decide(
                user=request.user, approval_id=pk, approve=form.approve, comment=form.cleaned_data["comment"]
            )
        except DomainError as failure:
            error = failure.message
    if not wants_fragment(request):
        if error:
            messages.error(request, error)
        else:
            messages.success(
                request, f"{'Approved' if form.approve else 'Rejected'}; the requester has been told."
            )
        return redirect("approvals")
    try:
        approval = approval_get_for(user=request.user, approval_id=pk)
    except NotFound as missing:
        raise Http404(missing.message) from missing
    row = approval_rows([approval], user=request.user)[0]
    context = {"row": row, "error": error, "comment": request.POST.get("comment", "") if error else ""}
    return fragment(request, "approvals/partials/approval_row.html", context)


@login_required
@require_GET
@part_of("dashboard")
def nav_badges(request: HttpRequest) -> HttpResponse:
    """The nav's poll on every page: the approvals and notifications badges, out of band, when
    their counts moved; a 204 when they did not (three small queries, nothing rendered)."""
    pending = pending_count_for(request.user)
    unread = unread_count(request.user)
    version = badges_version(pending=pending, unread=unread)
    if unchanged(request, version):
        return nothing_changed()
    context = {
        "nav_pending_approvals": pending,
        "nav_unread": unread,
        "nav_live_version": version,
        "fragment": True,
    }
    return render(request, "partials/nav_live.html", context)
