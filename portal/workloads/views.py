"""Web pieces every kind of workload shares: its list page's context, and the extend and end
actions whose outcome goes to the messages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from portal.accounts.selectors import (
    lead_team_ids,
    team_leads_by_team,
    team_members_by_team,
    teams_by_id,
    teams_led_or_all,
)
from portal.core.errors import DomainError, NotFound
from portal.core.views import login_required, page, wants_fragment
from portal.core.web import form_refused, run_service, typed_keep, typed_take
from portal.fleet.selectors import gpu_type_slugs
from portal.workloads.filters import WorkloadFilter
from portal.workloads.forms import ExtendForm
from portal.workloads.models import Workload, WorkloadKind, WorkloadState
from portal.workloads.presets import (
    preset_body_for_use,
    preset_check,
    preset_get_for,
    preset_save,
)
from portal.workloads.selectors import (
    any_live,
    listed_projects,
    pending_extension,
    user_standing,
    workload_id_for,
    workload_page_trail,
)
from portal.workloads.services import (
    workload_extend,
    workload_extension_withdraw,
    workload_terminate,
    workload_withdraw,
)

PAGE_SIZE = 25


def workload_list_context(
    request: HttpRequest,
    *,
    listed: Callable[..., QuerySet[Workload]],
    rows: Callable[[list[Workload]], list[Any]],
) -> dict[str, Any]:
    """A list of sandboxes or deployments: the scope (the team's for leads and admins, whose own
    list is mostly empty, unless they ask for theirs with ?scope=mine; researchers: theirs),
    the filter, one page of rows from `listed(user=, scope=)`, and whether to poll for changes."""
    user = request.user
    led = lead_team_ids(user)
    can_see_team = user.is_platform_admin or bool(led)
    scope = "team" if can_see_team and request.GET.get("scope") != "mine" else "mine"
    mine_or_team = listed(user=user, scope=scope)
    workload_filter = WorkloadFilter(request.GET, queryset=mine_or_team)
    page_obj = Paginator(workload_filter.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    workloads = list(page_obj.object_list)
    return {
        "scope": scope,
        "can_see_team": can_see_team,
        "filter": workload_filter,
        "filter_teams": (
            teams_led_or_all(user, led) if scope == "team" else teams_by_id(mine_or_team.values("team_id"))
        ),
        # read only where the filter form is drawn (not for the table a filter redraws)
        "filter_gpu_types": gpu_type_slugs(),
        "filter_projects": lambda: listed_projects(user, scope=scope, led=led),  # called where drawn
        "states": WorkloadState.choices,
        "page_obj": page_obj,
        "rows": rows(workloads),
        "polling": any_live(workloads),
    }


TRAIL_SHOWN = 50  # events of a detail page's audit trail; `?trail=all` shows every one


def audit_trail_context(request: HttpRequest, workload: Workload) -> dict[str, Any]:
    """A detail page's audit trail: its latest events, oldest first, and whether earlier ones
    were left out (a deployment that ran for weeks gathers scale and health events)."""
    trail = workload_page_trail(workload)
    if request.GET.get("trail") == "all":
        events = list(trail)
        return {
            "audit_trail": events,
            "trail_all": True,
            "trail_total": len(events),
            "trail_shown": TRAIL_SHOWN,
        }
    newest = list(trail.reverse()[: TRAIL_SHOWN + 1])
    return {
        "audit_trail": newest[:TRAIL_SHOWN][::-1],
        "trail_all": False,
        "trail_total": trail.count() if len(newest) > TRAIL_SHOWN else len(newest),
        "trail_shown": TRAIL_SHOWN,
    }


def workload_id_or_404(request: HttpRequest, *, kind: str, number: int) -> int:
    """The primary key of the workload of `kind` that a page's URL names by its number; a number
    the user may not see is a 404."""
    try:
        return workload_id_for(user=request.user, kind=kind, number=number)
    except NotFound as error:
        raise Http404(error.message) from error


def actions_changed(request: HttpRequest, actions: list[str]) -> bool:
    """Whether a detail page's refresh must swap in its actions: the page polls with the actions
    it shows (`?actions=`), so a form being typed into is only replaced when what can be done
    changed (a request placed, an extension decided, the workload ending)."""
    shown = request.GET.get("actions")
    if shown is None:  # a refresh that does not say: hide them once nothing can be done
        return wants_fragment(request) and not actions
    return wants_fragment(request) and shown != ",".join(actions)


def detail_panels(workload: Workload) -> str:
    """What decides the panels below a detail page's live card: its charts (once started, and
    drawn live while it lives) and, on a sandbox's page, its events (while starting or running),
    kubectl access and /home line (while running) and sharing (while it lives)."""
    state = workload.state
    shown = [workload.started_at is not None, workload.is_live]
    if workload.kind == WorkloadKind.SANDBOX:
        shown += [
            state in (WorkloadState.PROVISIONING, WorkloadState.RUNNING),
            state == WorkloadState.RUNNING,
        ]
    return "".join("1" if each else "0" for each in shown)


def panels_changed(request: HttpRequest, panels: str) -> bool:
    """Whether a detail page's refresh must swap in its panels as well as its live card: the page
    polls with the panels it shows (`?panels=`, from detail_panels)."""
    shown = request.GET.get("panels")
    return wants_fragment(request) and shown is not None and shown != panels


def _typed_key(kind: str, pk: int) -> str:
    return f"extend:{kind}:{pk}"


def extend_form_for(request: HttpRequest, pk: int, *, kind: str) -> ExtendForm:
    """The detail page's extend form, holding what was typed when the last extension was refused
    (its page is shown again after a redirect, so the value waits in the session once)."""
    typed = typed_take(request, _typed_key(kind, pk))
    return ExtendForm(initial={"hours": typed}) if typed else ExtendForm()


def extend_posted(request: HttpRequest, pk: int, *, kind: str) -> None:
    """Extend a sandbox or deployment by the posted hours; the outcome goes to the messages (and
    what was typed back to the form, if refused)."""
    form = ExtendForm(request.POST)
    refused = form_refused(request, form)
    workload = None
    if not refused:
        hours = form.cleaned_data["hours"]
        workload = run_service(
            request, lambda: workload_extend(user=request.user, workload_id=pk, hours=hours, kind=kind)
        )
    if workload is None:
        typed_keep(request, _typed_key(kind, pk), request.POST.get("hours", "")[:20])
        return
    pending = pending_extension(workload)
    if pending is not None:
        why = pending.reason
        messages.info(request, f"Sent to a lead for approval: {why}")
    else:
        messages.success(request, extended_message(workload))


def extended_message(workload: Workload) -> str:
    if workload.expires_at is None:
        return f"Extended: it runs {workload.lifetime_hours.normalize():f} h from when it starts."
    return f"Extended: it now expires {workload.expires_at:%Y-%m-%d %H:%M} UTC."


def terminate_posted(request: HttpRequest, pk: int, *, kind: str) -> None:
    """End a sandbox or deployment now; the outcome goes to the messages."""
    run_service(
        request,
        lambda: workload_terminate(user=request.user, workload_id=pk, kind=kind),
        success=f"Ending the {kind}: billing stopped now.",
    )


def withdraw_posted(request: HttpRequest, pk: int, *, kind: str) -> None:
    """Withdraw a request that has not started; the outcome goes to the messages."""
    run_service(
        request,
        lambda: workload_withdraw(user=request.user, workload_id=pk, kind=kind),
        success=f"Request withdrawn: nothing was billed, and the {kind} will not start.",
    )


def extension_withdraw_posted(request: HttpRequest, pk: int, *, kind: str) -> None:
    """Withdraw the extension that waits for a lead; the outcome goes to the messages."""
    run_service(
        request,
        lambda: workload_extension_withdraw(user=request.user, workload_id=pk, kind=kind),
        success="Extension request withdrawn; the expiry stays as it was.",
    )


def action_view(kind: str, act: Callable[..., None]) -> Callable[..., HttpResponse]:
    """A POST view that does `act` (extend_posted or terminate_posted) to a workload of `kind` and
    goes back to its page, where the outcome shows as a message."""

    @login_required
    @require_POST
    def view(request: HttpRequest, number: int) -> HttpResponse:
        act(request, workload_id_or_404(request, kind=kind, number=number), kind=kind)
        return redirect(f"{kind}-detail", number=number)

    return view


def form_prefill(
    request: HttpRequest,
    *,
    kind: str,
    request_body: Callable[[int], dict],
    initial_from_body: Callable[[dict], dict],
) -> tuple[dict | None, str, str]:
    """A request form's starting values, a line saying where they come from, and what no longer
    fits in them: `?again=<number>` (another workload's settings, from `request_body(its key)`) or
    `?preset=<id>` (a saved preset of `kind`); none by default. One the user may not see is a 404.
    Either is checked as a request now: a team left, or a GPU type or image retired, is named."""
    again, preset = request.GET.get("again"), request.GET.get("preset")
    try:
        if again:
            number = int(again)
            body = request_body(workload_id_for(user=request.user, kind=kind, number=number))
            source = f"the settings of {kind} #{number}; change what you like."
            try:
                preset_check(user=request.user, kind=kind, body=body)
            except DomainError as error:
                problem = (
                    f"Some of {kind} #{number}'s settings no longer fit: {error.message} Choose again below."
                )
                return initial_from_body(body), source, problem
            return initial_from_body(body), source, ""
        if preset:
            chosen = preset_get_for(user=request.user, preset_id=int(preset), kind=kind)
            source = f"preset {chosen.name} ({chosen.scope})."
            try:
                preset_body_for_use(user=request.user, preset=chosen)
            except DomainError as error:
                return initial_from_body(chosen.body), source, error.message
            return initial_from_body(chosen.body), source, ""
    except ValueError as error:
        raise Http404(f"No such {kind} or preset.") from error
    except NotFound as error:
        raise Http404(error.message) from error
    return None, "", ""


def save_form_as_preset(request: HttpRequest, form: Any, *, kind: str, body: dict) -> bool:
    """A valid request form saved as the preset named in the POST (the team's, if asked), saying
    so; a refusal shows as a message, as any service's. A preset of the same name is replaced only
    when the POST says so (`preset_replace`): the page never loses one unasked. Whether it was saved."""
    name = request.POST.get("preset_name", "")
    team = form.cleaned_data["team"] if request.POST.get("preset_team") else None
    replace = bool(request.POST.get("preset_replace"))
    preset = run_service(
        request,
        lambda: preset_save(user=request.user, kind=kind, name=name, team=team, body=body, replace=replace),
    )
    if preset is not None:
        messages.success(request, f"Saved preset {preset.name} ({preset.scope}).")
    return preset is not None


MEMBERS_SHOWN = 40  # a team's members named on My teams; more are counted


@login_required
@require_GET
def my_teams(request: HttpRequest) -> HttpResponse:
    """The user's teams as the request form weighs them: quota and budget left this month, what is
    approved at once and what waits for a lead, the longest lifetime, idle reclaim, its leads and
    the project labels it uses."""
    standings = user_standing(request.user)
    team_ids = [standing.team.pk for standing in standings]
    leads, members = team_leads_by_team(team_ids), team_members_by_team(team_ids)
    rows = []
    for standing in standings:
        everyone = members.get(standing.team.pk, [])
        shown = everyone[:MEMBERS_SHOWN]
        rows.append(
            (standing, leads.get(standing.team.pk, []), shown, len(everyone), len(everyone) - len(shown))
        )
    return page(request, "workloads/my_teams.html", {"rows": rows})
