"""Account pages: personal access tokens, notifications, and the page of a locked-out sign-in."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import LoginView
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from portal.accounts.forms import PortalAuthenticationForm, SshKeyForm, TokenCreateForm
from portal.accounts.models import (
    NOT_EMAILED,
    ApiToken,
    NotificationChannel,
    NotificationKind,
    SshKey,
    WebhookFormat,
)
from portal.accounts.notifications import (
    is_muted,
    notification_kinds_for,
    notification_settings_of,
    notification_settings_update,
)
from portal.accounts.selectors import (
    email_deliveries_of,
    lead_team_ids,
    notifications_of,
    recent_notifications,
    tokens_of,
    user_teams,
    webhook_deliveries_of,
)
from portal.accounts.services import TOKEN_WARNING_DAYS, notifications_mark_read, token_create, token_revoke
from portal.accounts.ssh_keys import ssh_key_add, ssh_key_remove, ssh_keys_of
from portal.accounts.team_settings import IDLE_BOUNDS, team_settings_of, team_settings_set
from portal.core.errors import DomainError, NotAllowed, NotFound, ValidationFailed
from portal.core.views import fragment, login_required, page, wants_fragment
from portal.core.web import error_messages, run_service

TOKEN_FIELDS = ("name", "expires_days", "scope", "team")


class PortalLoginView(LoginView):
    """The sign-in page: "Sign in with <provider>" when single sign-on is configured, the password
    form unless PORTAL_LOCAL_LOGIN is off."""

    authentication_form = PortalAuthenticationForm
    redirect_authenticated_user = True
    template_name = "registration/login.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["sso_enabled"] = bool(settings.PORTAL_OIDC_ISSUER)
        context["sso_provider_name"] = settings.PORTAL_OIDC_PROVIDER_NAME
        context["local_login"] = settings.PORTAL_LOCAL_LOGIN
        return context


def sign_in_locked_out(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: dict | None = None
) -> HttpResponse:
    """django-axes' lockout answer, for the portal's sign-in and the admin's: a 429 saying why,
    for how long, and who can unlock it sooner."""
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    context = {
        "username": username,
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "minutes": round(settings.AXES_COOLOFF_TIME.total_seconds() / 60),
    }
    return render(request, "registration/locked_out.html", context, status=429)


@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    """List my tokens; a POST creates one and shows its secret this once. `?scope=` picks the
    new token's scope (a deployment's page links here for a serving token)."""
    asked = request.GET.get("scope", "")
    initial = {"scope": asked, "team": request.GET.get("team", "")} if asked in ApiToken.Scope.values else {}
    teams = user_teams(request.user)
    form = TokenCreateForm(request.POST or None, initial=initial, teams=teams)
    created = secret = None
    if request.method == "POST" and form.is_valid():
        try:
            created, secret = token_create(
                user=request.user,
                name=form.cleaned_data["name"],
                expires_days=form.cleaned_data["expires_days"],
                scope=form.cleaned_data["scope"] or ApiToken.Scope.WORKLOADS,
                team=form.cleaned_data["team"],
            )
        except DomainError as error:
            for key, messages in error.fields.items():
                for message in messages:
                    form.add_error(key if key in TOKEN_FIELDS else None, message)
        else:
            form = TokenCreateForm(teams=teams)
    context = {"form": form, "created": created, "secret": secret, **_tokens_context(request)}
    if request.method == "POST" and wants_fragment(request):
        return fragment(request, "accounts/partials/tokens_panel.html", context)
    return page(request, "accounts/tokens.html", context)


def _tokens_context(request: HttpRequest) -> dict:
    """The user's tokens and the times their table compares with (expired; expiring soon)."""
    now = timezone.now()
    return {"tokens": tokens_of(request.user), "now": now, "soon": now + timedelta(days=TOKEN_WARNING_DAYS)}


@login_required
@require_POST
def token_revoke_view(request: HttpRequest, pk: int) -> HttpResponse:
    run_service(request, lambda: token_revoke(user=request.user, token_id=pk), success="Token revoked.")
    if wants_fragment(request):
        context = {"form": TokenCreateForm(teams=user_teams(request.user)), **_tokens_context(request)}
        return fragment(request, "accounts/partials/tokens_panel.html", context)
    return redirect("tokens")


def _ssh_keys_context(request: HttpRequest, form: SshKeyForm, added: SshKey | None = None) -> dict:
    return {"form": form, "keys": list(ssh_keys_of(request.user)), "added": added}


@login_required
@require_http_methods(["GET", "POST"])
def ssh_keys_page(request: HttpRequest) -> HttpResponse:
    """My SSH public keys; a POST adds one. Every shell sandbox of mine gets them all."""
    form = SshKeyForm(request.POST or None)
    added = None
    if request.method == "POST" and form.is_valid():
        try:
            added = ssh_key_add(
                user=request.user, name=form.cleaned_data["name"], public_key=form.cleaned_data["public_key"]
            )
        except DomainError as error:
            form.add_error("public_key" if error.fields else None, error.message)
        else:
            form = SshKeyForm()
    context = _ssh_keys_context(request, form, added)
    if request.method == "POST" and wants_fragment(request):
        return fragment(request, "accounts/partials/ssh_keys_panel.html", context)
    return page(request, "accounts/ssh_keys.html", context)


@login_required
@require_POST
def ssh_key_remove_view(request: HttpRequest, pk: int) -> HttpResponse:
    run_service(request, lambda: ssh_key_remove(user=request.user, key_id=pk), success="SSH key removed.")
    if wants_fragment(request):
        return fragment(
            request, "accounts/partials/ssh_keys_panel.html", _ssh_keys_context(request, SshKeyForm())
        )
    return redirect("ssh-keys")


@login_required
@require_POST
def notifications_read(request: HttpRequest) -> HttpResponse:
    """Mark every notification read; htmx gets the list back with the unread badge out of band."""
    notifications_mark_read(user=request.user)
    if request.POST.get("back") == "notifications":
        return redirect("notifications")
    if wants_fragment(request):
        return fragment(
            request,
            "accounts/partials/notifications.html",
            {"notifications": recent_notifications(request.user)},
        )
    return redirect("dashboard")


@login_required
@require_http_methods(["GET", "POST"])
def team_settings(request: HttpRequest, slug: str) -> HttpResponse:
    """A team's settings for its leads (and platform admins): the Hugging Face token, the team's
    webhook and its approval reminders."""
    try:
        team = team_settings_of(user=request.user, slug=slug)
    except NotFound as error:
        raise Http404(error.message) from error  # as for a team that does not exist: never that it does
    except NotAllowed as error:
        raise PermissionDenied(error.message) from error
    errors: list[str] = []
    notification_errors: list[str] = []
    reminder_errors: list[str] = []
    idle_errors: list[str] = []
    if request.method == "POST" and request.POST.get("section") == "idle":
        idle = {name: request.POST.get(name, "") for name in IDLE_BOUNDS}
        try:
            team_settings_set(user=request.user, slug=team.slug, **idle)
        except DomainError as error:
            idle_errors = error_messages(error)
        else:
            messages.success(request, "Idle reclaim saved.")
            return redirect("team-settings", slug=team.slug)
    elif request.method == "POST" and request.POST.get("section") == "notifications":
        try:
            team_settings_set(
                user=request.user,
                slug=team.slug,
                webhook_url=request.POST.get("webhook_url", ""),
                webhook_format=request.POST.get("webhook_format", WebhookFormat.GENERIC),
                approval_reminder_hours=request.POST.get("approval_reminder_hours", ""),
            )
        except DomainError as error:
            if "approval_reminder_hours" in (getattr(error, "fields", None) or {}):
                reminder_errors = error_messages(error)  # shown at that field, not the webhook's
            else:
                notification_errors = error_messages(error)
            team.refresh_from_db()
            posted = request.POST  # shown as typed, not as saved: nothing typed is lost
            team.webhook_url = posted.get("webhook_url", "")
            team.webhook_format = posted.get("webhook_format", team.webhook_format)
            team.approval_reminder_hours = posted.get("approval_reminder_hours", "")
        else:
            messages.success(request, "Team notifications saved.")
            return redirect("team-settings", slug=team.slug)
    elif request.method == "POST":
        token = "" if request.POST.get("clear") else request.POST.get("token", "").strip()
        try:
            if not token and not request.POST.get("clear"):
                raise ValidationFailed("Paste a token to save it (Remove token takes the one set away).")
            team_settings_set(user=request.user, slug=team.slug, hf_token=token)
        except DomainError as error:
            errors = error_messages(error)
        else:
            messages.success(request, "Hugging Face token saved." if token else "Hugging Face token removed.")
            return redirect("team-settings", slug=team.slug)
    context = {
        "team": team,
        "errors": errors,
        "notification_errors": notification_errors,
        "reminder_errors": reminder_errors,
        "idle_errors": idle_errors,
        "idle_posted": request.POST if idle_errors else None,
        "webhook_formats": WebhookFormat.choices,
        "deliveries": webhook_deliveries_of(team=team),
    }
    status = 400 if errors or notification_errors or reminder_errors or idle_errors else 200
    return page(request, "accounts/team_settings.html", context, status=status)


NOTIFICATIONS_PAGE_SIZE = 25


def _never(kind: str, channel: str) -> bool:
    return channel == NotificationChannel.EMAIL and kind in NOT_EMAILED


def _notifications_context(request: HttpRequest, errors: list[str] | None = None) -> dict:
    """The notifications page; after a refused save, its preferences as they were posted (the
    boxes, the webhook), not as saved, so that nothing typed or unticked is lost."""
    posted = request.POST if errors else None
    order = "unread" if request.GET.get("order") == "unread" else "newest"
    page_obj = Paginator(notifications_of(request.user, order=order), NOTIFICATIONS_PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    prefs = notification_settings_of(request.user)
    rows = [
        (
            kind,
            label,
            [
                # None: this channel never carries this kind (no box to tick)
                (
                    channel,
                    None
                    if _never(kind, channel)
                    else (
                        f"{channel}:{kind}" in posted
                        if posted is not None
                        else not is_muted(prefs, kind=kind, channel=channel)
                    ),
                )
                for channel in NotificationChannel.values
            ],
        )
        for kind, label in _kinds_for(request.user)
    ]
    return {
        "page_obj": page_obj,
        "order": order,
        "prefs": prefs,
        "pref_rows": rows,
        "webhook_url": posted.get("webhook_url", "") if posted is not None else prefs.webhook_url,
        "webhook_format": posted.get("webhook_format", "") if posted is not None else prefs.webhook_format,
        "channels": NotificationChannel.choices,
        "webhook_formats": WebhookFormat.choices,
        "deliveries": webhook_deliveries_of(user=request.user),
        "emails": email_deliveries_of(request.user),
        "errors": errors or [],
    }


def _kinds_for(user) -> list[tuple[str, str]]:
    return notification_kinds_for(user, leads_a_team=bool(lead_team_ids(user)))


@login_required
@require_GET
def notifications_page(request: HttpRequest) -> HttpResponse:
    """All of the user's notifications, paginated, and their preferences per kind and channel."""
    return page(request, "notifications/index.html", _notifications_context(request))


@login_required
@require_POST
def notification_read(request: HttpRequest, pk: int) -> HttpResponse:
    """Mark one notification read and go back to the notifications page."""
    try:
        notifications_mark_read(user=request.user, notification_id=pk)
    except NotFound as missing:
        raise Http404(missing.message) from missing
    return redirect("notifications")


@login_required
@require_POST
def notification_preferences(request: HttpRequest) -> HttpResponse:
    """Save the preferences form: a ticked box keeps a kind on a channel; a kind the form does not
    show (one that cannot reach this user now), or shows without a box on a channel that never
    carries it, keeps what it was."""
    shown = {kind for kind, _ in _kinds_for(request.user)}
    prefs = notification_settings_of(request.user)
    muted = {
        channel: [
            kind
            for kind in NotificationKind.values
            if (
                f"{channel}:{kind}" not in request.POST
                if kind in shown and not _never(kind, channel)
                else is_muted(prefs, kind=kind, channel=channel)
            )
        ]
        for channel in NotificationChannel.values
    }
    try:
        notification_settings_update(
            user=request.user,
            muted=muted,
            webhook_url=request.POST.get("webhook_url", ""),
            webhook_format=request.POST.get("webhook_format", WebhookFormat.GENERIC),
        )
    except DomainError as error:
        errors = error_messages(error)
        return page(request, "notifications/index.html", _notifications_context(request, errors), status=400)
    messages.success(request, "Notification preferences saved.")
    return redirect("notifications")
