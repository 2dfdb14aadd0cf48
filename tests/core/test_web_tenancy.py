"""Every web POST route on an object answers another team's researcher 404, as the API does: never
a message that tells them the object exists. Routes come from the URL configuration, so a new
route is covered without being listed here."""

from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from portal.workloads.models import Approval
from tests.rows import make_sandbox

pytestmark = pytest.mark.django_db


def _object_routes(patterns, prefix=""):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from _object_routes(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern) and "<int:pk>" in str(entry.pattern):
            route = prefix + str(entry.pattern)
            if not route.startswith(("api/", "admin/")):
                yield route


ROUTES = sorted(set(_object_routes(get_resolver().url_patterns)))
DATA = {"hours": "2", "replicas": "2", "users": "carol", "approve": "1", "reason": "no", "confirm": "yes"}


def test_the_routes_are_found():
    assert any(r.startswith("sandboxes/") for r in ROUTES) and any(
        r.startswith("deployments/") for r in ROUTES
    )


@pytest.mark.parametrize("route", ROUTES)
def test_another_teams_researcher_gets_404(route, client, researcher, team, other_researcher, whole_gpus):
    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0])
    if route.startswith("deployments/"):
        sandbox.kind = "deployment"
        sandbox.save(update_fields=["kind"])
    pk = sandbox.pk
    if route.startswith("approvals/"):
        pk = Approval.objects.create(
            workload=sandbox, team=team, kind=Approval.Kind.CREATE, requested_by=researcher
        ).pk
    client.force_login(other_researcher)
    url = "/" + route.replace("<int:pk>", str(pk))
    answer = client.post(url, DATA)
    if route.startswith("fleet/"):  # the fleet is the platform admins': 403, as its page
        assert answer.status_code == 403, url
        return
    assert answer.status_code in (404, 405), (url, answer.status_code)
    if answer.status_code == 405:
        assert client.get(url).status_code == 404, url
