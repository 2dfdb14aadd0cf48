"""Forms of the deployment pages. They parse input only; the services decide what is allowed."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms

from portal.accounts.models import Team
from portal.catalog.models import CatalogModel
from portal.catalog.selectors import MAX_CONCURRENCY, default_request
from portal.catalog.sizing import Sizing
from portal.deployments.selectors import fit_label, fit_value, parse_fit_value
from portal.deployments.services import DEFAULT_TTL_HOURS
from portal.workloads.forms import ServiceForm, name_field, number_input
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
    "expires_at": "ttl_hours",
    "purpose": "purpose",
    "project": "project",
}
SIZING_FIELDS = ("dtype", "context", "concurrency")


class DeployForm(ServiceForm):
    """A deployment as a person asks for it: which model, sized how, on which GPU, how many copies."""

    service_fields = SERVICE_FIELDS

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
    )
    ttl_hours = forms.DecimalField(
        label="Lifetime (hours)",
        initial=DEFAULT_TTL_HOURS,
        widget=forms.NumberInput(attrs={"min": "0", "step": "any", "inputmode": "decimal"}),
    )
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

    def clean_ttl_hours(self) -> Decimal:
        hours = self.cleaned_data["ttl_hours"]
        if hours <= 0:
            raise forms.ValidationError("Must be a number of hours above zero.")
        return hours

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
            "ttl_hours": data["ttl_hours"],
            "purpose": data.get("purpose") or "",
            "project": (data.get("project") or "").strip(),
        }


class ScaleForm(forms.Form):
    replicas = forms.IntegerField(
        label="Replicas",
        min_value=0,
        max_value=MAX_REPLICAS,
        help_text="0 keeps the deployment and its endpoint with nothing running or billed.",
        widget=number_input({"min": 0, "max": MAX_REPLICAS}, mode="numeric"),
    )
