"""The whole API against its OpenAPI schema, property-based (schemathesis): requests made from the
schema, valid ones and invalid ones, sent in-process to Django's WSGI app with a real token of the
demo data's researcher (alice) and of its lead (bob). No answer is a server error; every status
code, content type and body is one the schema documents; what the schema calls invalid is refused
so a client generated from the schema is right.

Bounded: a fixed seed (Hypothesis derandomized) and EXAMPLES requests of each kind per operation,
so a run is the same every time and takes a minute or two. Every operation is tried and every
failure reported together, operation by operation."""

from __future__ import annotations

import time

import pytest
import schemathesis
from django.core.cache import caches
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, connection
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from portal.accounts.models import ApiToken, User
from portal.accounts.services import token_create

pytestmark = pytest.mark.django_db
# The fuzzing runs once per `make test`, in its PostgreSQL pass (the production database): the
# API's shape is the same on SQLite, and a second run would add a minute to the suite.
ONCE = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="runs in the PostgreSQL pass of make test"
)

EXAMPLES = 15  # per operation, per kind (valid, invalid), per caller
# Not positive_data_acceptance: a request can be valid by the schema and still refused by a rule
# no schema can hold (a team the caller is not in, a GPU type that is not in the fleet, a name
# already taken), and the API says so with a 400. What the schema can say, it says.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
# Operations that are no caller's to fuzz: the node agents' readings take a node credential.
SKIPPED = {"POST /api/v1/telemetry/readings"}


def api_schema():
    document = SchemaGenerator().get_schema(request=None, public=True)
    loaded = schemathesis.openapi.from_dict(document)
    loaded.app = WSGIHandler()  # Django's WSGI app, as portal/wsgi.py serves it
    return loaded


def operations():
    found = [result.ok() for result in api_schema().get_all_operations()]
    return sorted((op for op in found if op.label not in SKIPPED), key=lambda op: op.label)


def bearer(username: str) -> dict[str, str]:
    _, raw = token_create(user=User.objects.get(username=username), name="fuzz", scope=ApiToken.Scope.ADMIN)
    return {"Authorization": f"Bearer {raw}"}


def failures_of(operation, mode: GenerationMode, who: str, headers: dict[str, str]) -> str | None:
    """The first failure of EXAMPLES requests of `mode` to `operation`, or None."""

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],  # no shrinking: the report names the request
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case):
        caches["throttle"].clear()  # the API's rate limit is not what is tried here
        case.call_and_validate(headers=headers, checks=CHECKS)

    try:
        run()
    except Unsatisfiable:  # nothing invalid to send: a path parameter that takes any string
        return None
    except (Exception, BaseExceptionGroup) as failure:  # schemathesis groups what one request broke
        return f"{operation.label} as {who} ({mode.value}): {str(failure).strip()[:1500]}"
    return None


def test_the_schema_is_all_tried():
    labels = {operation.label for operation in operations()}
    assert len(labels) >= 50
    assert {"GET /api/v1/sandboxes", "POST /api/v1/sandboxes", "GET /api/v1/spend"} <= labels


@pytest.fixture
def connections_kept():
    """Requests go through Django's WSGI handler, which closes database connections it finds
    unusable at each request's start and end; inside the test's transaction (on PostgreSQL) that
    would close the test's own. Django's test client keeps them the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@ONCE
@pytest.mark.long
def test_the_api_keeps_to_its_schema(db, connections_kept):
    from portal.demo.seed import demo_seed

    demo_seed()
    callers = {"alice": bearer("alice"), "bob": bearer("bob")}
    started = time.monotonic()
    found = [
        failure
        for operation in operations()
        for caller, headers in callers.items()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
        if (failure := failures_of(operation, mode, caller, headers))
    ]
    print(f"schemathesis: {len(operations())} operations in {time.monotonic() - started:.0f} s")
    assert not found, f"{len(found)} failures:\n\n" + "\n\n".join(found)


# What the run above found, pinned by name so that a regression says what it is.


def test_an_api_path_that_names_no_route_is_a_404_in_the_error_shape(alice):
    answer = alice.get("/api/v1/sandboxes/-3/cost")

    assert answer.status_code == 404
    assert answer["Content-Type"] == "application/json"
    assert answer.json()["error"]["code"] == "not_found"


def test_a_yes_or_no_filter_refuses_what_is_neither(alice):
    for url in ("/api/v1/catalog/models?fits=maybe", "/api/v1/sandboxes?live=1.5"):
        answer = alice.get(url)
        assert answer.status_code == 400, url
        assert list(answer.json()["error"]["fields"]) in (["fits"], ["live"])


def test_a_report_parameter_given_empty_is_refused(alice, team):
    answer = alice.get("/api/v1/spend", {"team": ""})

    assert answer.status_code == 400
    assert answer.json()["error"]["fields"] == {"team": ["Give a value, or leave the parameter out."]}


def test_the_schema_says_the_bounds_the_api_enforces():
    document = SchemaGenerator().get_schema(request=None, public=True)
    page_size = next(
        p for p in document["paths"]["/api/v1/tokens"]["get"]["parameters"] if p["name"] == "page_size"
    )
    expires = document["components"]["schemas"]["TokenCreateRequest"]["properties"]["expires_days"]

    assert (page_size["schema"]["minimum"], page_size["schema"]["maximum"]) == (1, 500)
    assert (expires["minimum"], expires["maximum"]) == (1, 365)  # PORTAL_TOKEN_MAX_DAYS
    assert "404" in document["paths"]["/api/v1/sandboxes"]["get"]["responses"]  # a page past the last
    assert "404" in document["paths"]["/api/v1/spend"]["get"]["responses"]  # a team not yours
