"""Deployment pages: the list, the deploy form with its GPU choices and live estimate, and the
detail page with its endpoint, replicas, scale, extend and terminate; and the endpoint check the
cluster's ingress asks before every request to a deployment's endpoint."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from portal.accounts.notifications import notifications_seen
from portal.accounts.selectors import owner_left_team, team_has_hf_token, user_teams
from portal.catalog.models import CatalogModel
from portal.catalog.selectors import catalog_entries, default_request, model_sizing
from portal.catalog.sizing import Sizing
from portal.core.errors import DomainError, NotFound
from portal.core.proxies import original_url, url_hostname
from portal.core.text import counted
from portal.core.views import fragment, login_required, page, part_of, wants_fragment
from portal.core.web import form_refused, run_service
from portal.deployments.forms import SIZING_FIELDS, DeployForm, ScaleForm, body_from_form, initial_from_body
from portal.deployments.gate import EndpointDecision, endpoint_decide, endpoint_door
from portal.deployments.idle import deployment_scale_back
from portal.deployments.selectors import (
    chosen_fit,
    dashboard_deployments,
    deploy_estimate,
    deployment_row_for,
    deployment_rows,
    served_model_name,
    simulated_serving,
)
from portal.deployments.services import deployment_request, deployment_request_body, deployment_scale
from portal.deployments.serving_stats import deployment_serving_now, runtime_label, serving_lines
from portal.deployments.simulated import StandInCall, stand_in_answer
from portal.workloads.forms import suggest_projects
from portal.workloads.live import events_version, nothing_changed, unchanged, workload_version
from portal.workloads.models import WorkloadKind
from portal.workloads.presets import presets_for
from portal.workloads.selectors import progress_steps
from portal.workloads.services import workload_keep, workload_scale_withdraw
from portal.workloads.views import (
    actions_changed,
    audit_trail_context,
    detail_panels,
    extend_form_for,
    form_prefill,
    panels_changed,
    save_form_as_preset,
    workload_id_or_404,
    workload_list_context,
)


@login_required
@require_GET
def deployments(request: HttpRequest) -> HttpResponse:
    """My deployments (or the team's, for leads and admins), refreshed while one is live. The
    table polls with its version: a poll when nothing changed is a 204 (portal.workloads.live)."""
    version = events_version(request.user)
    if wants_fragment(request) and unchanged(request, version):
        return nothing_changed()
    context = workload_list_context(request, listed=dashboard_deployments, rows=deployment_rows)
    context["live_version"] = version
    return page(
        request, "deployments/list.html", context, fragment="deployments/partials/deployment_table.html"
    )


def _prefill(request: HttpRequest) -> tuple[dict | None, str, str]:
    return form_prefill(
        request,
        kind=WorkloadKind.DEPLOYMENT,
        request_body=lambda pk: deployment_request_body(user=request.user, deployment_id=pk),
        initial_from_body=initial_from_body,
    )


def _deploy_form(
    request: HttpRequest,
    data: QueryDict | None = None,
    *,
    entries: list[CatalogModel] | None = None,
    prefill: dict | None = None,
    whole: bool = False,
) -> DeployForm:
    """The deploy form; `whole` when the page draws all of it (its project field offers the
    teams' labels), not for the parts the form refreshes as it is filled in."""
    initial = {"model": request.GET.get("model")} if data is None and request.GET.get("model") else None
    if prefill:
        initial = prefill
    teams = user_teams(request.user)
    form = DeployForm(
        data, initial=initial, teams=teams, entries=list(catalog_entries()) if entries is None else entries
    )
    if whole:
        suggest_projects(form, teams, request.user)
    return form


def _sizing(form: DeployForm) -> Sizing | None:
    """The chosen model sized at the form's precision, context and concurrency; what is wrong with
    them goes next to those fields."""
    entry = form.entry
    if entry is None:
        return None
    if form.is_bound:
        form.is_valid()
        if any(name in form.errors for name in (*SIZING_FIELDS, "model")):
            return None
        values = {name: form.cleaned_data.get(name) for name in SIZING_FIELDS}
    else:
        values = {name: form.initial.get(name) for name in SIZING_FIELDS}
    try:
        return model_sizing(slug=entry.slug, **values)
    except DomainError as error:
        form.add_service_errors(error)
        return None


@login_required
@require_http_methods(["GET", "POST"])
def deployment_new(request: HttpRequest) -> HttpResponse:
    """The deploy form (`?model=<slug>` preselects a model); a valid request goes to its page."""
    prefilled_from = preset_problem = ""
    preset_refused = False  # a preset asked for and not saved: its section opens again as filled
    if request.method == "POST":
        form = _deploy_form(request, request.POST, whole=True)
        if request.POST.get("save_preset"):
            form.fields["name"].required = False  # each request names itself
        sizing = _sizing(form)
        if request.POST.get("save_preset"):
            preset_refused = not (
                form.is_valid()
                and save_form_as_preset(
                    request, form, kind=WorkloadKind.DEPLOYMENT, body=body_from_form(form)
                )
            )
        elif form.is_valid():
            try:
                workload = deployment_request(user=request.user, **form.service_kwargs())
            except DomainError as error:
                form.add_service_errors(error)
            else:
                if request.POST.get("preset_name", "").strip():  # typed, then requested: saved too
                    save_form_as_preset(
                        request, form, kind=WorkloadKind.DEPLOYMENT, body=body_from_form(form)
                    )
                return redirect(workload)
        else:
            form.require_name()
    else:
        initial, prefilled_from, preset_problem = _prefill(request)
        form = _deploy_form(request, prefill=initial, whole=True)
        sizing = _sizing(form)
    form.set_gpu_choices(sizing)
    context = {
        "form": form,
        "sizing": sizing,
        "preset_refused": preset_refused,
        "prefilled_from": prefilled_from,
        "preset_problem": preset_problem,
        "presets": presets_for(user=request.user, kind=WorkloadKind.DEPLOYMENT),
    }
    return page(request, "deployments/new.html", context)


@login_required
@require_GET
@part_of("deployment-new")
def deployment_fits(request: HttpRequest) -> HttpResponse:
    """The GPU choice for the model, precision, context and concurrency in the form; when the model
    changed, its precision, context and concurrency fields too (out of band, at its defaults)."""
    data = request.GET.copy()
    entries = list(catalog_entries())
    entry = next((e for e in entries if e.slug == data.get("model")), None)
    model_changed = entry is not None and data.get("sized_model") != entry.slug
    if model_changed:
        defaults = default_request(entry)
        data["dtype"], data["context"] = defaults.precision, str(defaults.context)
        data["concurrency"], data["sized_model"] = str(defaults.concurrency), entry.slug
        data["gpu"] = ""
    form = _deploy_form(request, data, entries=entries)
    sizing = _sizing(form)
    form.set_gpu_choices(sizing)
    context = {"form": form, "sizing": sizing, "model_changed": model_changed}
    response = fragment(request, "deployments/partials/gpu_field.html", context)
    response["HX-Trigger-After-Swap"] = "estimate-refresh"
    return response


@login_required
@require_GET
@part_of("deployment-new")
def deployment_estimate_panel(request: HttpRequest) -> HttpResponse:
    """What the form holds now would cost per hour (all replicas) and whether a lead must approve."""
    form = _deploy_form(request, request.GET)
    sizing = _sizing(form)
    estimate = None
    if sizing is not None and form.is_valid():
        fit = chosen_fit(sizing.fits, form.cleaned_data.get("gpu") or "")
        if not sizing.fits:
            form.add_error(
                "gpu", "The model does not fit any GPU or MIG slice of the fleet at these settings."
            )
        elif fit is None:
            form.add_error("gpu", "That GPU no longer holds the model at these settings; pick another.")
        else:
            try:
                estimate = deploy_estimate(
                    user=request.user,
                    team=form.cleaned_data["team"],
                    fit=fit,
                    replicas=form.cleaned_data["replicas"],
                    lifetime_hours=form.lifetime_hours(),
                    ends_at=form.ends_at(),
                )
            except DomainError as error:
                form.add_service_errors(error)
    errors = [] if estimate is not None else form.labelled_errors()
    context = {"estimate": estimate, "errors": errors}
    if estimate is not None and form.entry.needs_token(form.cleaned_data["dtype"]):
        context["no_hf_token"] = not team_has_hf_token(form.cleaned_data["team"])
    return fragment(request, "deployments/partials/estimate.html", context)


@login_required
@require_GET
def deployment_detail(request: HttpRequest, number: int) -> HttpResponse:
    """One deployment: progress, endpoint and example, replica health and placement, cost. A
    poll when nothing changed is a 204, except while it serves (its figures move every poll)."""
    version = workload_version(request.user, number=number, kind=WorkloadKind.DEPLOYMENT)
    if wants_fragment(request) and unchanged(request, version):
        return nothing_changed()
    pk = workload_id_or_404(request, kind=WorkloadKind.DEPLOYMENT, number=number)
    if not wants_fragment(request):  # opened: its notices are read (the bell counts them after)
        notifications_seen(user=request.user, link=request.path)
    try:
        row = deployment_row_for(user=request.user, deployment_id=pk)
    except NotFound as error:
        raise Http404(error.message) from error
    workload = row.deployment
    panels = detail_panels(workload)
    context = {
        "live_version": version,
        **audit_trail_context(request, workload),
        "row": row,
        "deployment": workload,
        "steps": progress_steps(workload, row.approval),
        "scale_form": ScaleForm(initial={"replicas": workload.replicas}),
        "extend_form": extend_form_for(request, workload.pk, kind=WorkloadKind.DEPLOYMENT),
        "actions_changed": actions_changed(request, row.actions),
        "owner_left": owner_left_team(
            user=request.user, team_id=workload.team_id, owner_id=workload.owner_id
        ),
        "panels": panels,
        "panels_changed": panels_changed(request, panels),
    }
    if row.serving is not None and workload.started_at is not None and workload.is_live:
        label = runtime_label(row.serving.runtime)
        serving_now = deployment_serving_now(workload, now=timezone.now())
        lines = serving_lines(serving_now, runtime=label, task=row.serving.model.task)
        context.update(runtime_label=label, serving_lines=lines)
    return page(request, "deployments/detail.html", context, fragment="deployments/partials/detail_live.html")


@login_required
@require_POST
def deployment_scale_view(request: HttpRequest, number: int) -> HttpResponse:
    pk = workload_id_or_404(request, kind=WorkloadKind.DEPLOYMENT, number=number)
    form = ScaleForm(request.POST)
    if form_refused(request, form):
        return redirect("deployment-detail", number=number)
    replicas = form.cleaned_data["replicas"]
    workload = run_service(
        request, lambda: deployment_scale(user=request.user, deployment_id=pk, replicas=replicas)
    )
    if workload is not None and workload.replicas == replicas:
        messages.success(
            request,
            f"Scaling to {counted(replicas, 'replica')}."
            if replicas
            else "Scaling to zero: nothing runs or is billed.",
        )
    elif workload is not None:
        messages.info(
            request,
            f"Scaling to {counted(replicas, 'replica')} needs a lead's approval; a lead has been asked.",
        )
    return redirect("deployment-detail", number=number)


@login_required
@require_POST
def deployment_scale_withdraw_posted(request: HttpRequest, number: int) -> HttpResponse:
    """Withdraw the scale that waits for a lead; the replicas stay as they are."""
    pk = workload_id_or_404(request, kind=WorkloadKind.DEPLOYMENT, number=number)
    run_service(
        request,
        lambda: workload_scale_withdraw(user=request.user, workload_id=pk),
        success="Scale request withdrawn; the replicas stay as they are.",
    )
    return redirect("deployment-detail", number=number)


@login_required
@require_POST
def deployment_keep_posted(request: HttpRequest, number: int) -> HttpResponse:
    """Keep a deployment its GPUs' idleness was about to scale to zero."""
    pk = workload_id_or_404(request, kind=WorkloadKind.DEPLOYMENT, number=number)
    run_service(
        request,
        lambda: workload_keep(user=request.user, workload_id=pk, kind="deployment"),
        success="Kept: the idle clock starts again.",
    )
    return redirect("deployment-detail", number=number)


@login_required
@require_POST
def deployment_scale_back_posted(request: HttpRequest, number: int) -> HttpResponse:
    """Back to the replicas it had before idle reclaim scaled it to zero."""
    pk = workload_id_or_404(request, kind=WorkloadKind.DEPLOYMENT, number=number)
    workload = run_service(request, lambda: deployment_scale_back(user=request.user, deployment_id=pk))
    if workload is not None and workload.replicas:
        messages.success(request, f"Scaling back to {counted(workload.replicas, 'replica')}.")
    elif workload is not None:
        messages.info(request, "Scaling back needs a lead's approval; a lead has been asked.")
    return redirect("deployment-detail", number=number)


@require_http_methods(["GET", "HEAD"])
def endpoint_gate_check(request: HttpRequest) -> HttpResponse:
    """ingress-nginx's forward-auth check before every request to a deployment's endpoint: 200
    lets it through (naming the caller in X-Portal-User), 401 asks for a token, 403 refuses."""
    return _endpoint_answer(url_hostname(original_url(request)), request.headers.get("Authorization", ""))


@require_http_methods(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
@csrf_exempt
def endpoint_gate_external(request: HttpRequest, path: str = "") -> HttpResponse:
    """The same check for a Gateway's ExternalAuth filter, which sends the request's own method,
    host and headers, its path under this prefix."""
    return _endpoint_answer(
        url_hostname(f"//{request.headers.get('Host', '')}"), request.headers.get("Authorization", "")
    )


@require_http_methods(["GET", "HEAD", "POST"])
@csrf_exempt
def endpoint_simulated(request: HttpRequest, host: str, path: str = "") -> HttpResponse:
    """A simulated deployment's model server, answered by the portal behind the same check (the
    page's example calls it there), in the runtime's own shape and marked simulated."""
    host = host.lower()
    decision = endpoint_decide(host=host, authorization=request.headers.get("Authorization", ""))
    if decision.status != 200:
        return _decision_response(decision)
    door = endpoint_door(host)
    assert door is not None
    found = simulated_serving(door.workload_id)
    if found is None:
        raise Http404("No simulated deployment at this address.")
    workload, serving = found
    call = StandInCall(
        deployment=workload.number,
        caller=decision.username,
        method=request.method or "GET",
        path=f"/{path}",
        body=request.body,
    )
    answer = stand_in_answer(serving, served_model_name(serving), call)
    if answer.events:
        stream = "".join(f"data: {event}\n\n" for event in answer.events)
        return HttpResponse(stream, status=answer.status, content_type="text/event-stream")
    return JsonResponse(answer.body, status=answer.status)


def _endpoint_answer(host: str, authorization: str) -> HttpResponse:
    return _decision_response(endpoint_decide(host=host, authorization=authorization))


def _decision_response(decision: EndpointDecision) -> HttpResponse:
    response = HttpResponse(decision.reason, status=decision.status, content_type="text/plain")
    if decision.username:
        response["X-Portal-User"] = decision.username
    if decision.status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="gpu-portal"'
    response["Cache-Control"] = "no-store"
    # A refusal is this check's everyday answer, not a client error worth a warning line each.
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response
