"""`Authorization: Bearer <token>` with a personal access token, within the token's scope: a
`read` token only reads; a `workloads` token does all its user may but manage credentials, get a
sandbox's kubeconfig or share a sandbox with more people (see TOKEN_PATHS, KUBECONFIG_PATH,
`full_scope`); an `admin` token does all its user may; a `serving` token calls model endpoints
only, never the API."""

from __future__ import annotations

import re

from rest_framework import authentication, exceptions
from rest_framework.permissions import SAFE_METHODS

from portal.accounts.models import ApiToken
from portal.accounts.services import token_authenticate

# Writes a leaked token must not make unless it has the admin scope: credentials that outlive it
# (tokens; SSH keys, which would keep opening their user's ssh sandboxes after it is revoked; a
# user's or a team's webhook, which would keep receiving their notifications, and a team's Hugging
# Face token) and a platform admin's fleet actions (removing objects from a cluster, taking over a
# node's MIG layout).
TOKEN_PATHS = ("/api/v1/tokens", "/api/v1/ssh-keys", "/api/v1/fleet/", "/api/v1/notifications/preferences")
TEAM_SETTINGS_PATH = re.compile(r"^/api/v1/teams/[^/]+/settings/?$")
# A sandbox's kubeconfig is a credential that outlives the token too (a day at most) and opens a
# shell in the sandbox: asking for one or reading it, whatever the method, needs the admin scope.
KUBECONFIG_PATH = re.compile(r"^/api/v1/sandboxes/[^/]+/kubeconfig/?$")


def full_scope(request) -> bool:
    """Whether the request may grant what outlives its credential: signed in in a browser, or with
    a token of the admin scope (a view checks this where the path alone cannot tell, as sharing a
    sandbox with more people, which a narrower token may undo but not do)."""
    return not isinstance(request.auth, ApiToken) or request.auth.scope == ApiToken.Scope.ADMIN


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
        token = token_authenticate(raw=parts[1])
        if token is None:
            raise exceptions.AuthenticationFailed("The token is invalid, expired or revoked.")
        if token.scope == ApiToken.Scope.SERVING:
            raise exceptions.PermissionDenied(
                "This token calls model endpoints only (scope serving); the API needs a token of scope "
                "read, workloads or admin."
            )
        writes = request.method not in SAFE_METHODS
        if writes and token.scope == ApiToken.Scope.READ:
            raise exceptions.PermissionDenied("This token is read-only (scope read).")
        path = request.path_info  # without a prefix the portal may be mounted under
        guarded = path.startswith(TOKEN_PATHS) or TEAM_SETTINGS_PATH.match(path)
        if writes and token.scope != ApiToken.Scope.ADMIN and guarded:
            raise exceptions.PermissionDenied(
                "Managing tokens, SSH keys, notification preferences, team settings and the fleet needs a token "
                "with the admin scope."
            )
        if token.scope != ApiToken.Scope.ADMIN and KUBECONFIG_PATH.match(path):
            raise exceptions.PermissionDenied(
                "A kubeconfig opens a shell in the sandbox and outlives the token that got it: asking for "
                "or reading one needs a token with the admin scope."
            )
        return (token.user, token)

    def authenticate_header(self, request) -> str:
        return self.keyword
