"""Global search: workloads (by name, id or project), people (by username or name) and catalog
models (by name, slug or source), each word of the query in one of those; each group bounded,
each with the visibility of its own pages.

Workloads: researchers their own, leads their teams', admins all (as the workload lists).
People: the members of the teams the user belongs to; admins everyone.
Models: every enabled catalog model (the catalog is open to everyone signed in).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from portal.accounts.models import User
from portal.catalog.models import CatalogModel
from portal.catalog.selectors import catalog_entries, catalog_search
from portal.core.errors import ValidationFailed
from portal.core.selectors import every_word_in
from portal.workloads.models import Workload, WorkloadKind
from portal.workloads.selectors import workload_text_match, workloads_visible_to

MIN_QUERY = 2
MAX_QUERY = 100
GROUP_LIMIT = 10  # rows per group; one more is read to know there are more


@dataclass(frozen=True)
class Group:
    """One group of results: at most GROUP_LIMIT rows, and whether more matched."""

    rows: list
    more: bool


@dataclass(frozen=True)
class SearchResults:
    query: str
    workloads: Group
    users: Group
    models: Group

    @property
    def empty(self) -> bool:
        return not (self.workloads.rows or self.users.rows or self.models.rows)


def search_query_error(query: str) -> str:
    """Why `query` cannot be searched ("" when it can). A workload number (`7`, `#7`) may be short."""
    if len(query) < MIN_QUERY and not query.removeprefix("#").isdigit():
        return f"Type at least {MIN_QUERY} characters."
    if len(query) > MAX_QUERY:
        return f"At most {MAX_QUERY} characters."
    return ""


def _bounded(queryset: QuerySet) -> Group:
    rows = list(queryset[: GROUP_LIMIT + 1])
    return Group(rows=rows[:GROUP_LIMIT], more=len(rows) > GROUP_LIMIT)


def workloads_matching(user: User, query: str) -> QuerySet[Workload]:
    """Sandboxes and deployments the user may see whose name or project holds each word of
    `query`, or whose number within its kind it is (`42` or `#42`: sandbox 42 and deployment 42);
    newest first."""
    visible = workloads_visible_to(user, kind=WorkloadKind.SANDBOX) | workloads_visible_to(
        user, kind=WorkloadKind.DEPLOYMENT
    )
    return visible.filter(workload_text_match(query)).select_related("team").order_by("-created_at", "-pk")


def users_matching(user: User, query: str) -> QuerySet[User]:
    """Active people whose username or names hold each word of `query` ("alice researcher"): the
    user's teammates, everyone for admins; by username."""
    people = User.objects.filter(is_active=True)
    if not user.is_platform_admin:
        people = people.filter(memberships__team__memberships__user=user)
    match = every_word_in(query, ("username", "first_name", "last_name"))
    return people.filter(match).distinct().order_by("username")


def models_matching(query: str) -> QuerySet[CatalogModel]:
    return catalog_search(catalog_entries(), query)


def search(*, user: User, query: str) -> SearchResults:
    """Up to GROUP_LIMIT of each kind; ValidationFailed for a query too short or too long."""
    query = query.strip()
    error = search_query_error(query)
    if error:
        raise ValidationFailed(f"q: {error}", fields={"q": [error]})
    return SearchResults(
        query=query,
        workloads=_bounded(workloads_matching(user, query)),
        users=_bounded(users_matching(user, query)),
        models=_bounded(models_matching(query)),
    )
