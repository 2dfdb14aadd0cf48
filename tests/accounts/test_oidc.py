"""Single sign-on with OpenID Connect, end to end against a real provider on loopback
(oidc-provider-mock): the portal sends the browser to the provider, the provider signs the chosen
subject in with the claims the test gave it and sends the browser back with a code, the portal
exchanges the code, checks the ID token and signs the user in, with teams, roles and platform
admin from the group rules."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.test import Client
from django.urls import reverse
from oidc_provider_mock import run_server_in_thread

from portal.accounts.models import GroupRule, Membership, OidcIdentity, User
from portal.accounts.oidc import PortalOIDCBackend, forget_discovery
from portal.accounts.services import token_authenticate, token_create
from portal.audit.models import AuditEvent
from tests.factories import MembershipFactory, TeamFactory, UserFactory

CLIENT_ID = "gpu-portal"
START = "/oidc/authenticate/"


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    """The identity provider's issuer URL; a real OpenID Connect server on a free loopback port."""
    with run_server_in_thread() as server:
        yield f"http://localhost:{server.server_port}"


@pytest.fixture
def sso(provider, settings) -> str:
    settings.PORTAL_OIDC_ISSUER = provider
    settings.PORTAL_OIDC_PROVIDER_NAME = "Example SSO"
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = "client-secret-for-tests"
    forget_discovery()
    yield provider
    forget_discovery()


@pytest.fixture
def rules(db) -> dict[str, Any]:
    ml, vision = TeamFactory(slug="ml"), TeamFactory(slug="vision")
    GroupRule.objects.create(group="gpu-ml", team=ml, role=GroupRule.Role.MEMBER)
    GroupRule.objects.create(group="gpu-ml-leads", team=ml, role=GroupRule.Role.LEAD)
    GroupRule.objects.create(group="gpu-vision-*", team=vision, role=GroupRule.Role.MEMBER)
    GroupRule.objects.create(group="platform-admins", role=GroupRule.Role.ADMIN)
    return {"ml": ml, "vision": vision}


def start(client: Client) -> tuple[str, dict[str, str]]:
    """Ask the portal to sign in; the provider's authorization URL and its query."""
    response = client.get(START)
    assert response.status_code == 302
    url = response["Location"]
    return url, {key: values[0] for key, values in parse_qs(urlsplit(url).query).items()}


def consent(authorize_url: str, sub: str) -> str:
    """The provider signs `sub` in; the portal callback path and query it redirects to."""
    response = requests.post(authorize_url, data={"sub": sub}, allow_redirects=False, timeout=5)
    assert response.status_code == 302, response.text
    back = urlsplit(response.headers["Location"])
    return f"{back.path}?{back.query}"


def sign_in(client: Client, provider: str, sub: str, **claims: Any):
    """The whole dance for `sub` with these claims at the provider; the portal's last answer."""
    answer = requests.put(f"{provider}/users/{sub}", json=claims, timeout=5)
    assert answer.status_code == 204
    authorize_url, _ = start(client)
    return client.get(consent(authorize_url, sub))


def roles(user: User) -> dict[str, tuple[str, str]]:
    return {m.team.slug: (m.role, m.source) for m in user.memberships.select_related("team")}


def signed_in_as(client: Client) -> User | None:
    user_id = client.session.get("_auth_user_id")
    return User.objects.get(pk=user_id) if user_id else None


def test_first_sign_in_creates_the_user_with_teams_and_roles_from_the_group_rules(sso, rules):
    client = Client()
    groups = ["gpu-ml", "gpu-ml-leads", "gpu-vision-2", "unrelated"]

    response = sign_in(
        client,
        sso,
        "sub-dana",
        email="dana@example.org",
        preferred_username="dana",
        groups=groups,
        given_name="Dana",
    )

    assert response.status_code == 302 and response["Location"] == reverse("dashboard")
    user = signed_in_as(client)
    assert user is not None and user.username == "dana" and user.email == "dana@example.org"
    assert user.first_name == "Dana" and not user.has_usable_password() and not user.is_staff
    assert OidcIdentity.objects.get(user=user).subject == "sub-dana"
    # Lead wins over member for the same team; a glob matches; unknown groups grant nothing.
    assert roles(user) == {"ml": ("lead", "sso"), "vision": ("researcher", "sso")}
    actions = set(AuditEvent.objects.filter(actor=user).values_list("action", flat=True))
    assert {"user.sso_link", "membership.sso_grant", "user.sso_sign_in"} <= actions
    assert client.get(reverse("dashboard")).status_code == 200


def test_changed_groups_at_the_next_sign_in_change_only_what_rules_granted(sso, rules):
    sign_in(
        Client(),
        sso,
        "sub-erin",
        email="erin@example.org",
        groups=["gpu-ml", "gpu-vision-1", "platform-admins"],
    )
    erin = User.objects.get(oidc_identity__subject="sub-erin")
    assert erin.is_staff and roles(erin) == {"ml": ("researcher", "sso"), "vision": ("researcher", "sso")}
    MembershipFactory(user=erin, team=TeamFactory(slug="ops"), role=Membership.Role.LEAD)  # set by hand

    client = Client()
    sign_in(client, sso, "sub-erin", email="erin@example.org", groups=["gpu-ml-leads"])

    erin.refresh_from_db()
    assert signed_in_as(client) == erin
    assert roles(erin) == {"ml": ("lead", "sso"), "ops": ("lead", "manual")}
    assert not erin.is_staff
    assert OidcIdentity.objects.get(user=erin).groups == ["gpu-ml-leads"]
    actions = set(AuditEvent.objects.filter(actor=erin).values_list("action", flat=True))
    assert {"membership.sso_role", "membership.sso_revoke", "user.sso_admin_revoke"} <= actions

    sign_in(Client(), sso, "sub-erin", email="erin@example.org", groups=[])

    assert roles(erin) == {"ops": ("lead", "manual")}


def test_a_platform_admin_made_by_hand_stays_one_without_the_admin_group(sso, rules):
    sign_in(Client(), sso, "sub-fay", email="fay@example.org", groups=[])
    User.objects.filter(oidc_identity__subject="sub-fay").update(is_staff=True)

    sign_in(Client(), sso, "sub-fay", email="fay@example.org", groups=["gpu-ml"])

    assert User.objects.get(oidc_identity__subject="sub-fay").is_staff


def test_users_are_matched_by_subject_not_by_an_unverified_email(sso, rules):
    local = UserFactory(username="gail", email="gail@example.org")
    MembershipFactory(user=local, team=rules["ml"])

    sign_in(Client(), sso, "sub-gail", email="gail@example.org", preferred_username="gail", groups=[])
    other = User.objects.get(oidc_identity__subject="sub-gail")
    sign_in(Client(), sso, "sub-impostor", email="gail@example.org", preferred_username="gail", groups=[])

    assert other != local and other.username == "gail-2"
    assert User.objects.get(oidc_identity__subject="sub-impostor").username == "gail-3"
    assert not OidcIdentity.objects.filter(user=local).exists()


def test_a_verified_email_links_the_first_sign_in_to_the_local_account(sso, rules):
    local = UserFactory(username="hana", email="hana@example.org")
    _, raw = token_create(user=local, name="ci")

    client = Client()
    sign_in(client, sso, "sub-hana", email="hana@example.org", email_verified=True, groups=["gpu-ml"])

    assert signed_in_as(client) == local
    assert OidcIdentity.objects.get(subject="sub-hana").user == local
    assert roles(local) == {"ml": ("researcher", "sso")}
    assert token_authenticate(raw=raw).user == local  # its tokens stay its own


def test_a_deactivated_user_is_refused(sso, rules):
    sign_in(Client(), sso, "sub-ivan", email="ivan@example.org", groups=["gpu-ml"])
    User.objects.filter(oidc_identity__subject="sub-ivan").update(is_active=False)

    client = Client()
    response = sign_in(
        client, sso, "sub-ivan", email="ivan@example.org", groups=["gpu-ml", "platform-admins"]
    )

    assert response.status_code == 302 and response["Location"] == reverse("login")
    assert signed_in_as(client) is None
    page = client.get(reverse("login")).content.decode()
    assert "is deactivated" in page
    ivan = User.objects.get(oidc_identity__subject="sub-ivan")
    assert not ivan.is_staff  # nothing changed
    assert AuditEvent.objects.filter(action="user.sso_refused", object_id=str(ivan.pk)).exists()


def test_the_authorization_request_carries_state_nonce_and_a_pkce_challenge(sso, db):
    client = Client()
    _, query = start(client)

    stored = client.session["oidc_states"][query["state"]]
    assert query["client_id"] == CLIENT_ID and query["nonce"] == stored["nonce"]
    assert query["code_challenge_method"] == "S256"
    digest = hashlib.sha256(stored["code_verifier"].encode()).digest()
    assert query["code_challenge"] == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    assert query["redirect_uri"] == "http://testserver/oidc/callback/"


def test_a_callback_with_an_unknown_state_is_refused(sso, rules):
    client = Client()
    requests.put(f"{sso}/users/sub-jo", json={"groups": ["gpu-ml"]}, timeout=5)
    authorize_url, _ = start(client)
    callback = consent(authorize_url, "sub-jo")
    path, query = callback.split("?")
    params = {key: values[0] for key, values in parse_qs(query).items()}

    response = client.get(path, {**params, "state": "forged"})

    assert response.status_code == 400
    assert signed_in_as(client) is None and not OidcIdentity.objects.filter(subject="sub-jo").exists()


def test_an_id_token_with_another_nonce_is_refused(sso, rules):
    client = Client()
    requests.put(f"{sso}/users/sub-kim", json={"groups": ["gpu-ml"]}, timeout=5)
    authorize_url, query = start(client)
    callback = consent(authorize_url, "sub-kim")
    session = client.session
    session["oidc_states"][query["state"]]["nonce"] = "not-the-nonce-sent"
    session.save()

    response = client.get(callback)

    assert response.status_code == 400
    assert signed_in_as(client) is None and not OidcIdentity.objects.filter(subject="sub-kim").exists()


def test_an_id_token_meant_for_another_client_is_refused(sso, rules, settings, monkeypatch):
    """A code (and so an ID token) obtained for another client of the same provider."""
    settings.OIDC_RP_CLIENT_ID = "another-client"
    client = Client()
    requests.put(f"{sso}/users/sub-lee", json={"groups": ["gpu-ml"]}, timeout=5)
    authorize_url, _ = start(client)
    callback = consent(authorize_url, "sub-lee")
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    exchange = PortalOIDCBackend.get_token
    monkeypatch.setattr(
        PortalOIDCBackend,
        "get_token",
        lambda self, payload: exchange(self, {**payload, "client_id": "another-client"}),
    )

    response = client.get(callback)

    assert response.status_code == 400
    assert signed_in_as(client) is None and not OidcIdentity.objects.filter(subject="sub-lee").exists()


def test_the_sign_in_page_offers_the_provider_and_a_password_while_local_sign_in_is_on(sso, db):
    page = Client().get(reverse("login")).content.decode()

    assert "Sign in with Example SSO" in page and 'name="password"' in page


def test_with_local_sign_in_off_passwords_are_refused_on_both_sign_in_pages(sso, settings, researcher):
    settings.PORTAL_LOCAL_LOGIN = False
    client = Client()

    page = client.get(reverse("login")).content.decode()
    portal = client.post(reverse("login"), {"username": "alice", "password": "pw-for-tests"})
    admin = client.post("/admin/login/", {"username": "alice", "password": "pw-for-tests"})

    assert "Sign in with Example SSO" in page and 'name="password"' not in page
    assert "Password sign-in is switched off" in portal.content.decode()
    assert "Password sign-in is switched off" in admin.content.decode()
    assert signed_in_as(client) is None
    assert not client.login(username="alice", password="pw-for-tests")  # the backend refuses too


def test_a_break_glass_account_still_signs_in_to_the_admin_with_local_sign_in_off(sso, settings, admin_user):
    settings.PORTAL_LOCAL_LOGIN = False
    settings.PORTAL_BREAK_GLASS_USERS = ["admin"]
    client = Client()

    response = client.post("/admin/login/?next=/admin/", {"username": "admin", "password": "pw-for-tests"})

    assert response.status_code == 302 and signed_in_as(client) == admin_user
    assert AuditEvent.objects.filter(action="user.break_glass_sign_in", actor=admin_user).exists()


def test_api_tokens_keep_working_for_single_sign_on_users(sso, rules, settings):
    settings.PORTAL_LOCAL_LOGIN = False
    sign_in(Client(), sso, "sub-mia", email="mia@example.org", groups=["gpu-ml"])
    mia = User.objects.get(oidc_identity__subject="sub-mia")
    _, raw = token_create(user=mia, name="ci")

    response = Client().get(reverse("api-tokens"), HTTP_AUTHORIZATION=f"Bearer {raw}")

    assert response.status_code == 200


def test_sign_out_ends_the_portal_session_and_the_providers(sso, rules):
    client = Client()
    sign_in(client, sso, "sub-nia", email="nia@example.org", groups=["gpu-ml"])

    response = client.post(reverse("logout"))

    assert signed_in_as(client) is None
    target = urlsplit(response["Location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == f"{sso}/oauth2/end_session"
    query = parse_qs(target.query)
    assert query["post_logout_redirect_uri"] == ["http://testserver/login/"] and query["id_token_hint"]


def test_an_unreachable_provider_sends_back_to_the_sign_in_page_saying_so(settings, db):
    settings.PORTAL_OIDC_ISSUER = "http://127.0.0.1:9"  # discard: nothing answers
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_TIMEOUT = 2
    forget_discovery()
    client = Client()

    response = client.get(START)

    assert response.status_code == 302 and response["Location"] == reverse("login")
    assert "cannot be reached just now" in client.get(reverse("login")).content.decode()


def test_without_an_issuer_single_sign_on_is_off(db):
    client = Client()

    assert client.get(START).status_code == 404
    assert client.get("/oidc/callback/?code=x&state=y").status_code == 404
    assert "Sign in with" not in client.get(reverse("login")).content.decode()


def test_platform_admins_list_and_edit_group_rules_in_the_admin(admin_client, rules):
    page = admin_client.get("/admin/accounts/grouprule/").content.decode()
    refused = admin_client.post(
        "/admin/accounts/grouprule/add/", {"group": "gpu-ops", "team": rules["ml"].pk, "role": "admin"}
    )

    assert "gpu-vision-*" in page and "platform-admins" in page
    assert refused.status_code == 200 and "A platform admin rule names no team." in refused.content.decode()
    assert not GroupRule.objects.filter(group="gpu-ops").exists()
