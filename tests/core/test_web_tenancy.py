"""Every web route on one object answers a researcher or a lead of another team 404, as the API
does: never a message that tells them the object exists; anonymous visitors are sent to sign in.
Routes come from the URL configuration, so a new route is covered without being listed here."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.core.tenancy import ROLES, kind_of, lead_of, object_routes, team_objects, url_for

pytestmark = pytest.mark.django_db

ROUTES = [route for route, _ in object_routes(api=False)]
DATA = {"hours": "2", "replicas": "2", "users": "carol", "approve": "1", "reason": "no", "confirm": "yes"}
# The fleet is the platform admins': anyone else gets 403, as on its page, or is sent back to it
# with the message that it is theirs (before any object is looked up). The catalog of models
# is the platform's, not a team's: every signed-in user reads it.
ADMIN_KINDS = {"node"}
SHARED_KINDS = {"catalog"}


def test_every_object_route_is_tried():
    assert [route for route in ROUTES if kind_of(route) is None] == []
    kinds = {kind_of(route) for route in ROUTES}
    assert {"token", "sandbox", "approval", "deployment", "team", "node"} <= kinds


@pytest.fixture
def objects(researcher, team, whole_gpus, fleet, catalog):
    return team_objects(researcher=researcher, team=team, gpus=whole_gpus, fleet=fleet)


@pytest.fixture
def catalog(db):
    from portal.catalog.demo import catalog_seed

    catalog_seed()


@pytest.fixture
def visitor(request, other_researcher, other_team) -> Client:
    client = Client()
    if request.param == "researcher_of_another_team":
        client.force_login(other_researcher)
    elif request.param == "lead_of_another_team":
        client.force_login(lead_of(other_team))
    return client


@pytest.mark.parametrize("visitor", ROLES, indirect=True)
@pytest.mark.parametrize("route", ROUTES)
def test_a_visitor_outside_the_team_cannot_tell_the_object_exists(route, visitor, objects):
    kind = kind_of(route)
    url = url_for(route, objects[kind], objects)
    anonymous = "_auth_user_id" not in visitor.session
    answers = {"post": visitor.post(url, DATA), "get": visitor.get(url)}
    statuses = {method: answer.status_code for method, answer in answers.items()}
    allowed = {method: answer for method, answer in answers.items() if answer.status_code != 405}

    assert allowed, (url, statuses)
    for method, answer in allowed.items():
        if anonymous:
            assert answer.status_code == 302, (method, url, statuses)
            assert answer["Location"].startswith("/login/?next="), (method, url, answer["Location"])
        elif kind in ADMIN_KINDS:
            assert answer.status_code == 403 or answer["Location"].startswith("/fleet/"), (url, statuses)
        elif kind in SHARED_KINDS:
            assert answer.status_code == 200, (method, url, statuses)
        else:
            assert answer.status_code == 404, (method, url, statuses)


@pytest.mark.parametrize("slug", ["nlp", "no-such-team"])
def test_spend_of_a_team_the_lead_may_not_see_is_404_as_a_missing_one(slug, lead_client, other_team):
    assert lead_client.get("/spend/", {"team": slug}).status_code == 404


def test_spend_of_a_team_the_researcher_does_not_lead_is_404(researcher_client, other_team):
    assert researcher_client.get("/spend/", {"team": "nlp"}).status_code == 404


def test_a_lead_still_sees_the_spend_of_their_own_team(lead_client, team):
    answer = lead_client.get("/spend/", {"team": "vision"})

    assert answer.status_code == 200
    assert answer.context["form"].chosen_team() == team
