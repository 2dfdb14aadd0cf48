"""Sandbox pages: the dashboard, the request form with its live estimate, the detail page and
its panels (events and log, kubectl), sharing and restart."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from portal.accounts.models import User
from portal.accounts.notifications import notifications_seen
from portal.accounts.selectors import owner_left_team, recent_notifications, team_members, user_teams
from portal.accounts.ssh_keys import ssh_keys_of
from portal.core.errors import DomainError, NotAllowed, NotFound
from portal.core.views import fragment, login_required, page, part_of, wants_fragment
from portal.core.web import run_service
from portal.fleet.selectors import share_rule_text
from portal.sandboxes.forms import SandboxRequestForm, body_from_form, initial_from_body
from portal.sandboxes.selectors import (
    dashboard_sandboxes,
    home_size_gb,
    kube_access_of,
    kube_access_usable,
    kubeconfig_text,
    request_choices,
    sandbox_home_facts,
    sandbox_insight_for,
    sandbox_kube_access_for,
    sandbox_row_for,
    sandbox_rows,
    sandboxes_shared_with,
    ssh_image_without_keys,
)
from portal.sandboxes.services import (
    sandbox_estimate,
    sandbox_insight_request,
    sandbox_kube_access_request,
    sandbox_request,
    sandbox_request_body,
    sandbox_restart,
    sandbox_share,
)
from portal.workloads.forms import suggest_projects
from portal.workloads.live import events_version, nothing_changed, unchanged, workload_version
from portal.workloads.models import Workload, WorkloadKind, WorkloadState
from portal.workloads.presets import presets_for
from portal.workloads.selectors import progress_steps
from portal.workloads.services import sandbox_keep
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
def dashboard(request: HttpRequest) -> HttpResponse:
    """My sandboxes (or the team's, for leads and admins), and my notifications. The table polls
    with its version: a poll when nothing changed is a 204 (portal.workloads.live)."""
    version = events_version(request.user)
    if wants_fragment(request) and unchanged(request, version):
        return nothing_changed()
    context = workload_list_context(request, listed=dashboard_sandboxes, rows=sandbox_rows)
    context["live_version"] = version
    if not wants_fragment(request):
        context["notifications"] = recent_notifications(request.user)
        context["shared_with_me"] = sandbox_rows(list(sandboxes_shared_with(request.user)))
        context["in_no_team"] = not request.user.is_platform_admin and not user_teams(request.user)
    return page(
        request, "sandboxes/dashboard.html", context, fragment="sandboxes/partials/sandbox_table.html"
    )


def _request_form(
    request: HttpRequest, data: object = None, initial: dict | None = None, *, whole: bool = False
) -> SandboxRequestForm:
    """The request form; `whole` when the page draws all of it (its storage help names the size
    of the user's home, its project field offers the teams' labels), not for the estimate and
    MIG-profile parts the form refreshes as it is filled in."""
    teams = user_teams(request.user)
    home_gb = home_size_gb(request.user) if whole else None
    form = SandboxRequestForm(
        data, initial=initial, teams=teams, choices=request_choices(teams), home_gb=home_gb
    )
    if whole:
        suggest_projects(form, teams, request.user)
    return form


def _prefill(request: HttpRequest) -> tuple[dict | None, str, str]:
    return form_prefill(
        request,
        kind=WorkloadKind.SANDBOX,
        request_body=lambda pk: sandbox_request_body(user=request.user, sandbox_id=pk),
        initial_from_body=initial_from_body,
    )


@login_required
@require_http_methods(["GET", "POST"])
def sandbox_new(request: HttpRequest) -> HttpResponse:
    """The request form; a valid request goes to its detail page."""
    preset_refused = False  # a preset asked for and not saved: its section opens again as filled
    if request.method == "POST":
        form = _request_form(request, request.POST, whole=True)
        prefilled_from = ""
        if request.POST.get("save_preset"):
            form.fields["name"].required = False  # each request names itself
            preset_refused = not (
                form.is_valid()
                and save_form_as_preset(request, form, kind=WorkloadKind.SANDBOX, body=body_from_form(form))
            )
        elif form.is_valid():
            try:
                sandbox = sandbox_request(user=request.user, **form.service_kwargs())
            except DomainError as error:
                form.add_service_errors(error)
            else:
                if request.POST.get("preset_name", "").strip():  # typed, then requested: saved too
                    save_form_as_preset(request, form, kind=WorkloadKind.SANDBOX, body=body_from_form(form))
                return redirect(sandbox)
        else:
            form.require_name()
        preset_problem = ""
    else:
        initial, prefilled_from, preset_problem = _prefill(request)
        form = _request_form(request, initial=initial, whole=True)
    context = {
        "form": form,
        "preset_refused": preset_refused,
        "quota_rule": share_rule_text(),
        "prefilled_from": prefilled_from,
        "preset_problem": preset_problem,
        "presets": presets_for(user=request.user, kind=WorkloadKind.SANDBOX),
    }
    return page(request, "sandboxes/request.html", context)


@login_required
@require_GET
@part_of("sandbox-new")
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
    context = {"estimate": estimate, "errors": errors, "ssh_without_keys": _ssh_without_keys(request, form)}
    return fragment(request, "sandboxes/partials/estimate.html", context)


def _ssh_without_keys(request: HttpRequest, form: SandboxRequestForm) -> bool:
    if not form.is_valid():
        return False
    return ssh_image_without_keys(
        user=request.user,
        team_slug=form.cleaned_data.get("team") or "",
        image_slug=form.cleaned_data.get("image") or "",
    )


@login_required
@require_GET
@part_of("sandbox-new")
def sandbox_mig_profiles(request: HttpRequest) -> HttpResponse:
    """The MIG profile field for the chosen GPU type; the estimate refreshes once it is swapped."""
    form = _request_form(request, request.GET)
    response = fragment(request, "sandboxes/partials/mig_profile_field.html", {"form": form})
    response["HX-Trigger-After-Swap"] = "estimate-refresh"
    return response


@login_required
@require_GET
def sandbox_detail(request: HttpRequest, number: int) -> HttpResponse:
    """One sandbox: its progress, placement, access, expiry and cost, refreshed while it lives
    (a poll when nothing changed is a 204; one that renders carries the audit trail too)."""
    version = workload_version(request.user, number=number, kind=WorkloadKind.SANDBOX)
    if wants_fragment(request) and unchanged(request, version):
        return nothing_changed()
    pk = workload_id_or_404(request, kind=WorkloadKind.SANDBOX, number=number)
    if not wants_fragment(request):  # opened: its notices are read (the bell counts them after)
        notifications_seen(user=request.user, link=request.path)
    try:
        row = sandbox_row_for(user=request.user, workload_id=pk)
    except NotFound as error:
        raise Http404(error.message) from error
    panels = detail_panels(row.sandbox)
    context = {
        "live_version": version,
        **audit_trail_context(request, row.sandbox),
        "row": row,
        "sandbox": row.sandbox,
        "steps": progress_steps(row.sandbox, row.approval),
        "extend_form": extend_form_for(request, row.sandbox.pk, kind=WorkloadKind.SANDBOX),
        "actions_changed": actions_changed(request, row.actions),
        "panels": panels,
        "panels_changed": panels_changed(request, panels),
    }
    if not wants_fragment(request) or context["panels_changed"]:
        context.update(_panels_context(request, row.sandbox, owner_in=row.viewer_opens))
    return page(request, "sandboxes/detail.html", context, fragment="sandboxes/partials/detail_live.html")


def _panels_context(request: HttpRequest, sandbox: Workload, *, owner_in: bool) -> dict:
    """What the panels below the live card show that the card does not: /home, and for its owner
    sharing while it lives and kubectl access while it runs. `owner_in`: whether the one looking
    owns it and is still in its team (or an admin), as the gate lets them in."""
    home_note, lends_home = sandbox_home_facts(sandbox)
    context: dict = {"home_note": home_note, "lends_home": lends_home}
    web_app = not sandbox.is_ssh_sandbox  # ssh: the owner's keys only
    owner = sandbox.owner_id == request.user.pk
    owner_in = owner_in and owner
    if owner and sandbox.is_live and web_app:
        shared = list(sandbox.shared_with.all())
        context["shared_ids"] = {user.pk for user in shared}
        if owner_in:
            context["share_choices"] = [m for m in team_members(sandbox.team) if m.pk != request.user.pk]
        elif shared:  # an owner who left the team may stop sharing it, not share it more
            context["share_choices"], context["sharing_owner_left"] = shared, True
    if owner_in and sandbox.state == WorkloadState.RUNNING:
        access = kube_access_of(sandbox, request.user)
        context["kubectl_panel"] = {"access": access, "usable": kube_access_usable(access, sandbox)}
        context["ssh_key_count"] = _ssh_key_count(request.user, sandbox)
        context["ssh_login"] = _ssh_login(sandbox)
    return context


@login_required
@require_POST
def sandbox_share_posted(request: HttpRequest, number: int) -> HttpResponse:
    """The owner's choice of team members who may open the sandbox too."""
    pk = workload_id_or_404(request, kind=WorkloadKind.SANDBOX, number=number)
    sandbox = run_service(
        request,
        lambda: sandbox_share(user=request.user, sandbox_id=pk, usernames=request.POST.getlist("users")),
    )
    if sandbox is not None:
        names = ", ".join(sorted(user.username for user in sandbox.shared_with.all()))
        left = owner_left_team(user=request.user, team_id=sandbox.team_id, owner_id=sandbox.owner_id)
        nobody = "Shared with nobody." if left else "Shared with nobody: only you can open it."
        messages.success(request, f"Shared with {names}." if names else nobody)
    return redirect("sandbox-detail", number=number)


@login_required
@require_POST
def sandbox_keep_posted(request: HttpRequest, number: int) -> HttpResponse:
    """Keep a sandbox its GPUs' idleness was about to end."""
    pk = workload_id_or_404(request, kind=WorkloadKind.SANDBOX, number=number)
    run_service(
        request,
        lambda: sandbox_keep(user=request.user, sandbox_id=pk),
        success="Kept: the idle clock starts again.",
    )
    return redirect("sandbox-detail", number=number)


@login_required
@require_POST
def sandbox_restart_posted(request: HttpRequest, number: int) -> HttpResponse:
    """A new pod on the same placement, the home kept."""
    pk = workload_id_or_404(request, kind=WorkloadKind.SANDBOX, number=number)
    run_service(
        request,
        lambda: sandbox_restart(user=request.user, sandbox_id=pk),
        success="Restarting: a new pod starts on the same GPUs, with your home volume.",
    )
    return redirect("sandbox-detail", number=number)


def _panel(
    request: HttpRequest, number: int, template: str, *, ask: Callable[[], object], read: Callable[[], dict]
) -> HttpResponse:
    """A panel of the sandbox page that a POST asks a worker to fill (`ask`) and a GET shows
    (`read`): a refusal is shown in the panel, a sandbox the user may not see is a 404, and the
    panel's address opened on its own goes to the sandbox's page."""
    if request.method == "GET" and not request.htmx:
        return redirect("sandbox-detail", number=number)
    try:
        if request.method == "POST":
            ask()
        context = read()
    except NotFound as error:
        raise Http404(error.message) from error
    except DomainError as error:
        return fragment(request, template, {"refused": error.message, "number": number})
    return fragment(request, template, {**context, "number": number})


@login_required
@require_http_methods(["GET", "POST"])
def sandbox_insight_panel(request: HttpRequest, number: int) -> HttpResponse:
    """The sandbox's recent events and log tail as a worker last read them; a POST asks for a
    fresh read (the panel polls until it comes)."""
    pk = workload_id_or_404(request, kind=WorkloadKind.SANDBOX, number=number)

    def read() -> dict:
        sandbox, insight = sandbox_insight_for(user=request.user, sandbox_id=pk)
        return {"sandbox": sandbox, "insight": insight}

    ask = partial(sandbox_insight_request, user=request.user, sandbox_id=pk)
    return _panel(request, number, "sandboxes/partials/insight.html", ask=ask, read=read)


@login_required
@require_http_methods(["GET", "POST"])
def sandbox_kubectl_panel(request: HttpRequest, number: int) -> HttpResponse:
    """The owner's kubectl panel: the commands, and a kubeconfig to ask for (POST) and download."""
    pk = workload_id_or_404(request, kind=WorkloadKind.SANDBOX, number=number)

    def read() -> dict:
        sandbox, access = sandbox_kube_access_for(user=request.user, sandbox_id=pk)
        return {
            "sandbox": sandbox,
            "access": access,
            "usable": kube_access_usable(access, sandbox),
            "ssh_key_count": _ssh_key_count(request.user, sandbox),
            "ssh_login": _ssh_login(sandbox),
        }

    ask = partial(sandbox_kube_access_request, user=request.user, sandbox_id=pk)
    return _panel(request, number, "sandboxes/partials/kubectl.html", ask=ask, read=read)


def _ssh_login(sandbox: Workload) -> str:
    """The ssh login name its access command gives (`ssh -p 2222 <login>@<host>`), else its owner."""
    target = sandbox.access.split()[-1] if sandbox.access.startswith("ssh ") else ""
    return target.rpartition("@")[0] or sandbox.owner.username


def _ssh_key_count(user: User, sandbox: Workload) -> int | None:
    """How many SSH keys its owner's ssh sandbox lets in; None for a web sandbox."""
    if not sandbox.is_ssh_sandbox:
        return None
    return ssh_keys_of(user).count()


@login_required
@require_GET
def sandbox_kubeconfig_download(request: HttpRequest, number: int) -> HttpResponse:
    """The kubeconfig file, for its owner, while it is good."""
    pk = workload_id_or_404(request, kind=WorkloadKind.SANDBOX, number=number)
    try:
        sandbox, access = sandbox_kube_access_for(user=request.user, sandbox_id=pk)
    except NotFound as error:
        raise Http404(error.message) from error
    except NotAllowed as error:
        return render(request, "sandboxes/gate_refused.html", {"reason": error.message}, status=403)
    if access is None or not kube_access_usable(access, sandbox):
        reason = "No kubeconfig is ready for this sandbox: ask for one on its page."
        return render(request, "sandboxes/gate_refused.html", {"reason": reason}, status=404)
    response = HttpResponse(kubeconfig_text(access, sandbox), content_type="application/yaml")
    response["Content-Disposition"] = f'attachment; filename="{access.namespace}.kubeconfig"'
    response["Cache-Control"] = "no-store"
    return response
