"""Sign-in lockout (django-axes), in front of Django's password check, and the password check that
PORTAL_LOCAL_LOGIN switches off."""

from __future__ import annotations

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.contrib.auth.backends import ModelBackend

from portal.audit.services import audit_record


class SignInLockoutBackend(AxesStandaloneBackend):
    """Refuses a sign-in while its username or address is locked out.

    Only a sign-in over HTTP can be locked out (the portal's page, the admin's): a call without a
    request (code that checks a password itself, the test client's `login`) has no address to
    count and goes on to the password check as before.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def local_password_allowed(username: str | None) -> bool:
    """Whether `username` may sign in with a password: always while PORTAL_LOCAL_LOGIN is on; with
    it off (single sign-on only), the break-glass accounts of PORTAL_BREAK_GLASS_USERS alone."""
    if settings.PORTAL_LOCAL_LOGIN:
        return True
    return bool(username) and username in settings.PORTAL_BREAK_GLASS_USERS


class LocalPasswordBackend(ModelBackend):
    """Django's password check, refused while local sign-in is off but for break-glass accounts,
    whose every sign-in is audited."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if password is None:
            return None
        if not local_password_allowed(username):
            return None
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is not None and not settings.PORTAL_LOCAL_LOGIN:
            audit_record(
                actor=user,
                action="user.break_glass_sign_in",
                obj=user,
                detail="password sign-in while local sign-in is off",
            )
        return user
