"""Single sign-on with OpenID Connect (mozilla-django-oidc): the provider's endpoints, the backend
that signs users in by issuer and subject and maps their groups, and the sign-in and sign-out views.

Everything here is off while PORTAL_OIDC_ISSUER is unset: the views answer 404 and the backend
signs nobody in.
"""

from __future__ import annotations

import logging
import threading
from typing import Any
from urllib.parse import urlencode

import jwt
import requests
from cachetools import TTLCache
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.views import LogoutView
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, resolve_url
from django.views import View
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from portal.accounts.models import User
from portal.accounts.services import sso_sign_in
from portal.audit.services import audit_record
from portal.core.errors import DomainError

logger = logging.getLogger(__name__)

DISCOVERY_PATH = "/.well-known/openid-configuration"
# Provider metadata field, and the setting that overrides discovery for it.
ENDPOINTS = {
    "authorization_endpoint": "PORTAL_OIDC_AUTHORIZATION_ENDPOINT",
    "token_endpoint": "PORTAL_OIDC_TOKEN_ENDPOINT",
    "userinfo_endpoint": "PORTAL_OIDC_USERINFO_ENDPOINT",
    "jwks_uri": "PORTAL_OIDC_JWKS_ENDPOINT",
    "end_session_endpoint": "PORTAL_OIDC_END_SESSION_ENDPOINT",
}
REQUIRED_ENDPOINTS = ("authorization_endpoint", "token_endpoint", "jwks_uri")

# Discovery documents by issuer, re-read after an hour (providers move their endpoints rarely).
_discovered: TTLCache[str, dict[str, str]] = TTLCache(maxsize=8, ttl=3600)
_discovered_lock = threading.Lock()


class ProviderUnavailable(Exception):
    """The identity provider's discovery document could not be read or does not fit."""


def oidc_enabled() -> bool:
    return bool(settings.PORTAL_OIDC_ISSUER)


def provider_name() -> str:
    return settings.PORTAL_OIDC_PROVIDER_NAME


def provider_endpoints() -> dict[str, str]:
    """The provider's endpoints: those set in the environment, the rest from its discovery document
    (read at the first sign-in, not at start, so the portal starts while the provider is down)."""
    issuer = settings.PORTAL_OIDC_ISSUER
    explicit = {field: getattr(settings, name) for field, name in ENDPOINTS.items()}
    if all(explicit[field] for field in REQUIRED_ENDPOINTS):
        return explicit
    with _discovered_lock:
        document = _discovered.get(issuer)
    if document is None:
        try:
            response = requests.get(issuer + DISCOVERY_PATH, timeout=settings.OIDC_TIMEOUT)
            response.raise_for_status()
            document = response.json()
        except (requests.RequestException, ValueError) as error:
            raise ProviderUnavailable(f"{issuer}{DISCOVERY_PATH} could not be read: {error}") from error
        if not isinstance(document, dict) or str(document.get("issuer", "")).rstrip("/") != issuer:
            raise ProviderUnavailable(
                f"{issuer}{DISCOVERY_PATH} names another issuer ({document.get('issuer')!r}): "
                "PORTAL_OIDC_ISSUER must be the provider's issuer exactly"
            )
        with _discovered_lock:
            _discovered[issuer] = document
    endpoints = {field: explicit[field] or str(document.get(field) or "") for field in ENDPOINTS}
    missing = [field for field in REQUIRED_ENDPOINTS if not endpoints[field]]
    if missing:
        raise ProviderUnavailable(f"the provider's discovery document lacks {', '.join(missing)}")
    return endpoints


def forget_discovery() -> None:
    """Drop the cached discovery documents (the next sign-in reads them again)."""
    with _discovered_lock:
        _discovered.clear()


class PortalOIDCBackend(OIDCAuthenticationBackend):
    """Signs in the user the provider vouches for: matched by issuer and `sub`, made at the first
    sign-in, with teams, roles and platform admin set from the group claim by the group rules.

    It acts only for the sign-in callback (which passes the nonce it stored); a password sign-in
    never reaches the provider. The ID token's signature, nonce, issuer, audience and expiry are
    checked; PKCE binds the code to this browser's session."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The provider's endpoints are read when a sign-in comes, not for every session lookup.
        self.UserModel = get_user_model()

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> User | None:
        if request is None or not oidc_enabled() or "nonce" not in kwargs or "password" in kwargs:
            return None
        try:
            endpoints = provider_endpoints()
        except ProviderUnavailable as error:
            logger.warning("single sign-on refused: %s", error)
            request.portal_sso_error = f"{provider_name()} cannot be reached just now: try again in a minute."
            return None
        self.OIDC_OP_TOKEN_ENDPOINT = endpoints["token_endpoint"]
        self.OIDC_OP_USER_ENDPOINT = endpoints["userinfo_endpoint"]
        self.OIDC_OP_JWKS_ENDPOINT = endpoints["jwks_uri"]
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None
        try:
            return super().authenticate(request, **kwargs)
        except requests.RequestException as error:
            # The provider refused the code (a wrong PKCE verifier, a code used twice) or is down.
            logger.warning("single sign-on refused by the provider: %s", error)
            return None

    def retrieve_matching_jwk(self, token: str) -> jwt.PyJWK:
        """The provider's signing key for `token`: the one its `kid` names, or the only one there is
        when the token names none (the library insists on a `kid`, which OpenID Connect does not)."""
        response = requests.get(self.OIDC_OP_JWKS_ENDPOINT, timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        header = jwt.get_unverified_header(token)
        keys = [
            key
            for key in response.json().get("keys", [])
            if key.get("use", "sig") == "sig" and key.get("alg", header.get("alg")) == header.get("alg")
        ]
        if "kid" in header:
            keys = [key for key in keys if key.get("kid") == header["kid"]]
        if len(keys) != 1:
            raise SuspiciousOperation("No single signing key of the provider fits the ID token.")
        return jwt.PyJWK(keys[0])

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        payload = super().verify_token(token, **kwargs)
        if "nonce" in kwargs:  # the ID token (a signed userinfo answer carries no nonce)
            if str(payload.get("iss", "")).rstrip("/") != settings.PORTAL_OIDC_ISSUER:
                raise SuspiciousOperation("The ID token comes from another issuer.")
            audience = payload.get("aud")
            audiences = [audience] if isinstance(audience, str) else list(audience or [])
            if settings.OIDC_RP_CLIENT_ID not in audiences:
                raise SuspiciousOperation("The ID token is meant for another client.")
        return payload

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The ID token's claims with the userinfo endpoint's on top (groups may come in either)."""
        if not self.OIDC_OP_USER_ENDPOINT:
            return dict(payload)
        userinfo = super().get_userinfo(access_token, id_token, payload)
        if str(userinfo.get("sub")) != str(payload.get("sub")):
            raise SuspiciousOperation("The userinfo answer is about another subject than the ID token.")
        return {**payload, **userinfo}

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        return bool(claims.get("sub"))

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> User | None:
        claims = self.get_userinfo(access_token, id_token, payload)
        if not self.verify_claims(claims):
            raise SuspiciousOperation("The provider sent no subject (sub).")
        try:
            return sso_sign_in(
                issuer=settings.PORTAL_OIDC_ISSUER,
                claims=claims,
                groups_claim=settings.PORTAL_OIDC_GROUPS_CLAIM,
            )
        except DomainError as error:
            self.request.portal_sso_error = error.message
            refused = User.objects.filter(
                oidc_identity__issuer=settings.PORTAL_OIDC_ISSUER, oidc_identity__subject=str(claims["sub"])
            ).first()
            if refused is not None:
                audit_record(actor=None, action="user.sso_refused", obj=refused, detail=error.message)
            return None

    def get_user(self, user_id: int) -> User | None:
        # Django's rule: a deactivated user's session ends at its next request.
        return ModelBackend.get_user(self, user_id)


class PortalOIDCAuthenticateView(OIDCAuthenticationRequestView):
    """Sends the browser to the provider with state, nonce and a PKCE challenge."""

    def __init__(self, **kwargs: Any) -> None:
        View.__init__(self, **kwargs)  # the endpoints are read per request, below

    def get(self, request: HttpRequest) -> HttpResponse:
        if not oidc_enabled():
            raise Http404("Single sign-on is not configured.")
        try:
            endpoints = provider_endpoints()
        except ProviderUnavailable as error:
            logger.warning("single sign-on unavailable: %s", error)
            messages.error(request, f"{provider_name()} cannot be reached just now: try again in a minute.")
            return redirect("login")
        self.OIDC_OP_AUTH_ENDPOINT = endpoints["authorization_endpoint"]
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        return super().get(request)


class PortalOIDCCallbackView(OIDCAuthenticationCallbackView):
    """Where the provider sends the browser back; a failed sign-in returns to the sign-in page
    saying why."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not oidc_enabled():
            raise Http404("Single sign-on is not configured.")
        return super().get(request)

    @property
    def failure_url(self) -> str:
        return resolve_url(settings.LOGIN_URL)

    def login_failure(self) -> HttpResponse:
        message = getattr(self.request, "portal_sso_error", None) or (
            f"Sign-in with {provider_name()} did not succeed: try again, or ask a platform admin."
        )
        messages.error(self.request, message)
        return super().login_failure()


class PortalLogoutView(LogoutView):
    """Ends the portal session; after a single sign-on also the provider's, where it offers an
    end_session_endpoint (RP-initiated logout), coming back to the sign-in page."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        id_token = request.session.get("oidc_id_token")
        response = super().post(request, *args, **kwargs)
        if not id_token or not oidc_enabled():
            return response
        try:
            end_session = provider_endpoints()["end_session_endpoint"]
        except ProviderUnavailable:
            return response
        if not end_session:
            return response
        query = {
            "id_token_hint": id_token,
            "client_id": settings.OIDC_RP_CLIENT_ID,
            "post_logout_redirect_uri": request.build_absolute_uri(resolve_url(settings.LOGOUT_REDIRECT_URL)),
        }
        separator = "&" if "?" in end_session else "?"
        return HttpResponseRedirect(f"{end_session}{separator}{urlencode(query)}")
