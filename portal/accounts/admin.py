from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from portal.accounts.models import ApiToken, Membership, Notification, Team, User


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(User)
class PortalUserAdmin(UserAdmin):
    fieldsets = (*UserAdmin.fieldsets, ("Cluster", {"fields": ("cluster_identity",)}))
    list_display = ("username", "email", "first_name", "last_name", "is_staff", "is_active")


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    # Its leads set the Hugging Face token on the team's settings page; the admin never shows it.
    exclude = ("hf_token",)
    list_display = (
        "slug",
        "name",
        "quota_gpus",
        "monthly_budget",
        "auto_approve_max_gpus",
        "auto_approve_max_hours",
        "max_lifetime_hours",
    )
    search_fields = ("slug", "name")
    inlines = [MembershipInline]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "prefix", "created_at", "expires_at", "revoked_at", "last_used_at")
    readonly_fields = ("prefix", "token_hash", "created_at", "last_used_at")
    list_filter = ("revoked_at",)


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("user", "message", "created_at", "read_at")
