"""Token scopes: read only reads, workloads does all but manage tokens, admin does all; a token
making a token needs admin, may give no wider scope, and may not make one that outlives it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.accounts.models import ApiToken
from portal.accounts.services import token_create
from tests.conftest import bearer

pytestmark = pytest.mark.django_db


def test_a_read_token_reads_and_writes_nothing(researcher, team):
    _, raw = token_create(user=researcher, name="ro", scope="read")
    api = bearer(raw)
    assert api.get("/api/v1/sandboxes").status_code == 200
    refused = api.post(
        "/api/v1/sandboxes", {"team": "vision", "name": "x", "gpu": {"type": "h100-80gb"}}, format="json"
    )
    assert refused.status_code == 403 and "read-only" in refused.json()["error"]["message"]


def test_a_workloads_token_may_not_manage_tokens(researcher):
    _, raw = token_create(user=researcher, name="ci")
    api = bearer(raw)
    assert api.get("/api/v1/tokens").status_code == 200
    answer = api.post("/api/v1/tokens", {"name": "more"}, format="json")
    assert answer.status_code == 403 and "admin scope" in answer.json()["error"]["message"]
    assert ApiToken.objects.count() == 1


def test_a_token_never_mints_one_that_outlives_it(researcher):
    day, raw = token_create(user=researcher, name="day", expires_days=1, scope="admin")
    api = bearer(raw)
    unsaid = api.post("/api/v1/tokens", {"name": "unsaid", "scope": "admin"}, format="json")
    assert unsaid.status_code == 201  # no expiry asked: it expires with the token that made it
    assert ApiToken.objects.get(name="unsaid").expires_at == day.expires_at
    ApiToken.objects.filter(name="unsaid").delete()
    week = api.post("/api/v1/tokens", {"name": "week", "expires_days": 7}, format="json")
    assert week.status_code == 400 and "expires_days" in week.json()["error"]["fields"]
    child = api.post("/api/v1/tokens", {"name": "child", "expires_days": 1, "scope": "read"}, format="json")
    # a day from now, made a moment after the parent: a hair later than it, so refused too
    assert child.status_code == 400
    assert ApiToken.objects.count() == 1
    ApiToken.objects.filter(pk=day.pk).update(expires_at=timezone.now() + timedelta(days=2))
    child = api.post("/api/v1/tokens", {"name": "child", "expires_days": 1, "scope": "read"}, format="json")
    assert child.status_code == 201 and child.json()["scope"] == "read" and child.json()["expires_at"]


def test_an_admin_token_of_the_default_expiry_may_mint_and_the_session_picks_any_scope(
    researcher, researcher_client
):
    _, raw = token_create(user=researcher, name="root", scope="admin")
    made = bearer(raw).post("/api/v1/tokens", {"name": "ci", "scope": "workloads"}, format="json")
    # the default lifetime, cut to the token making it, made a moment earlier
    assert made.status_code == 201 and made.json()["expires_at"] is not None
    assert ApiToken.objects.get(name="ci").expires_at == ApiToken.objects.get(name="root").expires_at
    page = researcher_client.post(
        "/tokens/", {"name": "nb", "scope": "read", "expires_days": ""}
    ).content.decode()
    assert "Read only" in page and ApiToken.objects.get(name="nb").scope == "read"
    bad = bearer(raw).post("/api/v1/tokens", {"name": "x", "scope": "god"}, format="json")
    assert bad.status_code == 400 and "scope" in bad.json()["error"]["fields"]


def test_tokens_made_before_scopes_keep_all_they_could_do():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    plan_state = executor.loader.project_state(("accounts", "0008_token_scope"))
    field = plan_state.apps.get_model("accounts", "ApiToken")._meta.get_field("scope")
    assert field.default == "workloads"  # new ones
    migration = executor.loader.get_migration("accounts", "0008_token_scope")
    assert migration.operations[0].field.default == "admin"  # existing rows


def test_a_workloads_token_may_not_point_its_users_notifications_elsewhere(researcher, settings):
    """A webhook set with a leaked token would keep receiving its user's notifications after the
    token is revoked; muting would hide that from them."""
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = True
    _, raw = token_create(user=researcher, name="ci")
    api = bearer(raw)
    assert api.get("/api/v1/notifications/preferences").status_code == 200
    answer = api.put(
        "/api/v1/notifications/preferences", {"webhook_url": "https://127.0.0.1/x"}, format="json"
    )
    assert answer.status_code == 403 and "admin scope" in answer.json()["error"]["message"]
    _, admin_raw = token_create(user=researcher, name="admin", scope="admin")
    changed = bearer(admin_raw).put(
        "/api/v1/notifications/preferences", {"webhook_url": "https://127.0.0.1/x"}, format="json"
    )
    assert changed.status_code == 200 and changed.json()["webhook_url"] == "https://127.0.0.1/x"
