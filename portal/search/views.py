"""The search page: `/search/?q=`, results grouped by kind, each linking to its page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from portal.core.errors import ValidationFailed
from portal.core.views import login_required, page
from portal.search.selectors import GROUP_LIMIT, MAX_QUERY, MIN_QUERY, search


@login_required
@require_GET
def search_page(request: HttpRequest) -> HttpResponse:
    """An empty query shows the box alone; one too short or too long says why, beside the box."""
    query = request.GET.get("q", "").strip()
    user = request.user
    leads = user.is_platform_admin or user.memberships.filter(role="lead").exists()
    context = {
        "query": query,
        "results": None,
        "error": "",
        "min_query": MIN_QUERY,
        "max_query": MAX_QUERY,
        "group_limit": GROUP_LIMIT,
        "can_see_people_workloads": leads,  # their teams' sandboxes, listed by owner
    }
    if query:
        try:
            context["results"] = search(user=user, query=query)
        except ValidationFailed as error:
            context["error"] = error.fields["q"][0]
    return page(request, "search/search.html", context, fragment="search/partials/results.html")
