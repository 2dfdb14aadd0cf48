"""Forms of the deployment pages. They parse input only; the services decide what is allowed."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.utils import timezone

from portal.accounts.models import Team
from portal.catalog.models import CatalogModel
from portal.catalog.selectors import MAX_CONCURRENCY, default_request
from portal.catalog.sizing import Sizing
from portal.deployments.selectors import fit_label, fit_value, parse_fit_value
from portal.deployments.services import DEFAULT_TTL_HOURS
from portal.workloads.forms import (
    ServiceForm,
    expires_at_field,
    lifetime_errors,
    lifetime_mode_field,
    name_field,
    number_input,
    start_at_field,
)
from portal.workloads.models import PROJECT_HELP, PROJECT_MAX_LENGTH
from portal.workloads.services import MAX_REPLICAS

# Keys of DomainError.fields (the API's names) -> form fields.
SERVICE_FIELDS = {
    "team": "team",
    "name": "name",
    "model": "model",
    "dtype": "dtype",
    "context": "context",
    "concurrency": "concurrency",
    "gpu": "gpu",
    "gpu.type": "gpu",
    "gpu.count": "gpu",
    "gpu.mig_profile": "gpu",
    "replicas": "replicas",
    "ttl_hours": "ttl_hours",
    "expires_at": "expires_at",
    "start_at": "start_at",
    "purpose": "purpose",
    "project": "project",
}
SIZING_FIELDS = ("dtype", "context", "concurrency")


def _replicas_words(least: int) -> dict[str, str]:
    """What a replica count outside its bounds is told, in the portal's words, not Django's."""
    bounds = f"A whole number of replicas from {least} to {MAX_REPLICAS}."
    return {"min_value": bounds, "max_value": bounds, "invalid": bounds}


class DeployForm(ServiceForm):
    """A deployment as a person asks for it: which model, sized how, on which GPU, how many copies."""

    service_fields = SERVICE_FIELDS
    mark_required = True  # long forms: labels say which fields cannot be left out

    team = forms.ChoiceField()
    name = name_field("llama-chat")
    model = forms.ChoiceField()
    # The model the precision, context and concurrency fields were drawn for: when the model
    # changes, the page redraws them with the new model's defaults.
    sized_model = forms.CharField(required=False, widget=forms.HiddenInput)
    dtype = forms.ChoiceField(label="Precision")
    context = forms.IntegerField(
        label="Context (tokens)", required=False, widget=number_input({"min": 1}, mode="numeric")
    )
    concurrency = forms.IntegerField(
        label="Concurrent sequences",
        required=False,
        widget=number_input({"min": 1, "max": MAX_CONCURRENCY}, mode="numeric"),
    )
    gpu = forms.CharField(label="GPU per replica", required=False)
    replicas = forms.IntegerField(
        initial=1,
        min_value=1,
        max_value=MAX_REPLICAS,
        widget=number_input({"min": 1, "max": MAX_REPLICAS}, mode="numeric"),
        error_messages=_replicas_words(1),
    )
    lifetime_mode = lifetime_mode_field()
    # Needed only for a lifetime in hours (not with an end time), so checked in clean(); marked required.
    ttl_hours = forms.DecimalField(
        label="Hours",
        required=False,
        initial=DEFAULT_TTL_HOURS,
        widget=forms.NumberInput(attrs={"min": "0", "step": "any", "inputmode": "decimal"}),
    )
    ttl_hours.shown_required = True
    expires_at = expires_at_field()
    start_at = start_at_field()
    purpose = forms.CharField(
        max_length=300,
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "What is it for? Leads read this."}),
    )
    project = forms.CharField(
        label="Project (optional)",
        max_length=PROJECT_MAX_LENGTH,
        required=False,
        help_text=PROJECT_HELP + " Spend can be grouped and budgeted by it.",
        widget=forms.TextInput(attrs={"placeholder": "llm-eval", "autocomplete": "off"}),
    )

    def __init__(self, *args: Any, teams: list[Team], entries: list[CatalogModel], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entries = {entry.slug: entry for entry in entries}
        self.fields["team"].choices = [(team.slug, team.name) for team in teams]
        self.fields["model"].choices = [
            (entry.slug, f"{entry.name} · {entry.parameters_label} B · {entry.get_task_display().lower()}")
            for entry in entries
        ]
        in_a_day = timezone.now().replace(second=0, microsecond=0) + timedelta(hours=float(DEFAULT_TTL_HOURS))
        self.initial.setdefault("expires_at", in_a_day)
        entry = self.entry
        if entry is None:
            self.fields["dtype"].choices = []
            return
        defaults = default_request(entry)
        self.initial.setdefault("model", entry.slug)
        self.initial.setdefault("sized_model", entry.slug)
        self.initial.setdefault("dtype", defaults.precision)
        self.initial.setdefault("context", defaults.context)
        self.initial.setdefault("concurrency", defaults.concurrency)
        self.fields["dtype"].choices = [(p, p) for p in entry.precisions]
        if entry.max_context:
            self.fields["context"].widget.attrs["max"] = entry.max_context
        if not entry.generative:
            for name in ("context", "concurrency"):
                self.fields[name].help_text = "No KV cache: does not change the memory."

    @property
    def entry(self) -> CatalogModel | None:
        """The catalog entry chosen (the first one when none or an unknown one is)."""
        slug = self.data.get("model") if self.is_bound else self.initial.get("model")
        return self.entries.get(slug or "") or next(iter(self.entries.values()), None)

    def value(self, name: str) -> Any:
        """A field's raw value: submitted, or initial on an unbound form."""
        return self[name].value()

    def set_gpu_choices(self, sizing: Sizing | None) -> None:
        """Offer the fits (cheapest first) behind 'the cheapest fit'; keep a choice that still fits."""
        fits = sizing.fits if sizing else ()
        self.gpu_options = [(fit_value(fit), fit_label(fit)) for fit in fits]
        self.cheapest_label = fit_label(fits[0]) if fits else ""
        chosen = self.value("gpu") or ""
        self.gpu_chosen = chosen if any(value == chosen for value, _ in self.gpu_options) else ""

    def clean_ttl_hours(self) -> Decimal | None:
        hours = self.cleaned_data["ttl_hours"]
        if self.data.get("lifetime_mode") == "until":
            return None  # hidden then: a value left in it counts for nothing
        if hours is not None and hours <= 0:
            raise forms.ValidationError("Must be a number of hours above zero.")
        return hours

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        lifetime_errors(self, data)
        if (
            data.get("lifetime_mode") == "until"
            and data.get("expires_at") is not None
            and self.lifetime_hours() <= 0
        ):
            self.add_error(
                "expires_at",
                "Pick a time after its scheduled start."
                if data.get("start_at")
                else "Pick a time in the future.",
            )
        return data

    def ends_at(self) -> datetime | None:
        """The end time asked for, when the lifetime is given as one."""
        data = self.cleaned_data
        return data.get("expires_at") if data.get("lifetime_mode") == "until" else None

    def lifetime_hours(self) -> Decimal:
        """The hours it runs: given, or from its start (now, or the scheduled start) to its end."""
        data = self.cleaned_data
        if data.get("lifetime_mode") != "until":
            return data["ttl_hours"]
        start = data.get("start_at") or timezone.now().replace(
            second=0, microsecond=0
        )  # the picker's minutes
        return (Decimal((data["expires_at"] - start).total_seconds()) / Decimal(3600)).quantize(
            Decimal("0.01")
        )

    def service_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of `deployment_request` from the cleaned data."""
        data = self.cleaned_data
        gpu_type, count, mig_profile = parse_fit_value(data.get("gpu") or "")
        return {
            "team": data["team"],
            "name": data.get("name") or "",
            "model": data["model"],
            "dtype": data.get("dtype") or None,
            "context": data.get("context"),
            "concurrency": data.get("concurrency"),
            "gpu_type": gpu_type or None,
            "count": count,
            "mig_profile": mig_profile,
            "replicas": data["replicas"],
            **(
                {"expires_at": data["expires_at"]}
                if data.get("lifetime_mode") == "until"
                else {"ttl_hours": data["ttl_hours"]}
            ),
            "start_at": data.get("start_at"),
            "purpose": data.get("purpose") or "",
            "project": (data.get("project") or "").strip(),
        }


def initial_from_body(body: dict[str, Any]) -> dict[str, Any]:
    """The deploy form's initial values for a request body as the API takes it (request again, a
    preset)."""
    gpu = body.get("gpu") or {}
    fit = f"{gpu['type']}/{gpu.get('mig_profile') or gpu.get('count') or 1}" if gpu.get("type") else ""
    initial: dict[str, Any] = {
        "team": body.get("team"),
        "name": body.get("name") or "",
        "model": body.get("model"),
        "sized_model": body.get("model"),
        "dtype": body.get("dtype"),
        "context": body.get("context"),
        "concurrency": body.get("concurrency"),
        "gpu": fit,
        "replicas": body.get("replicas"),
        "ttl_hours": body.get("ttl_hours"),
        "purpose": body.get("purpose") or "",
        "project": body.get("project") or "",
    }
    return {key: value for key, value in initial.items() if value not in (None, "")}


def body_from_form(form: DeployForm) -> dict[str, Any]:
    """The form's cleaned values as a request body (for a preset): numbers as JSON takes them."""
    kwargs = form.service_kwargs()
    body: dict[str, Any] = {
        "team": kwargs["team"],
        "model": kwargs["model"],
        "replicas": kwargs["replicas"],
        "ttl_hours": str(form.lifetime_hours()),  # an end time is kept as its hours
        "purpose": kwargs["purpose"],
        "project": kwargs["project"],
    }
    for key in ("dtype", "context", "concurrency"):
        if kwargs.get(key) not in (None, ""):
            body[key] = kwargs[key]
    if kwargs.get("gpu_type"):
        gpu = {"type": kwargs["gpu_type"]}
        gpu.update(
            {"mig_profile": kwargs["mig_profile"]}
            if kwargs.get("mig_profile")
            else {"count": kwargs["count"]}
        )
        body["gpu"] = gpu
    return body


class ScaleForm(forms.Form):
    replicas = forms.IntegerField(
        label="Replicas",
        min_value=0,
        max_value=MAX_REPLICAS,
        error_messages=_replicas_words(0),
        help_text="0 keeps the deployment and its endpoint with nothing running or billed.",
        widget=number_input({"min": 0, "max": MAX_REPLICAS}, mode="numeric"),
    )
