"""User and project budgets on the web: the section of a team's budget page where its leads set
and remove them (members read them), and a user's own budgets on the spend page. Both load as
fragments (htmx) into the page that includes their slot; the same services as the API."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_http_methods

from portal.core.errors import DomainError, NotAllowed, NotFound
from portal.core.views import fragment, login_required, page, part_of, wants_fragment
from portal.core.web import add_service_errors, suggest
from portal.spend.daily import sees_whole_team
from portal.spend.models import Budget
from portal.spend.target_budgets import (
    my_target_budgets,
    target_suggestions,
    team_target_budget_delete,
    team_target_budget_set,
    team_target_budgets,
)


class TargetBudgetForm(forms.Form):
    """Set (or, with `remove`, remove) the monthly budget of a member or a project label."""

    kind = forms.ChoiceField(choices=Budget.Kind.choices)
    target = forms.CharField(max_length=150, label="Username or project label")
    monthly_amount = forms.DecimalField(
        label="Monthly budget (USD)", required=False, min_value=0, max_digits=12, decimal_places=2
    )
    remove = forms.BooleanField(required=False, widget=forms.HiddenInput)

    def clean(self) -> dict:
        data = super().clean()
        if (
            not data.get("remove")
            and data.get("monthly_amount") is None
            and "monthly_amount" not in self.errors
        ):
            self.add_error("monthly_amount", "Give the monthly amount.")
        return data


@login_required
@require_http_methods(["GET", "POST"])
def team_target_budgets_panel(request: HttpRequest, slug: str) -> HttpResponse:
    """The team's user and project budgets: members read, leads and admins set and remove."""
    try:
        team, found = team_target_budgets(user=request.user, slug=slug)
    except NotFound as error:
        raise Http404(error.message) from error
    can_change = sees_whole_team(request.user, team)
    form = TargetBudgetForm() if can_change else None
    saved = ""  # what was just done, said above the table
    if request.method == "POST":
        if not can_change:
            raise PermissionDenied(
                "Only a lead of the team or an admin may change its user and project budgets."
            )
        form = TargetBudgetForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                if data["remove"]:
                    team_target_budget_delete(
                        user=request.user, slug=slug, kind=data["kind"], target=data["target"]
                    )
                else:
                    team_target_budget_set(user=request.user, slug=slug, kind=data["kind"], target=data["target"],
                                           monthly_amount=data["monthly_amount"])  # fmt: skip
            except NotAllowed as error:
                raise PermissionDenied(error.message) from error
            except NotFound as error:  # no such member of the team: the name given is wrong
                form.add_error("target", error.message)
            except DomainError as error:  # a bad project label: beside the name given
                add_service_errors(form, error, {"project": "target"})
            else:
                whose = f"project {data['target']}" if data["kind"] == Budget.Kind.PROJECT else data["target"]
                saved = (
                    f"The budget of {whose} is removed."
                    if data["remove"]
                    else f"The budget of {whose} is set: ${data['monthly_amount']:,.2f} a month."
                )
                if not wants_fragment(request):
                    messages.success(request, saved)
                    return redirect("team-target-budgets", slug=team.slug)
                form = TargetBudgetForm()
                team, found = team_target_budgets(user=request.user, slug=slug)
    if form is not None:
        suggest(form.fields["target"], target_suggestions(team), list_id="budget-targets")
    context = {"team": team, "target_budgets": [f for _, f in found], "can_change": can_change, "form": form}
    context["saved"] = saved
    if wants_fragment(request):
        return fragment(request, "spend/partials/target_budgets.html", context)
    return page(request, "spend/target_budgets.html", context)


@login_required
@require_GET
@part_of("spend")
def my_budgets_panel(request: HttpRequest) -> HttpResponse:
    """The signed-in user's own budgets, in each team that set one, and where each stands."""
    return fragment(
        request, "spend/partials/my_budgets.html", {"my_budgets": my_target_budgets(user=request.user)}
    )
