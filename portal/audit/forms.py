"""Presentation of the audit filter form (the FilterSet itself is shared with the API)."""

from __future__ import annotations

from django import forms


def style_audit_filter(form: forms.Form) -> forms.Form:
    """Date pickers for the time bounds, short labels and placeholders for the text fields."""
    for name in ("since", "until"):
        if name in form.fields:
            form.fields[name].widget = forms.DateTimeInput(attrs={"type": "datetime-local"})
    labels = {
        "action": ("Action contains", "extended"),
        "object_type": ("Object type", "sandbox"),
        "object_id": ("Object id or number", "12"),
        "actor": ("Actor", "username"),
        "team": ("Team", "e.g. Vision"),
        "since": ("From (UTC)", ""),
        "until": ("Before (UTC)", ""),
    }
    for name, (label, placeholder) in labels.items():
        if name in form.fields:
            form.fields[name].label = label
            if placeholder:
                form.fields[name].widget.attrs["placeholder"] = placeholder
    return form
