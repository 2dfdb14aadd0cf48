"""Reads over accounts: roles (who may see and do what), notifications and tokens."""

from __future__ import annotations

from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet

from portal.accounts.models import (
    ApiToken,
    EmailDelivery,
    Membership,
    Notification,
    Team,
    User,
    WebhookDelivery,
)
from portal.core.errors import NotAllowed


def user_role(*, user: User, team: Team) -> str | None:
    """'lead', 'researcher' or None for a user outside the team."""
    membership = Membership.objects.filter(user=user, team=team).only("role").first()
    return membership.role if membership else None


def is_lead(*, user: User, team: Team) -> bool:
    return user_role(user=user, team=team) == Membership.Role.LEAD


def lead_team_ids(user: User) -> list[int]:
    return list(user.memberships.filter(role=Membership.Role.LEAD).values_list("team_id", flat=True))


def lead_teams(user: User) -> list[Team]:
    """The teams `user` leads, in one query."""
    led = Membership.objects.filter(user=user, role=Membership.Role.LEAD).values("team_id")
    return list(Team.objects.filter(pk__in=led).only("slug", "name"))


def user_teams(user: User) -> list[Team]:
    return [m.team for m in user.memberships.select_related("team").order_by("team__slug")]


PLATFORM_ADMIN = Q(is_staff=True) | Q(is_superuser=True)  # as User.is_platform_admin, in SQL


def platform_admins() -> list[User]:
    """The active platform admins, by username."""
    return list(User.objects.filter(PLATFORM_ADMIN, is_active=True).order_by("username"))


def is_platform_admin_id(user_id: int) -> bool:
    """Whether the user of this id is a platform admin, without reading the whole user."""
    return User.objects.filter(PLATFORM_ADMIN, pk=user_id).exists()


def team_leads(team: Team) -> list[User]:
    return [m.user for m in team.memberships.filter(role=Membership.Role.LEAD).select_related("user")]


def team_leads_by_team(team_ids: list[int]) -> dict[int, list[User]]:
    """The leads of each of these teams, by team id, in one query."""
    return team_members_by_team(team_ids, role=Membership.Role.LEAD)


def team_members_by_team(team_ids: list[int], *, role: str | None = None) -> dict[int, list[User]]:
    """The active members of each of these teams (of `role`, if given), by team id, by username,
    in one query."""
    found: dict[int, list[User]] = {}
    memberships = Membership.objects.filter(team_id__in=team_ids, user__is_active=True)
    if role is not None:
        memberships = memberships.filter(role=role)
    for membership in memberships.select_related("user").order_by("user__username"):
        found.setdefault(membership.team_id, []).append(membership.user)
    return found


def team_members(team: Team) -> list[User]:
    """The team's active members, leads included, by name."""
    return team_members_by_team([team.pk]).get(team.pk, [])


def team_has_hf_token(slug: str) -> bool:
    """Whether the team has a Hugging Face token for its model servers (gated models need one)."""
    team = Team.objects.filter(slug=slug).only("hf_token").first()
    return team is not None and bool(team.hf_token)


def can_manage(*, user: User, team: Team, owner: User) -> bool:
    """Owner, a lead of the team, or a platform admin."""
    return user.pk == owner.pk or user.is_platform_admin or is_lead(user=user, team=team)


def member_team_ids(user: User) -> frozenset[int]:
    """The ids of the teams the user is in."""
    return frozenset(Membership.objects.filter(user=user).values_list("team_id", flat=True))


def owner_left_team(
    *, user: User, team_id: int, owner_id: int, team_ids: frozenset[int] | None = None
) -> bool:
    """Whether `user` owns work of a team they are no longer in (an admin never counts): they may
    still end it there, but not spend more of the team's money on it. `team_ids`: the user's
    teams, where the caller has read them (a list, once)."""
    if user.pk != owner_id or user.is_platform_admin:
        return False
    if team_ids is not None:
        return team_id not in team_ids
    return not Membership.objects.filter(user=user, team_id=team_id).exists()


def owner_shut_out(owner: User, *, team_id: int) -> bool:
    """Whether the owner of running work of a team has lost the ways into it (its app through the
    gate, ssh, kubectl): deactivated, or no longer in the team (an admin never counts as having
    left). They may still end it; a lead of the team may too."""
    return not owner.is_active or owner_left_team(user=owner, team_id=team_id, owner_id=owner.pk)


def refuse_owner_who_left(*, user: User, team: Team, owner: User, doing: str) -> None:
    """An owner who is no longer in the team may still end their work there, but not spend more of
    the team's money on it (extend, keep, restart, scale it up): a lead of the team may. Raises
    NotAllowed for such an owner; nothing for anyone else `can_manage` lets in."""
    if not owner_left_team(user=user, team_id=team.pk, owner_id=owner.pk):
        return
    raise NotAllowed(
        f"You are no longer a member of team {team.name}, which pays for it: a lead of the team may "
        f"{doing} it, and you may still end it."
    )


NOTIFICATIONS_SHOWN = 10


def recent_notifications(user: User, *, limit: int = NOTIFICATIONS_SHOWN) -> list[Notification]:
    """The newest notifications, unread and read, for the dashboard."""
    return list(Notification.objects.filter(user=user).order_by("-created_at", "-id")[:limit])


def tokens_of(user: User) -> QuerySet[ApiToken]:
    """The user's personal access tokens, newest first (revoked ones too)."""
    return ApiToken.objects.filter(user=user).select_related("team").order_by("-created_at", "-id")


def notifications_of(user: User, *, order: str = "newest") -> QuerySet[Notification]:
    """All of a user's notifications: newest first, or (`order="unread"`) unread ones first."""
    rows = Notification.objects.filter(user=user)
    if order == "unread":
        unread = ExpressionWrapper(Q(read_at__isnull=True), output_field=BooleanField())
        return rows.annotate(unread=unread).order_by("-unread", "-created_at", "-id")
    return rows.order_by("-created_at", "-id")


def email_deliveries_of(user: User, *, limit: int = 5) -> list[EmailDelivery]:
    """The latest e-mails sent to a user, with how each went."""
    return list(EmailDelivery.objects.filter(user=user).order_by("-created_at", "-id")[:limit])


def webhook_deliveries_of(
    *, user: User | None = None, team: Team | None = None, limit: int = 5
) -> list[WebhookDelivery]:
    """The latest messages posted to a user's or a team's webhook, with how each went."""
    rows = (
        WebhookDelivery.objects.filter(user=user)
        if user is not None
        else WebhookDelivery.objects.filter(team=team)
    )
    return list(rows.order_by("-created_at", "-id")[:limit])


def team_names_by_slug(slugs: set[str]) -> dict[str, str]:
    """Each of these teams' name by its slug, in one query (an unknown slug is left out)."""
    return dict(Team.objects.filter(slug__in=slugs).values_list("slug", "name"))


def teams_by_id(team_ids: QuerySet | list[int]) -> QuerySet:
    """(slug, name) of the teams with these ids (a subquery is fine), by name; read when iterated."""
    return Team.objects.filter(pk__in=team_ids).order_by("name").values_list("slug", "name")


def teams_led_or_all(user: User, led: list[int]) -> QuerySet:
    """(slug, name) of the teams `user` leads (`led`, their ids), or of every team for a platform
    admin, by name; read when iterated."""
    teams = Team.objects.all() if user.is_platform_admin else Team.objects.filter(pk__in=led)
    return teams.order_by("name").values_list("slug", "name")
