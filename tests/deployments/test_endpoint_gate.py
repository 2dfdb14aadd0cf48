"""The endpoint gate: who may call a deployment's endpoint through the cluster's ingress (a
serving token of a member of its team, while it serves), through both of its checks, and that
a serving token opens nothing of the portal's API."""

from __future__ import annotations

import html
import io
import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from portal.accounts.models import ApiToken, Membership
from portal.accounts.services import token_create, token_revoke
from portal.core.errors import ValidationFailed
from portal.deployments.gate import endpoint_gate_cache_clear
from portal.workloads.models import WorkloadState
from tests.conftest import signed_in
from tests.factories import UserFactory
from tests.rows import make_deployment

pytestmark = pytest.mark.django_db
CHECK = "/auth/endpoint/check"
GATEWAY = "/auth/endpoint/gateway"


@pytest.fixture
def deployment(fleet, catalog, researcher, team):
    workload = make_deployment(owner=researcher, team=team, gpu=fleet["whole"].gpus.first())
    workload.access = f"https://dep-vision-llama-{workload.pk}.sandboxes.gpu.internal"
    workload.save(update_fields=["access"])
    return workload


def host_of(deployment) -> str:
    return deployment.access.removeprefix("https://")


def serving_token(user, scope=ApiToken.Scope.SERVING, team="vision") -> str:
    return token_create(
        user=user, name="chat-client", scope=scope, team=team if scope == ApiToken.Scope.SERVING else ""
    )[1]


def check(deployment, token: str | None = None, *, path: str = "/v1/chat/completions"):
    headers = {"HTTP_X_ORIGINAL_URL": f"https://{host_of(deployment)}{path}"}
    if token is not None:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return Client().get(CHECK, **headers)


def test_a_team_members_serving_token_passes_and_names_the_caller(deployment, researcher, lead):
    for user in (researcher, lead):
        answer = check(deployment, serving_token(user))

        assert answer.status_code == 200, answer.content
        assert answer["X-Portal-User"] == user.username
        assert answer["Cache-Control"] == "no-store"
    assert ApiToken.objects.filter(last_used_at__isnull=False).count() == 2


def test_no_token_asks_for_one_and_says_which(deployment):
    answer = check(deployment)

    assert answer.status_code == 401
    assert answer["WWW-Authenticate"].startswith("Bearer")
    assert "create a token of scope serving under API tokens" in answer.content.decode()
    malformed = Client().get(
        CHECK, HTTP_X_ORIGINAL_URL=deployment.access, HTTP_AUTHORIZATION="Basic YWxpY2U6cHc="
    )
    assert malformed.status_code == 401


def test_a_wrong_revoked_or_expired_token_is_refused(deployment, researcher):
    assert check(deployment, "gpp_not-a-token").status_code == 401

    token, raw = token_create(user=researcher, name="old", scope=ApiToken.Scope.SERVING, team="vision")
    token_revoke(user=researcher, token_id=token.pk)
    assert check(deployment, raw).status_code == 401

    token, raw = token_create(
        user=researcher, name="short", scope=ApiToken.Scope.SERVING, team="vision", expires_days=1
    )
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    answer = check(deployment, raw)
    assert answer.status_code == 401
    assert answer.content.decode() == "The token is invalid, expired or revoked."


@pytest.mark.parametrize("scope", [ApiToken.Scope.READ, ApiToken.Scope.WORKLOADS, ApiToken.Scope.ADMIN])
def test_a_token_of_the_portals_api_never_reaches_a_model_server(deployment, researcher, scope):
    answer = check(deployment, serving_token(researcher, scope))

    assert answer.status_code == 403
    assert f"not one of scope {scope}" in answer.content.decode()


def test_a_token_made_for_another_team_is_refused_even_in_a_members_hands(
    deployment, team, other_researcher, other_team, admin_user
):
    answer = check(deployment, serving_token(other_researcher, team=other_team.slug))
    assert answer.status_code == 403
    assert (
        answer.content.decode()
        == "This token calls another team's endpoints; this deployment is team Vision's."
    )
    # a member of both teams: a token learnt by team nlp's model servers opens nothing of vision's
    both = UserFactory(username="erin")
    Membership.objects.create(user=both, team=team, role=Membership.Role.RESEARCHER)
    Membership.objects.create(user=both, team=other_team, role=Membership.Role.RESEARCHER)
    endpoint_gate_cache_clear()  # the gate read vision's members a moment ago
    assert check(deployment, serving_token(both, team=other_team.slug)).status_code == 403
    assert check(deployment, serving_token(both, team=team.slug)).status_code == 200
    # a serving token names one of its user's teams: an admin outside vision cannot make one for it
    with pytest.raises(ValidationFailed, match="name one of your teams"):
        serving_token(admin_user)
    with pytest.raises(ValidationFailed, match="name one of your teams"):
        token_create(user=both, name="x", scope=ApiToken.Scope.SERVING)
    teamless, raw = token_create(user=both, name="old", scope=ApiToken.Scope.SERVING, team="vision")
    ApiToken.objects.filter(pk=teamless.pk).update(team=None)  # as one made before tokens named a team
    endpoint_gate_cache_clear()
    answer = check(deployment, raw)
    assert (answer.status_code, answer.content.decode()) == (
        403,
        "This serving token names no team: make one for team Vision under API tokens.",
    )
    with pytest.raises(ValidationFailed, match="Only a token of scope serving names a team"):
        token_create(user=both, name="x", scope=ApiToken.Scope.WORKLOADS, team="vision")


def test_leaving_the_team_shuts_the_door_for_good(deployment, team):
    leaver = UserFactory(username="dave")
    Membership.objects.create(user=leaver, team=team, role=Membership.Role.RESEARCHER)
    raw = serving_token(leaver)
    assert check(deployment, raw).status_code == 200

    Membership.objects.filter(user=leaver).delete()
    endpoint_gate_cache_clear()  # what the gate read stays a few seconds

    assert check(deployment, raw).status_code == 403

    # back in the team later: the token from before opens nothing; a new one does
    Membership.objects.create(user=leaver, team=team, role=Membership.Role.RESEARCHER)
    endpoint_gate_cache_clear()
    answer = check(deployment, raw)
    assert (answer.status_code, answer.content.decode()) == (
        403,
        "This token was made before you (re)joined team Vision: make a new one.",
    )
    assert check(deployment, serving_token(leaver)).status_code == 200


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (WorkloadState.QUEUED, "This deployment is not serving yet."),
        (WorkloadState.TERMINATED, "This deployment has ended."),
        (WorkloadState.EXPIRED, "This deployment has ended."),
    ],
)
def test_a_deployment_that_does_not_serve_refuses_every_caller(deployment, researcher, state, reason):
    deployment.state = state
    deployment.save(update_fields=["state"])

    answer = check(deployment, serving_token(researcher))

    assert (answer.status_code, answer.content.decode()) == (403, reason)


def test_a_deployment_past_its_expiry_refuses_before_the_sweep_ends_it(deployment, researcher):
    deployment.expires_at = timezone.now() - timedelta(minutes=1)
    deployment.save(update_fields=["expires_at"])

    answer = check(deployment, serving_token(researcher))

    assert (answer.status_code, answer.content.decode()) == (403, "This deployment has expired.")


def test_an_unknown_or_forged_host_is_refused(deployment, researcher):
    raw = serving_token(researcher)
    for host in (
        "dep-vision-llama-999999.sandboxes.gpu.internal",  # no such deployment
        f"dep-other-thing-{deployment.pk}.sandboxes.gpu.internal",  # its id, not its host
        f"dep-vision-llama-{deployment.pk}.evil.example",
        f"sbx-vision-llama-{deployment.pk}.sandboxes.gpu.internal",
        "",
        "[x",  # not a URL at all
        "dep-vision-llama-\u00b2.sandboxes.gpu.internal",  # a digit, but not an ASCII one
    ):
        answer = Client().get(
            CHECK, HTTP_X_ORIGINAL_URL=f"https://{host}/v1/models", HTTP_AUTHORIZATION=f"Bearer {raw}"
        )
        assert (answer.status_code, answer.content.decode()) == (
            403,
            "There is no deployment at this address.",
        )


def test_a_gateways_external_auth_asks_with_the_requests_own_method_host_and_token(
    settings, deployment, researcher
):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, ".sandboxes.gpu.internal"]
    raw = serving_token(researcher)
    client = Client()

    allowed = client.post(
        f"{GATEWAY}/v1/chat/completions",
        data="{}",
        content_type="application/json",
        HTTP_HOST=host_of(deployment),
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    refused = client.post(
        f"{GATEWAY}/v1/chat/completions",
        data="{}",
        content_type="application/json",
        HTTP_HOST=host_of(deployment),
    )

    assert allowed.status_code == 200 and allowed["X-Portal-User"] == "alice"
    assert refused.status_code == 401 and refused["WWW-Authenticate"].startswith("Bearer")


def test_a_serving_token_opens_nothing_of_the_api(deployment, researcher):
    raw = serving_token(researcher)
    client = Client()

    for method, path in (
        ("get", "/api/v1/deployments"),
        ("get", "/api/v1/spend"),
        ("post", "/api/v1/tokens"),
    ):
        answer = getattr(client, method)(path, HTTP_AUTHORIZATION=f"Bearer {raw}")
        assert answer.status_code == 403, (path, answer.content)
        assert "calls model endpoints only" in answer.content.decode()


def test_the_check_is_answered_over_plain_http_inside_the_cluster(settings, deployment, researcher):
    settings.SECURE_SSL_REDIRECT = True

    assert check(deployment, serving_token(researcher)).status_code == 200


def test_the_page_shows_a_call_with_a_serving_token_and_where_to_make_one(deployment, researcher):
    client = signed_in(researcher)
    page = html.unescape(client.get(f"/deployments/{deployment.number}/").content.decode())

    stand_in = f"{settings.PORTAL_BASE_URL}/simulated-endpoint/{host_of(deployment)}"
    assert f"curl -s {stand_in}/v1/chat/completions \\\n" in page
    assert '-H "Authorization: Bearer $SERVING_TOKEN"' in page
    assert (
        'href="/tokens/?scope=serving&amp;team=vision"'
        in client.get(f"/deployments/{deployment.number}/").content.decode()
    )
    assert "made for team Vision" in page
    assert f'OpenAI(base_url="{stand_in}/v1", api_key=os.environ["SERVING_TOKEN"])' in page

    form = client.get("/tokens/?scope=serving&team=vision").content.decode()
    assert re.search(r'<option value="serving" selected>', form)
    assert re.search(r'<option value="vision" selected>', form)
    refused = client.post("/tokens/", {"name": "chat-client", "scope": "serving"}).content.decode()
    assert "name one of your teams" in refused
    made = client.post(
        "/tokens/", {"name": "chat-client", "scope": "serving", "team": "vision"}
    ).content.decode()
    secret = re.search(r'id="new-token-secret">(gpp_[^<]+)<', made).group(1)
    assert f"<code>export SERVING_TOKEN={secret}</code>" in made

    assert check(deployment, secret).status_code == 200
    assert ApiToken.objects.get(name="chat-client").get_scope_display().startswith("Serving")


def test_on_the_simulated_cluster_the_example_is_answered_by_the_portal_behind_the_check(
    deployment, researcher, other_researcher
):
    stand_in = f"/simulated-endpoint/{host_of(deployment)}/v1/chat/completions"
    body = '{"model": "meta-llama/Llama-3.1-8B-Instruct", "messages": [{"role": "user", "content": "hi"}]}'

    def call(token=None):
        auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
        return Client().post(stand_in, data=body, content_type="application/json", **auth)

    answer = call(serving_token(researcher))
    assert answer.status_code == 200, answer.content
    assert answer.json()["simulated"] is True
    assert answer.json()["choices"][0]["message"]["content"] == (
        "(simulated) Simulated cluster: no model server runs. On a real cluster vLLM serving "
        "meta-llama/Llama-3.1-8B-Instruct would answer this request. You asked: hi"
    )
    assert call().status_code == 401
    assert call(serving_token(other_researcher, team="nlp")).status_code == 403


def test_a_real_clusters_deployment_has_no_stand_in(deployment, researcher):
    deployment.cluster.driver = "kubernetes"
    deployment.cluster.save(update_fields=["driver"])

    answer = Client().get(
        f"/simulated-endpoint/{host_of(deployment)}/v1/models",
        HTTP_AUTHORIZATION=f"Bearer {serving_token(researcher)}",
    )

    assert answer.status_code == 404


def test_a_serving_token_is_made_from_the_api_and_the_command_line_too(deployment, alice):
    refused = alice.post("/api/v1/tokens", {"name": "ci", "scope": "serving"}, format="json")
    assert refused.status_code == 400 and refused.json()["error"]["fields"]["team"]
    made = alice.post("/api/v1/tokens", {"name": "ci", "scope": "serving", "team": "vision"}, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["team"] == "vision"
    assert check(deployment, made.json()["token"]).status_code == 200

    out = io.StringIO()
    call_command("create_token", "alice", "--scope", "serving", "--team", "vision", stdout=out)
    assert check(deployment, out.getvalue().splitlines()[-1]).status_code == 200
