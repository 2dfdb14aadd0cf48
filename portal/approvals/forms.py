"""Forms of the approvals inbox."""

from __future__ import annotations

from django import forms


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    comment = forms.CharField(max_length=1000, required=False)

    @property
    def approve(self) -> bool:
        return self.cleaned_data.get("decision") == "approve"
