"""Forms of the account pages."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from portal.accounts.backends import local_password_allowed
from portal.accounts.models import ApiToken
from portal.accounts.services import token_default_days, token_expiry_help, token_max_days


def _refuse_password_sign_in(username: str | None) -> None:
    """With local sign-in off, say so plainly instead of "wrong password" (and count no failure)."""
    if not local_password_allowed(username):
        raise ValidationError(
            f"Password sign-in is switched off: use “Sign in with {settings.PORTAL_OIDC_PROVIDER_NAME}”.",
            code="local_login_off",
        )


class PortalAuthenticationForm(AuthenticationForm):
    """The portal's sign-in form: refuses passwords while PORTAL_LOCAL_LOGIN is off."""

    def clean(self):
        _refuse_password_sign_in(self.cleaned_data.get("username"))
        return super().clean()


class PortalAdminAuthenticationForm(AdminAuthenticationForm):
    """The admin's sign-in form, under the same rule (break-glass accounts sign in here)."""

    def clean(self):
        _refuse_password_sign_in(self.cleaned_data.get("username"))
        return super().clean()


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "ci-pipeline", "autocomplete": "off", "required": True}),
    )
    expires_days = forms.IntegerField(label="Expires after (days)", required=False, min_value=1)
    scope = forms.ChoiceField(
        choices=ApiToken.Scope.choices,
        initial=ApiToken.Scope.WORKLOADS,
        required=False,
        help_text="Whatever the scope, a token never does more than you may.",
    )
    team = forms.ChoiceField(
        label="Team (serving tokens)",
        choices=[],
        required=False,
        help_text="A serving token calls this team's model endpoints only.",
    )

    def __init__(self, *args, teams: list | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        expiry = self.fields["expires_days"]  # its maximum is token_create's to check
        expiry.widget.attrs.update(max=str(token_max_days()), placeholder="never")
        expiry.help_text = token_expiry_help()
        expiry.initial = token_default_days()
        if expiry.initial is not None:
            expiry.widget.attrs["placeholder"] = str(expiry.initial)
        self.fields["team"].choices = [("", "—"), *((team.slug, team.name) for team in teams or [])]


class SshKeyForm(forms.Form):
    public_key = forms.CharField(
        label="Public key",
        max_length=8000,
        widget=forms.Textarea(
            attrs={
                "rows": 3,
                "placeholder": "ssh-ed25519 AAAA... you@laptop",
                "autocomplete": "off",
                "spellcheck": "false",
            }
        ),
        help_text="The contents of your .pub file (ssh-keygen -t ed25519 makes one).",
    )
    name = forms.CharField(
        max_length=100,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "laptop", "autocomplete": "off"}),
        help_text="Empty: the key's comment.",
    )
