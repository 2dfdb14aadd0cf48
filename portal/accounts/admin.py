from django import forms
from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from portal.accounts.forms import PortalAdminAuthenticationForm
from portal.accounts.models import ApiToken, GroupRule, Membership, Notification, OidcIdentity, Team, User
from portal.accounts.notifications import REMINDER_MAX_HOURS
from portal.accounts.team_settings import IDLE_BOUNDS
from portal.accounts.webhooks import webhook_url_check
from portal.core.errors import ValidationFailed
from portal.core.templatetags.money import usd
from portal.core.text import hours_words, plain_number, sentence

# The admin's sign-in refuses passwords too while PORTAL_LOCAL_LOGIN is off (break-glass aside).
admin.site.login_form = PortalAdminAuthenticationForm


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]
    # "Granted by a group rule" memberships follow the user's groups at each single sign-on; set
    # the source to "by hand" to keep one whatever the groups say.
    fields = ("user", "role", "source")


@admin.register(User)
class PortalUserAdmin(UserAdmin):
    fieldsets = (*UserAdmin.fieldsets, ("Cluster", {"fields": ("cluster_identity",)}))
    list_display = ("username", "email", "first_name", "last_name", "is_staff", "is_active")


class TeamAdminForm(forms.ModelForm):
    """A team as an admin edits it, under the rules its leads' pages and the API keep: idle reclaim
    within IDLE_BOUNDS, reminders up to REMINDER_MAX_HOURS, a webhook the portal posts to
    (`Team.clean` checks the rest)."""

    class Meta:
        model = Team
        exclude = ("hf_token",)  # noqa: DJ006 (every other field is the admin's to edit)

    def clean(self) -> dict:
        data = super().clean()
        for name, (smallest, largest, meaning) in IDLE_BOUNDS.items():
            value = data.get(name)
            off_but_short = name == "idle_reclaim_minutes" and value is not None and 0 < value < 10
            if value is not None and (not smallest <= value <= largest or off_but_short):
                self.add_error(name, f"{sentence(meaning)}.")
        reminder = data.get("approval_reminder_hours")
        if reminder is not None and reminder > REMINDER_MAX_HOURS:
            self.add_error("approval_reminder_hours", f"Whole hours from 0 (never) to {REMINDER_MAX_HOURS}.")
        if data.get("webhook_url") and "webhook_url" in self.changed_data:
            try:
                data["webhook_url"] = webhook_url_check(data["webhook_url"].strip())
            except ValidationFailed as refused:
                self.add_error("webhook_url", (refused.fields or {}).get("webhook_url", [refused.message])[0])
        return data


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    form = TeamAdminForm
    # Its leads set the Hugging Face token on the team's settings page; the admin never shows it.
    exclude = ("hf_token",)
    list_display = (
        "slug",
        "name",
        "quota",
        "budget",
        "auto_approve_max_gpus",
        "auto_approve_hours",
        "max_lifetime",
    )
    search_fields = ("slug", "name")
    inlines = [MembershipInline]

    @admin.display(description="GPU quota", ordering="quota_gpus")
    def quota(self, team: Team) -> str:
        return f"{plain_number(team.quota_gpus)} GPU equivalents"

    @admin.display(description="Monthly budget", ordering="monthly_budget")
    def budget(self, team: Team) -> str:
        return usd(team.monthly_budget)

    @admin.display(description="Auto-approve for up to", ordering="auto_approve_max_hours")
    def auto_approve_hours(self, team: Team) -> str:
        return hours_words(team.auto_approve_max_hours)

    @admin.display(description="Longest lifetime", ordering="max_lifetime_hours")
    def max_lifetime(self, team: Team) -> str:
        return hours_words(team.max_lifetime_hours)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "prefix", "created_at", "expires_at", "revoked_at", "last_used_at")
    readonly_fields = ("prefix", "token_hash", "created_at", "last_used_at")
    list_filter = ("revoked_at", "expires_at")  # "No date": tokens that never expire


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("user", "message", "created_at", "read_at")


@admin.register(GroupRule)
class GroupRuleAdmin(admin.ModelAdmin):
    """Single sign-on: which groups of the provider's group claim grant which team role, or
    platform admin. Applied at each user's next sign-in."""

    list_display = ("group", "team", "role")
    list_filter = ("role", "team")
    search_fields = ("group", "team__slug")
    autocomplete_fields = ["team"]


@admin.register(OidcIdentity)
class OidcIdentityAdmin(admin.ModelAdmin):
    list_display = ("user", "subject", "issuer", "admin_by_rule", "last_sign_in_at")
    search_fields = ("user__username", "subject")
    readonly_fields = ("issuer", "subject", "groups", "admin_by_rule", "created_at", "last_sign_in_at")
    autocomplete_fields = ["user"]
