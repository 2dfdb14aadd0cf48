"""Every API route on one object, with every method it allows, answers a caller outside the
object's team 404 in the API's error shape, as if the object did not exist, and anonymous callers
401 or 403. Routes come from the URL configuration: a new route is tried without being listed
here, and a route whose object the matrix cannot make fails `test_every_object_route_is_tried`."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.core.tenancy import ROLES, kind_of, lead_of, object_routes, team_objects, url_for

pytestmark = pytest.mark.django_db

ROUTES = object_routes(api=True)
# Bodies plausible enough for every action, so that an answer is about the object, not the body.
BODY = {
    "hours": 2,
    "replicas": 2,
    "users": ["carol"],
    "reason": "no",
    "comment": "no",
    "budget": "100.00",
    "monthly_budget": "100.00",
    "monthly_amount": "100.00",
    "days": 7,
    "ttl_hours": 2,
    "month": "2026-03",
}
# Objects anyone may read (api.md): the catalog of models is the platform's, not a team's.
SHARED_KINDS = {"catalog"}


def methods_of(pattern) -> list[str]:
    view = pattern.callback.cls
    return [m for m in view.http_method_names if hasattr(view, m) and m not in ("options", "head")]


MATRIX = [
    pytest.param(route, method, role, id=f"{method.upper()} {route} as {role}")
    for route, pattern in ROUTES
    for method in methods_of(pattern)
    for role in ROLES
]


def test_every_object_route_is_tried():
    assert len(ROUTES) >= 25, ROUTES
    assert [route for route, _ in ROUTES if kind_of(route) is None] == []
    kinds = {kind_of(route) for route, _ in ROUTES}
    assert {"token", "sandbox", "approval", "deployment", "team"} <= kinds


@pytest.fixture
def objects(researcher, team, whole_gpus, fleet, catalog):
    return team_objects(researcher=researcher, team=team, gpus=whole_gpus, fleet=fleet)


@pytest.fixture
def catalog(db):
    from portal.catalog.demo import catalog_seed

    catalog_seed()


@pytest.fixture
def caller(request, client_for, other_researcher, other_team) -> APIClient:
    role = request.param
    if role == "researcher_of_another_team":
        return client_for(other_researcher)
    if role == "lead_of_another_team":
        return client_for(lead_of(other_team))
    return APIClient()


@pytest.mark.parametrize(("route", "method", "caller"), [p.values for p in MATRIX], indirect=["caller"])
def test_a_caller_outside_the_team_cannot_tell_the_object_exists(route, method, caller, objects):
    kind = kind_of(route)
    url = url_for(route, objects[kind], objects)
    anonymous = caller._credentials == {}
    if method == "get":  # the query a read takes (a view refuses parameters it does not take)
        answer = caller.get(url, {"month": BODY["month"]} if url.endswith("/statement") else {})
    else:
        answer = getattr(caller, method)(url, BODY, format="json")

    if kind in SHARED_KINDS:
        assert answer.status_code == 200, (url, answer.status_code)
        return
    error = answer.json()["error"]
    if anonymous:
        assert (answer.status_code, error["code"]) == (401, "unauthenticated"), url
    else:
        assert (answer.status_code, error["code"]) == (404, "not_found"), (url, error)


def test_spend_of_a_team_the_caller_may_not_see_is_404_as_a_missing_one(bob, other_team):
    hidden = bob.get("/api/v1/spend", {"team": "nlp"})
    missing = bob.get("/api/v1/spend", {"team": "no-such-team"})

    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["error"]["code"] == "not_found"
    assert hidden.json() == {
        "error": {
            **missing.json()["error"],
            "message": missing.json()["error"]["message"].replace("no-such-team", "nlp"),
        }
    }


def test_spend_of_a_team_the_researcher_is_not_in_is_404(alice, other_team):
    assert alice.get("/api/v1/spend", {"team": "nlp"}).status_code == 404


def test_a_lead_still_sees_the_spend_of_their_own_team(bob, team):
    answer = bob.get("/api/v1/spend", {"team": "vision"})

    assert answer.status_code == 200
    assert answer.json()["team"] == "vision"
