"""Sandbox pages: the dashboard, the request form with its live estimate, and the detail page; and
the list, extend and terminate steps the deployment pages share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from portal.accounts.selectors import lead_team_ids, user_teams
from portal.accounts.view_selectors import recent_notifications
from portal.core.errors import DomainError, NotFound
from portal.core.views import fragment, login_required, page, wants_fragment
from portal.core.web import run_service
from portal.sandboxes.filters import SandboxFilter
from portal.sandboxes.forms import QUOTA_RULE, ExtendForm, SandboxRequestForm
from portal.sandboxes.models import Sandbox, SandboxState, WorkloadKind
from portal.sandboxes.selectors import pending_extension
from portal.sandboxes.services import sandbox_estimate, sandbox_extend, sandbox_request, sandbox_terminate
from portal.sandboxes.view_selectors import (
    any_live,
    dashboard_sandboxes,
    progress_steps,
    request_choices,
    sandbox_row_for,
    sandbox_rows,
    workload_audit_trail,
)

PAGE_SIZE = 25


def workload_list_context(
    request: HttpRequest,
    *,
    listed: Callable[..., QuerySet[Sandbox]],
    rows: Callable[[list[Sandbox]], list[Any]],
) -> dict[str, Any]:
    """A list of sandboxes or deployments: the scope (mine, or the team's for leads and admins),
    the filter, one page of rows from `listed(user=, scope=)`, and whether to poll for changes."""
    user = request.user
    can_see_team = user.is_platform_admin or bool(lead_team_ids(user))
    scope = "team" if can_see_team and request.GET.get("scope") == "team" else "mine"
    workload_filter = SandboxFilter(request.GET, queryset=listed(user=user, scope=scope))
    page_obj = Paginator(workload_filter.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    workloads = list(page_obj.object_list)
    return {
        "scope": scope,
        "can_see_team": can_see_team,
        "filter": workload_filter,
        "states": SandboxState.choices,
        "page_obj": page_obj,
        "rows": rows(workloads),
        "polling": any_live(workloads),
    }


def workload_extend(request: HttpRequest, pk: int, *, kind: str) -> None:
    """Extend a sandbox or deployment by the posted hours; the outcome goes to the messages."""
    form = ExtendForm(request.POST)
    hours = form.cleaned_data["hours"] if form.is_valid() else request.POST.get("hours")
    workload = run_service(
        request, lambda: sandbox_extend(user=request.user, sandbox_id=pk, hours=hours, kind=kind)
    )
    if workload is None:
        return
    pending = pending_extension(workload)
    if pending is not None:
        messages.info(request, f"Sent to a lead: {pending.why_needed}")
    else:
        messages.success(request, f"Extended: it now expires {workload.expires_at:%Y-%m-%d %H:%M} UTC.")


def workload_terminate(request: HttpRequest, pk: int, *, kind: str) -> None:
    """End a sandbox or deployment now; the outcome goes to the messages."""
    run_service(
        request,
        lambda: sandbox_terminate(user=request.user, sandbox_id=pk, kind=kind),
        success=f"Ending the {kind}: billing stopped now.",
    )


@login_required
@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    """My sandboxes (or the team's, for leads and admins), and my notifications."""
    context = workload_list_context(request, listed=dashboard_sandboxes, rows=sandbox_rows)
    if not wants_fragment(request):
        context["notifications"] = recent_notifications(request.user)
    return page(
        request, "sandboxes/dashboard.html", context, fragment="sandboxes/partials/sandbox_table.html"
    )


def _request_form(request: HttpRequest, data: object = None) -> SandboxRequestForm:
    return SandboxRequestForm(data, teams=user_teams(request.user), choices=request_choices())


@login_required
@require_http_methods(["GET", "POST"])
def sandbox_new(request: HttpRequest) -> HttpResponse:
    """The request form; a valid request goes to its detail page."""
    if request.method == "POST":
        form = _request_form(request, request.POST)
        if form.is_valid():
            try:
                sandbox = sandbox_request(user=request.user, **form.service_kwargs())
            except DomainError as error:
                form.add_service_errors(error)
            else:
                return redirect("sandbox-detail", pk=sandbox.pk)
    else:
        form = _request_form(request)
    return page(request, "sandboxes/request.html", {"form": form, "quota_rule": QUOTA_RULE})


@login_required
@require_GET
def sandbox_estimate_panel(request: HttpRequest) -> HttpResponse:
    """The live estimate for what the form holds now."""
    form = _request_form(request, request.GET)
    estimate = None
    if form.is_valid():
        try:
            estimate = sandbox_estimate(user=request.user, **form.service_kwargs(for_estimate=True))
        except DomainError as error:
            form.add_service_errors(error)
    errors = [] if estimate is not None else form.labelled_errors()
    return fragment(request, "sandboxes/partials/estimate.html", {"estimate": estimate, "errors": errors})


@login_required
@require_GET
def sandbox_mig_profiles(request: HttpRequest) -> HttpResponse:
    """The MIG profile field for the chosen GPU type; the estimate refreshes once it is swapped."""
    form = _request_form(request, request.GET)
    response = fragment(request, "sandboxes/partials/mig_profile_field.html", {"form": form})
    response["HX-Trigger-After-Swap"] = "estimate-refresh"
    return response


@login_required
@require_GET
def sandbox_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One sandbox: its progress, placement, access, expiry and cost, refreshed while it lives."""
    try:
        row = sandbox_row_for(user=request.user, sandbox_id=pk)
    except NotFound as error:
        raise Http404(error.message) from error
    context = {
        "row": row,
        "sandbox": row.sandbox,
        "steps": progress_steps(row.sandbox, row.approval),
    }
    if not wants_fragment(request):
        context["extend_form"] = ExtendForm()
        context["audit_trail"] = workload_audit_trail(row.sandbox)
    return page(request, "sandboxes/detail.html", context, fragment="sandboxes/partials/detail_live.html")


@login_required
@require_POST
def sandbox_extend_view(request: HttpRequest, pk: int) -> HttpResponse:
    workload_extend(request, pk, kind=WorkloadKind.SANDBOX)
    return redirect("sandbox-detail", pk=pk)


@login_required
@require_POST
def sandbox_terminate_view(request: HttpRequest, pk: int) -> HttpResponse:
    workload_terminate(request, pk, kind=WorkloadKind.SANDBOX)
    return redirect("sandbox-detail", pk=pk)
