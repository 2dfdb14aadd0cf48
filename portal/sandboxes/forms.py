"""Forms of the sandbox pages. They parse input only; the services decide what is allowed."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.utils import timezone

from portal.accounts.models import Team
from portal.fleet.models import GpuType
from portal.fleet.selectors import share_rule_text
from portal.sandboxes.selectors import RequestChoices
from portal.workloads.forms import (
    ServiceForm,
    expires_at_field,
    lifetime_errors,
    lifetime_mode_field,
    name_field,
    number_input,
    radio_field,
    start_at_field,
)
from portal.workloads.models import PROJECT_HELP, PROJECT_MAX_LENGTH, Image

# Keys of DomainError.fields (the API's names) -> form fields.
SERVICE_FIELDS = {
    "team": "team",
    "name": "name",
    "image": "image",
    "gpu.type": "gpu_type",
    "gpu.count": "count",
    "gpu.mig_profile": "mig_profile",
    "ttl_hours": "ttl_hours",
    "expires_at": "expires_at",
    "start_at": "start_at",
    "cpu": "cpu",
    "memory_gb": "memory_gb",
    "storage_gb": "storage_gb",
    "purpose": "purpose",
    "project": "project",
    "datasets": "datasets",
}


def image_label(image: Image) -> str:
    """An image as the form offers it: its name, and how it is used when the name does not say
    ("PyTorch shell (SSH)" needs no "(Shell (SSH))" after it)."""
    kind = image.get_kind_display()
    return image.name if kind.lower() in image.name.lower() else f"{image.name} ({kind})"


def storage_help(home_gb: int | None) -> str:
    """What the storage size is for: /home is the owner's home volume, which keeps its own size."""
    home = (
        f"/home is your home volume ({home_gb} GB; grow it under My home)."
        if home_gb is not None
        else "/home is your home volume, which your first sandbox makes at the team's default size."
    )
    return f"{home} This size is a scratch /home instead, used only if another sandbox of yours holds your home when this one starts."


class SandboxRequestForm(ServiceForm):
    """A sandbox request as a person fills it in: whole GPUs or one MIG slice, hours or an end time."""

    service_fields = SERVICE_FIELDS
    mark_required = True  # long forms: labels say which fields cannot be left out

    team = forms.ChoiceField()
    name = name_field("llama-finetune")
    image = forms.ChoiceField(required=False)
    gpu_type = forms.ChoiceField(label="GPU type")
    gpu_mode = radio_field(
        label="GPU share", choices=[("whole", "Whole GPUs"), ("mig", "One MIG slice")], initial="whole"
    )
    # Needed only for whole GPUs (a slice has no count), so checked in clean(); marked required.
    count = forms.IntegerField(
        label="Number of GPUs", required=False, initial=1, widget=number_input({"min": "1"})
    )
    count.shown_required = True
    mig_profile = forms.ChoiceField(label="MIG profile", required=False)
    lifetime_mode = lifetime_mode_field()
    # Needed only for a lifetime in hours (not with an end time), so checked in clean(); marked required.
    ttl_hours = forms.DecimalField(
        label="Hours", required=False, initial=8, widget=number_input({"min": "0", "step": "any"})
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
    cpu = forms.IntegerField(label="CPUs", required=False, widget=number_input({"min": "1"}))
    memory_gb = forms.IntegerField(label="Memory (GB)", required=False, widget=number_input({"min": "1"}))
    storage_gb = forms.IntegerField(label="Storage (GB)", required=False, widget=number_input({"min": "1"}))
    datasets = forms.MultipleChoiceField(
        label="Team datasets", required=False, widget=forms.CheckboxSelectMultiple,
        help_text="Each is mounted read-only at /data/<slug>, the name before its colon.",
    )  # fmt: skip

    def __init__(
        self,
        *args: Any,
        teams: list[Team],
        choices: RequestChoices,
        home_gb: int | None = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self.fields["storage_gb"].help_text = storage_help(home_gb)
        self.fields["datasets"].choices = [
            (
                dataset.slug,
                f"{dataset.slug}: {dataset.name} ({', '.join(t.slug for t in dataset.teams.all())})",
            )
            for dataset in choices.datasets
        ]
        self.gpu_types = {gpu_type.slug: gpu_type for gpu_type in choices.gpu_types}
        self.fields["team"].choices = [(team.slug, team.name) for team in teams]
        self.fields["image"].choices = [("", "Team default")] + [
            (image.slug, image_label(image)) for image in choices.images
        ]
        self.fields["gpu_type"].choices = [
            (slug, self._type_label(gpu_type, choices)) for slug, gpu_type in self.gpu_types.items()
        ]
        # Start on a type the fleet has as whole GPUs, since the form starts on whole GPUs.
        whole = [slug for slug, t in self.gpu_types.items() if t.pk in choices.whole_type_ids]
        self.initial.setdefault("gpu_type", whole[0] if whole else next(iter(self.gpu_types), ""))
        self.fields["gpu_type"].help_text = share_rule_text()
        self.fields["mig_profile"].choices = self.profile_choices()
        in_eight_hours = timezone.now().replace(second=0, microsecond=0) + timedelta(hours=8)
        self.initial.setdefault("expires_at", in_eight_hours)

    @staticmethod
    def _type_label(gpu_type: GpuType, choices: RequestChoices) -> str:
        price = choices.prices.get(gpu_type.pk, Decimal(0))
        whole, mig = gpu_type.pk in choices.whole_type_ids, gpu_type.pk in choices.mig_type_ids
        shape = "" if whole == mig else (" · whole GPUs only" if whole else " · MIG slices only")
        return f"{gpu_type.name} · ${price:.2f}/GPU-hour{shape}"

    def chosen_gpu_type(self) -> str:
        raw = self.data.get("gpu_type") if self.is_bound else self.initial.get("gpu_type")
        if raw in self.gpu_types:
            return raw
        return next(iter(self.gpu_types), "")

    def profile_choices(self) -> list[tuple[str, str]]:
        gpu_type = self.gpu_types.get(self.chosen_gpu_type())
        if gpu_type is None or gpu_type.model is None or not gpu_type.mig_capable:
            return []
        return [
            (shape.name, f"{shape.name} · {shape.compute_slices}/7 of the compute, {shape.memory_gb} GB")
            for shape in gpu_type.model.profiles
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("gpu_mode") == "mig" and not data.get("mig_profile") and "mig_profile" not in self.errors:
            self.add_error("mig_profile", "Choose a MIG profile.")
        elif data.get("gpu_mode") != "mig" and data.get("count") is None and "count" not in self.errors:
            self.add_error("count", "Give the number of GPUs (1 or more).")
        lifetime_errors(self, data)
        return data

    def service_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `sandbox_request` / `sandbox_estimate` from the cleaned data (the
        estimate ignores the name, which the form may not have yet)."""
        data = self.cleaned_data
        kwargs: dict[str, Any] = {
            "team": data.get("team") or "",
            "name": data.get("name") or "",
            "gpu_type": data.get("gpu_type") or "",
            "image": data.get("image") or None,
            "purpose": data.get("purpose") or "",
            "project": (data.get("project") or "").strip(),
            "cpu": data.get("cpu"),
            "memory_gb": data.get("memory_gb"),
            "storage_gb": data.get("storage_gb"),
            "datasets": list(data.get("datasets") or []),
        }
        if data.get("gpu_mode") == "mig":
            kwargs["mig_profile"] = data.get("mig_profile") or ""
        else:
            kwargs["count"] = data.get("count")
        if data.get("lifetime_mode") == "until":
            kwargs["expires_at"] = data.get("expires_at")
        else:
            kwargs["ttl_hours"] = data.get("ttl_hours")
        kwargs["start_at"] = data.get("start_at")
        return kwargs


def initial_from_body(body: dict[str, Any]) -> dict[str, Any]:
    """The request form's initial values for a request body as the API takes it (request again,
    a preset): whole GPUs or a slice, the lifetime in hours."""
    gpu = body.get("gpu") or {}
    mig = bool(gpu.get("mig_profile"))
    initial: dict[str, Any] = {
        "team": body.get("team"),
        "name": body.get("name") or "",
        "image": body.get("image") or "",
        "gpu_type": gpu.get("type"),
        "gpu_mode": "mig" if mig else "whole",
        "count": None if mig else gpu.get("count") or 1,
        "mig_profile": gpu.get("mig_profile") or "",
        "lifetime_mode": "hours",
        "ttl_hours": body.get("ttl_hours"),
        "cpu": body.get("cpu"),
        "memory_gb": body.get("memory_gb"),
        "storage_gb": body.get("storage_gb"),
        "datasets": list(body.get("datasets") or []),
        "purpose": body.get("purpose") or "",
        "project": body.get("project") or "",
    }
    return {key: value for key, value in initial.items() if value not in (None, "")}


def body_from_form(form: SandboxRequestForm) -> dict[str, Any]:
    """The form's cleaned values as a request body (for a preset): numbers as JSON takes them; a
    lifetime given as an end time is kept as its hours."""
    kwargs = form.service_kwargs()
    gpu: dict[str, Any] = {"type": kwargs["gpu_type"]}
    if kwargs.get("mig_profile"):
        gpu["mig_profile"] = kwargs["mig_profile"]
    else:
        gpu["count"] = kwargs.get("count") or 1
    hours = kwargs.get("ttl_hours")
    if hours is None and kwargs.get("expires_at") is not None:
        seconds = (kwargs["expires_at"] - (kwargs.get("start_at") or timezone.now())).total_seconds()
        hours = (Decimal(seconds) / Decimal(3600)).quantize(Decimal("0.01"))
    body: dict[str, Any] = {
        "team": kwargs["team"],
        "gpu": gpu,
        "ttl_hours": str(hours) if hours is not None else None,
        "purpose": kwargs["purpose"],
        "project": kwargs["project"],
        "datasets": kwargs["datasets"],
    }
    for key in ("image", "cpu", "memory_gb", "storage_gb"):
        if kwargs.get(key) not in (None, ""):
            body[key] = kwargs[key]
    return body


class HomeResizeForm(forms.Form):
    size_gb = forms.IntegerField(label="New size (GB)", min_value=1, max_value=100_000)


class HomeDeleteForm(forms.Form):
    confirm = forms.CharField(label="Type your username to confirm", max_length=150)
