"""Sign-in lockout (django-axes), in front of Django's password check."""

from __future__ import annotations

from axes.backends import AxesStandaloneBackend


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
