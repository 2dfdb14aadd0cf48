"""The sandbox gate: the ingress's forward-auth check and the sign-in round trip, for every role,
for ended and expired sandboxes, for a shared one, and against replayed or misdirected tickets."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
import time_machine
from django.core.cache import caches
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from portal.audit.models import AuditEvent
from portal.core.errors import NotAllowed, ValidationFailed
from portal.sandboxes.gate import COOKIE, TICKET_PARAM, gate_cache_clear, sandbox_app_url
from portal.sandboxes.services import sandbox_share
from portal.workloads.models import Image, WorkloadState
from tests.conftest import signed_in
from tests.factories import MembershipFactory, UserFactory
from tests.rows import make_sandbox

pytestmark = pytest.mark.django_db
HOST = "sbx-vision-box-1.sandboxes.gpu.internal"
CHECK = "/auth/sandbox/check"


@pytest.fixture(autouse=True)
def _fresh_gate():
    gate_cache_clear()
    yield
    gate_cache_clear()


@pytest.fixture
def sandbox(fleet, researcher, team):
    gpu = fleet["whole"].gpus.first()
    box = make_sandbox(
        owner=researcher, team=team, gpu=gpu, namespace="sbx-vision-box-1", cluster=gpu.node.cluster
    )
    assert box.cluster.sandbox_base_domain == "sandboxes.gpu.internal"
    return box


def check(client: Client, url: str = f"https://{HOST}/lab", **cookies: str):
    for name, value in cookies.items():
        client.cookies[name] = value
    return client.get(CHECK, HTTP_X_ORIGINAL_URL=url)


def sign_in_to(client: Client, target: str = f"https://{HOST}/lab?reset"):
    return client.get(reverse("sandbox-gate-signin"), {"rd": target})


def enter(user, target: str = f"https://{HOST}/lab?reset") -> str:
    """Sign in at the portal, follow the ticket to the ingress's check: the gate cookie it sets."""
    portal = signed_in(user)
    response = sign_in_to(portal, target)
    assert response.status_code == 302, response.content
    ingress = Client()
    answer = check(ingress, response["Location"])
    assert answer.status_code == 200, answer.content
    return answer.cookies[COOKIE].value


def test_the_owner_signs_in_once_and_then_passes_with_a_cookie_of_that_host_alone(sandbox, researcher):
    portal = signed_in(researcher)
    response = sign_in_to(portal)
    assert response.status_code == 302
    back = urlsplit(response["Location"])
    assert (back.scheme, back.hostname, back.path) == ("https", HOST, "/lab")
    assert "reset=" in back.query  # the rest of where the browser was going is kept
    ticket = parse_qs(back.query)[TICKET_PARAM][0]

    ingress = Client()
    answer = check(ingress, response["Location"])
    assert answer.status_code == 200
    assert answer["X-Portal-User"] == "alice"
    cookie = answer.cookies[COOKIE]
    assert cookie["httponly"] and cookie["secure"] and cookie["samesite"] == "Lax"
    assert cookie["domain"] == ""  # host-only: no other sandbox host and not the portal sees it
    assert 0 < int(cookie["max-age"]) <= 6 * 3600  # never past the sandbox's expiry
    assert str(ticket) not in cookie.value

    assert check(Client(), **{COOKIE: cookie.value}).status_code == 200  # later requests: the cookie
    # the cookie is for this host only, and the portal's own session never opens a sandbox
    assert (
        check(
            Client(), "https://sbx-vision-other-2.sandboxes.gpu.internal/", **{COOKIE: cookie.value}
        ).status_code
        == 401
    )
    assert check(portal).status_code == 401


@pytest.mark.parametrize("who", ["lead", "other_researcher", "admin_user"])
def test_nobody_but_the_owner_gets_in_unless_shared(request, sandbox, who):
    user = request.getfixturevalue(who)
    response = sign_in_to(signed_in(user))
    assert response.status_code == 403
    assert b"not shared with you" in response.content


def test_an_anonymous_browser_is_sent_to_sign_in_and_comes_back(client, sandbox, researcher):
    assert check(client).status_code == 401  # ingress-nginx then redirects to auth-signin
    response = sign_in_to(client)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert "next=" in response["Location"] and "rd%3D" in response["Location"]


def test_a_team_member_it_is_shared_with_gets_in_as_themselves_until_unshared(
    sandbox, researcher, lead, team
):
    sandbox_share(user=researcher, sandbox_id=sandbox.pk, usernames=["bob"])
    cookie = enter(lead)
    assert check(Client(), **{COOKIE: cookie})["X-Portal-User"] == "bob"

    sandbox_share(user=researcher, sandbox_id=sandbox.pk, usernames=[])
    gate_cache_clear()  # the gate re-reads its facts every few seconds
    refused = check(Client(), **{COOKIE: cookie})
    assert refused.status_code == 403 and b"not shared with you" in refused.content
    events = AuditEvent.objects.filter(object_id=str(sandbox.pk), action="sandbox.share").order_by("pk")
    assert [event.detail for event in events] == [
        "shared with bob (was nobody)",
        "shared with nobody (was bob)",
    ]


def test_only_the_owner_shares_and_only_with_members_of_the_sandboxs_team(
    sandbox, researcher, lead, other_researcher
):
    with pytest.raises(NotAllowed):
        sandbox_share(user=lead, sandbox_id=sandbox.pk, usernames=["alice"])
    with pytest.raises(ValidationFailed, match="Not members of team vision: carol, nobody"):
        sandbox_share(user=researcher, sandbox_id=sandbox.pk, usernames=["carol", "nobody", "bob"])
    assert not sandbox.shared_with.exists()  # nothing changed
    assert not AuditEvent.objects.filter(action="sandbox.share").exists()


@pytest.mark.parametrize(
    "state", [WorkloadState.TERMINATED, WorkloadState.EXPIRED, WorkloadState.TERMINATING]
)
def test_an_ended_sandbox_shuts_its_door_on_cookies_already_given(sandbox, researcher, state):
    cookie = enter(researcher)
    sandbox.__class__.objects.filter(pk=sandbox.pk).update(state=state)
    gate_cache_clear()
    refused = check(Client(), **{COOKIE: cookie})
    assert refused.status_code == 403 and b"has ended" in refused.content
    assert sign_in_to(signed_in(researcher)).status_code == 403


def test_a_sandbox_past_its_expiry_is_closed_even_before_the_sweep_ends_it(sandbox, researcher):
    cookie = enter(researcher)
    with time_machine.travel(sandbox.expires_at + timedelta(seconds=1)):
        gate_cache_clear()
        refused = check(Client(), **{COOKIE: cookie})
    assert refused.status_code == 403 and b"expired" in refused.content


def test_a_ticket_works_once_for_its_host_and_not_after_a_minute(sandbox, researcher):
    location = sign_in_to(signed_in(researcher))["Location"]
    other_host = location.replace(HOST, "sbx-vision-other-2.sandboxes.gpu.internal")
    assert check(Client(), other_host).status_code == 401
    assert check(Client(), location).status_code == 200
    caches["default"].clear()  # another gunicorn worker: its own memory, the same shared cache
    replay = check(Client(), location)
    assert replay.status_code == 401 and b"used already" in replay.content

    late = sign_in_to(signed_in(researcher))["Location"]
    with time_machine.travel(timezone.now() + timedelta(seconds=61)):
        assert b"expired" in check(Client(), late).content


def test_a_password_change_signs_the_person_out_of_every_sandbox(sandbox, researcher):
    cookie = enter(researcher)
    researcher.set_password("a-new-long-password-9")
    researcher.save()
    gate_cache_clear()
    assert check(Client(), **{COOKIE: cookie}).status_code == 401


def test_a_forged_or_foreign_cookie_is_refused(sandbox, researcher):
    assert check(Client(), **{COOKIE: "alice"}).status_code == 401
    assert check(Client(), "").status_code == 401  # no URL from the ingress: nothing passes
    assert check(Client(), "https://[x/?portal_ticket=1").status_code == 401  # nor one that does not parse


@pytest.mark.parametrize(
    "target",
    [
        "https://evil.example.com/",
        "javascript:alert(1)",
        "/admin/",
        "https://sandboxes.gpu.internal/",
        "",
        "https://[x/",
        f"http://{HOST}/lab",  # the ticket would travel in plain text
        f"https://{HOST}:8443/lab",  # or to another port of the ingress's address
        f"https://{HOST}:x/lab",
    ],
)
def test_sign_in_never_redirects_anywhere_but_a_sandbox(researcher_client, sandbox, target):
    response = sign_in_to(researcher_client, target)
    assert response.status_code == 404
    assert b"no sandbox at this address" in response.content


def test_gateway_external_auth_headers_work_as_well(sandbox, researcher):
    cookie = enter(researcher)
    client = Client()
    client.cookies[COOKIE] = cookie
    answer = client.get(
        CHECK, HTTP_X_FORWARDED_HOST=HOST, HTTP_X_FORWARDED_URI="/lab", HTTP_X_FORWARDED_PROTO="https"
    )
    assert answer.status_code == 200 and answer["Cache-Control"] == "no-store"


def test_open_buttons_lead_through_sign_in_to_the_app(sandbox, researcher, fleet):
    url = sandbox_app_url(sandbox)
    assert url.startswith(reverse("sandbox-gate-signin"))
    assert parse_qs(urlsplit(url).query)["rd"] == [reverse("sandbox-simulated", args=[HOST])]  # simulated
    fleet["whole"].cluster.__class__.objects.filter(pk=sandbox.cluster_id).update(driver="kubernetes")
    sandbox.refresh_from_db()
    assert parse_qs(urlsplit(sandbox_app_url(sandbox)).query)["rd"] == [f"https://{HOST}/"]
    Image.objects.filter(pk=sandbox.image_id).update(kind=Image.Kind.SHELL)
    sandbox.refresh_from_db()
    assert sandbox_app_url(sandbox) == ""  # ssh: no web app to open
    sandbox.__class__.objects.filter(pk=sandbox.pk).update(state=WorkloadState.PROVISIONING)
    sandbox.refresh_from_db()
    assert sandbox_app_url(sandbox) == ""


def test_the_simulated_app_runs_the_same_gate_in_a_browser_flow(sandbox, researcher, lead):
    client = signed_in(researcher)
    page = client.get(sandbox_app_url(sandbox), follow=True)
    assert page.status_code == 200
    assert b"Simulated cluster." in page.content
    assert b"NVIDIA H100" in page.content and b'<strong id="portal-user">alice</strong>' in page.content
    assert TICKET_PARAM not in page.redirect_chain[-1][0]  # the ticket does not stay in the address bar
    cookie = client.cookies[COOKIE]
    assert cookie["path"] == reverse("sandbox-simulated", args=[HOST]) and cookie["httponly"]

    stranger = signed_in(lead)
    refused = stranger.get(reverse("sandbox-simulated", args=[HOST]), follow=True)
    assert refused.status_code == 403 and b"not shared with you" in refused.content


def test_the_gate_answers_in_a_bounded_number_of_queries(sandbox, researcher, django_assert_max_num_queries):
    cookie = enter(researcher)
    gate_cache_clear()
    with django_assert_max_num_queries(3):  # the sandbox, who shares it, the person
        assert check(Client(), **{COOKIE: cookie}).status_code == 200
    with django_assert_max_num_queries(0):  # then from the cache
        assert check(Client(), **{COOKIE: cookie}).status_code == 200


def test_inactive_users_are_refused_even_with_a_cookie(sandbox, researcher):
    cookie = enter(researcher)
    researcher.is_active = False
    researcher.save()
    gate_cache_clear()
    assert check(Client(), **{COOKIE: cookie}).status_code == 401


def test_a_member_of_the_team_added_later_can_be_shared_with(sandbox, researcher, team):
    newcomer = UserFactory(username="dave")
    MembershipFactory(user=newcomer, team=team)
    sandbox_share(user=researcher, sandbox_id=sandbox.pk, usernames=["dave", "alice"])  # the owner is dropped
    assert list(sandbox.shared_with.values_list("username", flat=True)) == ["dave"]
    enter(newcomer)


def test_a_gateways_external_auth_gets_the_sign_in_redirect_and_then_passes(settings, sandbox, researcher):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, ".sandboxes.gpu.internal"]
    gateway = Client()
    path = reverse("sandbox-gate-external") + "lab/tree"
    refused = gateway.get(path, {"a": "1"}, HTTP_HOST=HOST)
    assert refused.status_code == 302
    signin = urlsplit(refused["Location"])
    assert signin.path == reverse("sandbox-gate-signin")
    assert parse_qs(signin.query)["rd"] == [f"https://{HOST}/lab/tree?a=1"]

    ticket = parse_qs(
        urlsplit(sign_in_to(signed_in(researcher), f"https://{HOST}/lab/tree")["Location"]).query
    )
    redeemed = gateway.get(path, {TICKET_PARAM: ticket[TICKET_PARAM][0]}, HTTP_HOST=HOST)
    assert redeemed.status_code == 302  # the refusal path is the one that reaches the browser
    assert redeemed["Location"] == f"https://{HOST}/lab/tree"  # the ticket taken out
    cookie = redeemed.cookies[COOKIE]
    assert cookie["httponly"] and cookie["domain"] == ""
    passed = gateway.get(path, HTTP_HOST=HOST)  # the browser follows, with its cookie
    assert passed.status_code == 200 and passed["X-Portal-User"] == "alice"
    # a websocket upgrade or a POST without a cookie is refused, not redirected
    assert Client().post(path, HTTP_HOST=HOST).status_code == 401


def test_someone_who_left_the_team_no_longer_gets_in(sandbox, researcher, lead, team):
    sandbox_share(user=researcher, sandbox_id=sandbox.pk, usernames=["bob"])
    cookie = enter(lead)
    lead.memberships.filter(team=team).delete()
    gate_cache_clear()
    refused = check(Client(), **{COOKIE: cookie})
    assert refused.status_code == 403 and b"not shared with you" in refused.content


def test_an_owner_who_left_the_team_no_longer_gets_in_and_is_told_why(sandbox, researcher, team):
    cookie = enter(researcher)
    researcher.memberships.filter(team=team).delete()
    gate_cache_clear()
    refused = check(Client(), **{COOKIE: cookie})
    assert refused.status_code == 403
    assert (
        refused.content
        == b"You are no longer a member of this sandbox's team: you may still end it in the portal."
    )
    page = signed_in(researcher).get(reverse("sandbox-simulated", args=[HOST]), follow=True)
    assert page.status_code == 403 and b"no longer a member" in page.content
    MembershipFactory(user=researcher, team=team)  # back in the team, back in the sandbox
    gate_cache_clear()
    assert check(Client(), **{COOKIE: cookie}).status_code == 200


def test_an_admin_who_owns_a_sandbox_of_a_team_they_are_not_in_gets_in(sandbox, researcher, team):
    researcher.memberships.filter(team=team).delete()
    researcher.is_staff = True
    researcher.save(update_fields=["is_staff"])
    enter(researcher)


def test_signing_out_of_the_portal_signs_the_person_out_of_every_sandbox(sandbox, researcher):
    """The gate cookie is not the portal's session: it would otherwise open the sandbox from that
    browser for up to 12 hours after its user signed out (a shared computer, say)."""
    cookie = enter(researcher)
    other_browser = enter(researcher)
    portal = signed_in(researcher)
    unused_ticket = sign_in_to(portal)["Location"]
    assert check(Client(), **{COOKIE: cookie}).status_code == 200  # the gate now remembers alice
    assert portal.post(reverse("logout")).status_code == 302
    # at once in this process (others re-read the person within a few seconds)
    assert check(Client(), **{COOKIE: cookie}).status_code == 401
    for kept in (cookie, other_browser):
        refused = check(Client(), **{COOKIE: kept})
        assert refused.status_code == 401 and b"Sign in to the portal again" in refused.content
    late = check(Client(), unused_ticket)
    assert late.status_code == 401 and b"signed out of the portal since" in late.content
    enter(researcher)  # signing in again opens it again
    assert Client().post(reverse("logout")).status_code == 302  # signing out with no session: nothing


def test_signing_out_and_straight_back_in_gets_in_though_the_gate_remembers_the_old_count(
    sandbox, researcher
):
    """The gate keeps who a person is for a few seconds; a ticket issued after signing in again
    carries the new count, which a remembered older one must not refuse (a sign-in loop)."""
    from cachetools.keys import hashkey

    from portal.sandboxes import gate

    old = enter(researcher)
    before = gate._PEOPLE[hashkey(researcher.pk)]  # alice with no sign-outs
    assert signed_in(researcher).post(reverse("logout")).status_code == 302
    gate._PEOPLE[hashkey(researcher.pk)] = before  # as another process may still remember her
    new = enter(researcher)  # the new ticket's count is higher than the remembered one, and passes
    gate_cache_clear()
    assert check(Client(), **{COOKIE: new}).status_code == 200
    assert check(Client(), **{COOKIE: old}).status_code == 401
