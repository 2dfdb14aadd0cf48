"""Forms every kind of workload shares: a form that maps the services' field errors onto its own
fields, the extension form, and number inputs."""

from __future__ import annotations

from typing import ClassVar

from django import forms

from portal.accounts.models import Team, User
from portal.core.errors import DomainError
from portal.core.web import add_service_errors, suggest_by
from portal.workloads.selectors import team_projects
from portal.workloads.services.resolve import NAME_MAX, NAME_RE, NAME_RULE, START_MAX_AHEAD, START_MIN_AHEAD


class ServiceForm(forms.Form):
    """A form whose data goes to a service: the service's field errors go next to the fields
    (`service_fields` maps the API's names to the form's), and the estimate panel lists them all."""

    service_fields: ClassVar[dict[str, str]] = {}

    def add_service_errors(self, error: DomainError) -> None:
        add_service_errors(self, error, self.service_fields)

    def require_name(self) -> None:
        """A submitted request needs its name (the live estimate does without): say what is wrong
        with it beside the other fields' errors at once, not only once those are put right."""
        name = (self.data.get("name") or "").strip()
        if "name" in self.fields and "name" not in self.errors and not NAME_RE.match(name):
            self.add_error("name", NAME_RULE)

    def labelled_errors(self) -> list[tuple[str, str]]:
        """(field label, message) of every error, form-wide ones with an empty label."""
        return [
            (str(self[name].label) if name in self.fields else "", str(message))
            for name, messages in self.errors.items()
            for message in messages
        ]


def suggest_projects(form: forms.Form, teams: list[Team], user: User) -> None:
    """The request forms' project field offers the labels of the team chosen (`team_projects`),
    following the team field as it changes."""
    by_id = team_projects(user, [team.pk for team in teams])
    lists = {team.slug: by_id[team.pk] for team in teams}
    chosen = form["team"].value() or (teams[0].slug if teams else "")
    suggest_by(form.fields["project"], lists, list_id="project-suggestions", by="team", chosen=chosen)


def number_input(attrs: dict[str, object] | None = None, *, mode: str = "decimal") -> forms.NumberInput:
    """A number field that brings up the right on-screen keyboard."""
    return forms.NumberInput(attrs={"inputmode": mode, **(attrs or {})})


class ExtendForm(forms.Form):
    hours = forms.DecimalField(
        label="Extend by (hours)", initial=4, widget=number_input({"min": "0", "step": "any"})
    )


def name_field(example: str) -> forms.CharField:
    """A workload's name; optional in the form so the live estimate works before it is typed, but
    needed to submit, so its label says "required" (`shown_required`)."""
    field = forms.CharField(
        max_length=NAME_MAX,
        required=False,
        help_text=f"Up to {NAME_MAX} lowercase letters, digits and hyphens, e.g. {example}.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "placeholder": example}),
    )
    field.shown_required = True
    return field


def start_at_field() -> forms.DateTimeField:
    """A scheduled start (START_MIN_AHEAD to START_MAX_AHEAD ahead), the same on every request form."""
    return forms.DateTimeField(
        label="Start at (UTC, optional)",
        required=False,
        help_text=f"Start later: {START_MIN_AHEAD.seconds // 60} minutes to {START_MAX_AHEAD.days} days ahead."
        " The quota is held from now; the lifetime counts from the start.",
        widget=datetime_local(),
    )


def datetime_local() -> forms.DateTimeInput:
    """The browser's date and time picker, in the form's UTC wording."""
    return forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")


def radio_field(*, label: str, choices: list[tuple[str, str]], initial: str) -> forms.ChoiceField:
    """One of a few modes, shown as radio buttons."""
    return forms.ChoiceField(label=label, choices=choices, initial=initial, widget=forms.RadioSelect)


def lifetime_mode_field() -> forms.ChoiceField:
    """How the lifetime is given: a number of hours, or an end time; the same on every request form.
    Left out (a post from before the end time was offered), it is hours."""
    field = radio_field(
        label="Lifetime",
        choices=[("hours", "For a number of hours"), ("until", "Until a time")],
        initial="hours",
    )
    field.required = False
    return field


def expires_at_field() -> forms.DateTimeField:
    """The end time of a lifetime given "until a time" (UTC)."""
    return forms.DateTimeField(label="Expires at (UTC)", required=False, widget=datetime_local())


def lifetime_errors(form: forms.Form, data: dict) -> None:
    """The lifetime a request form's mode needs: an end time, or a number of hours."""
    if data.get("lifetime_mode") == "until":
        if data.get("expires_at") is None and "expires_at" not in form.errors:
            form.add_error("expires_at", "Pick the time it should end.")
    elif data.get("ttl_hours") is None and "ttl_hours" not in form.errors:
        form.add_error("ttl_hours", "Give the number of hours it should live.")
