"""Forms of the account pages."""

from __future__ import annotations

from django import forms

from portal.accounts.models import ApiToken


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "ci-pipeline", "autocomplete": "off"}),
    )
    expires_days = forms.IntegerField(
        label="Expires after (days; empty: never)",
        required=False,
        widget=forms.NumberInput(attrs={"min": "1", "max": "3650", "placeholder": "90"}),
    )
    scope = forms.ChoiceField(
        choices=ApiToken.Scope.choices,
        initial=ApiToken.Scope.WORKLOADS,
        required=False,
        help_text="Read only; workloads: all you may do but manage tokens; admin: tokens too.",
    )
