"""Sign-in lockout (django-axes): ten failed sign-ins for one username, or from one address, lock
it out of the portal's sign-in and the admin's, with a page that says so, until the cool-off ends
or a platform admin unlocks it. Sessions already open and API tokens are not affected."""

from __future__ import annotations

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from portal.core.proxies import client_address
from tests.factories import UserFactory

LOGIN = reverse("login")
LOCKED = "Too many failed sign-ins"


def sign_in(client: Client, username: str, password: str, *, address: str = "10.0.0.1", url: str = LOGIN):
    return client.post(url, {"username": username, "password": password}, REMOTE_ADDR=address)


def fail(
    client: Client, username: str, times: int, *, address: str = "10.0.0.1", url: str = LOGIN
) -> list[int]:
    """Sign in with a wrong password `times` times; the statuses (the failure that reaches the
    limit is answered with the lockout page already)."""
    return [sign_in(client, username, "wrong", address=address, url=url).status_code for _ in range(times)]


def test_ten_failures_lock_the_username_out_even_with_the_right_password(client, researcher, settings):
    assert settings.AXES_FAILURE_LIMIT == 10
    assert fail(client, "alice", 9) == [200] * 9
    assert fail(client, "alice", 1, address="10.0.0.2") == [429]  # from elsewhere: the username counts

    response = sign_in(client, "alice", "pw-for-tests", address="10.0.0.3")

    assert response.status_code == 429
    page = response.content.decode()
    assert LOCKED in page and "for alice" in page
    assert "locked for 15 minutes" in page
    assert "A platform admin can unlock it sooner." in page
    assert "_auth_user_id" not in client.session


def test_nine_failures_lock_nothing(client, researcher):
    assert fail(client, "alice", 9) == [200] * 9

    response = sign_in(client, "alice", "pw-for-tests")

    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard")


def test_ten_failures_from_one_address_lock_that_address_out(client, researcher, other_researcher):
    for n in range(10):
        fail(client, f"guess{n}", 1, address="10.9.9.9")

    assert sign_in(client, "alice", "pw-for-tests", address="10.9.9.9").status_code == 429
    assert sign_in(client, "carol", "pw-for-tests", address="10.0.0.7").status_code == 302


def test_the_admin_sign_in_is_locked_out_too(client, admin_user):
    fail(client, "admin", 10, url="/admin/login/")

    response = sign_in(client, "admin", "pw-for-tests", url="/admin/login/")

    assert response.status_code == 429
    assert LOCKED in response.content.decode()
    assert sign_in(client, "admin", "pw-for-tests").status_code == 429  # and the portal's


def test_the_limit_and_the_lockout_follow_the_settings(client, researcher, settings):
    settings.AXES_FAILURE_LIMIT = 3
    fail(client, "alice", 3)

    assert sign_in(client, "alice", "pw-for-tests").status_code == 429


def test_a_platform_admin_unlocks_a_username_in_the_admin(client, researcher, admin_client):
    fail(client, "alice", 10)
    attempt = AccessAttempt.objects.get(username="alice")

    assert "alice" in admin_client.get("/admin/axes/accessattempt/").content.decode()
    deleted = admin_client.post(f"/admin/axes/accessattempt/{attempt.pk}/delete/", {"post": "yes"})

    assert deleted.status_code == 302
    assert sign_in(client, "alice", "pw-for-tests").status_code == 302


def test_an_open_session_and_api_tokens_keep_working_while_locked_out(client, researcher, alice):
    fail(client, "alice", 10)
    assert sign_in(client, "alice", "pw-for-tests").status_code == 429

    signed_in = Client()
    signed_in.force_login(researcher)
    assert signed_in.get(reverse("dashboard")).status_code == 200
    assert alice.get("/api/v1/me").json()["username"] == "alice"


@pytest.mark.parametrize(
    "proxies, forwarded, expected",
    [
        (0, "1.2.3.4", "10.0.0.1"),  # no proxy trusted: the header is the client's word, ignored
        (1, "1.2.3.4", "1.2.3.4"),  # the Ingress appended the address it saw
        (1, "6.6.6.6, 1.2.3.4", "1.2.3.4"),  # what the client wrote itself stands to the left
        (2, "1.2.3.4, 172.16.0.5", "1.2.3.4"),
        (2, "1.2.3.4", "1.2.3.4"),
        (1, "", "10.0.0.1"),
    ],
)
def test_the_client_address_is_the_one_the_outermost_trusted_proxy_saw(
    rf, settings, proxies, forwarded, expected
):
    settings.PORTAL_TRUSTED_PROXY_COUNT = proxies
    request = rf.get("/login/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)

    assert client_address(request) == expected


def test_signing_in_to_another_account_does_not_wipe_the_failures(client, researcher, other_researcher):
    """Someone with an account of their own cannot reset the count between guesses."""
    fail(client, "alice", 5)
    assert sign_in(client, "carol", "pw-for-tests", address="10.0.0.1").status_code == 302
    client.logout()

    assert fail(client, "alice", 5) == [200] * 4 + [429]


@pytest.mark.parametrize(
    "password, refused",
    [("12345678901", "entirely numeric"), ("password123", "too common"), ("alice-smith", "too similar")],
)
def test_a_password_set_in_the_admin_must_not_be_guessable(password, refused):
    """Where a password is set (the Django admin, createsuperuser): Django's own checks, all of them."""
    user = UserFactory.build(username="alice-smith", first_name="Alice", last_name="Smith")
    with pytest.raises(ValidationError, match=refused):
        validate_password(password, user)
    validate_password("gpu-quota-tundra-41", user)
