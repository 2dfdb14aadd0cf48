"""`Authorization: Bearer <token>` with a personal access token."""

from __future__ import annotations

from rest_framework import authentication, exceptions

from portal.accounts.services import token_authenticate


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode(errors="replace")
        if not header:
            return None
        parts = header.split()
        if not parts or parts[0].lower() != self.keyword.lower():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Send the header as 'Authorization: Bearer <token>'.")
        user = token_authenticate(raw=parts[1])
        if user is None:
            raise exceptions.AuthenticationFailed("The token is invalid, expired or revoked.")
        return (user, None)

    def authenticate_header(self, request) -> str:
        return self.keyword
