"""Sandbox pages: the dashboard, the request form with its live estimate, and the detail page."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_http_methods

from portal.accounts.selectors import recent_notifications, user_teams
from portal.core.errors import DomainError, NotFound
from portal.core.views import fragment, login_required, page, wants_fragment
from portal.fleet.selectors import share_rule_text
from portal.sandboxes.forms import SandboxRequestForm
from portal.sandboxes.selectors import dashboard_sandboxes, request_choices, sandbox_row_for, sandbox_rows
from portal.sandboxes.services import sandbox_estimate, sandbox_request
from portal.workloads.forms import ExtendForm
from portal.workloads.selectors import progress_steps, workload_audit_trail
from portal.workloads.views import workload_list_context


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
    return page(request, "sandboxes/request.html", {"form": form, "quota_rule": share_rule_text()})


@login_required
@require_GET
def sandbox_estimate_panel(request: HttpRequest) -> HttpResponse:
    """The live estimate for what the form holds now."""
    form = _request_form(request, request.GET)
    estimate = None
    if form.is_valid():
        try:
            estimate = sandbox_estimate(user=request.user, **form.service_kwargs())
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
        row = sandbox_row_for(user=request.user, workload_id=pk)
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
