"""The sizing form on a model's page. It parses; the rules (ranges, dtypes) live in the selectors."""

from __future__ import annotations

from typing import Any

from django import forms

from portal.catalog.models import CatalogModel
from portal.catalog.selectors import MAX_CONCURRENCY, default_request
from portal.core.errors import DomainError
from portal.core.web import add_service_errors


class SizingForm(forms.Form):
    mark_required = True  # labels say which fields cannot be left out

    dtype = forms.ChoiceField(label="Precision")
    context = forms.IntegerField(label="Context (tokens)")
    concurrency = forms.IntegerField(label="Concurrent sequences")

    def __init__(self, *args: Any, entry: CatalogModel, **kwargs: Any) -> None:
        defaults = default_request(entry)
        kwargs.setdefault(
            "initial",
            {"dtype": defaults.precision, "context": defaults.context, "concurrency": defaults.concurrency},
        )
        super().__init__(*args, **kwargs)
        self.fields["dtype"].choices = [(p, p) for p in entry.precisions]
        # Hints for the browser only; `sizing_request` enforces the same bounds.
        context_attrs = {"min": 1, "step": 1, "inputmode": "numeric"}
        if entry.max_context:
            context_attrs["max"] = entry.max_context
        self.fields["context"].widget.attrs.update(context_attrs)
        self.fields["concurrency"].widget.attrs.update(
            {"min": 1, "max": MAX_CONCURRENCY, "inputmode": "numeric"}
        )
        if not entry.generative:
            for name in ("context", "concurrency"):
                self.fields[name].help_text = "No KV cache: does not change the memory."

    def add_service_errors(self, error: DomainError) -> None:
        """Put the selector's field errors next to the fields."""
        add_service_errors(self, error)
