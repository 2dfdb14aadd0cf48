"""Webhook messages: their body per format, which URLs the portal posts to, and the posting.

The portal posts only to URLs it accepts here: https, and (unless PORTAL_WEBHOOK_ALLOW_PRIVATE,
on by default with DEBUG) never to a host that resolves to a loopback, private, link-local or
reserved address, so a webhook cannot be used to reach the portal's own network (SSRF). The
address is checked again right before each post.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings

from portal.accounts.deliveries import DeliveryRefused, delivery_send
from portal.accounts.models import WebhookDelivery, WebhookFormat
from portal.core.errors import ValidationFailed

TIMEOUT_SECONDS = 5.0
MAX_ATTEMPTS = 4


def _allow_private() -> bool:
    return bool(getattr(settings, "PORTAL_WEBHOOK_ALLOW_PRIVATE", settings.DEBUG))


def _refuse(message: str, field: str) -> ValidationFailed:
    return ValidationFailed(f"Webhook URL: {message}", fields={field: [message]})


MASKED_PATH = "/…"


def webhook_url_masked(url: str) -> str:
    """What a token that may not change a webhook reads of it: its scheme and host. The rest of a
    Slack or Teams webhook address is the secret that lets anyone post to the channel."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{MASKED_PATH}" if url else ""


def webhook_url_check(url: str, *, field: str = "webhook_url") -> str:
    """The URL, if the portal may post to it ("" clears a webhook); else ValidationFailed."""
    if not url:
        return ""
    if len(url) > 500:
        raise _refuse("At most 500 characters.", field)
    if url.endswith(MASKED_PATH):
        raise _refuse("That is the shortened address the API shows; send the whole URL.", field)
    parts = urlsplit(url)
    allow_private = _allow_private()
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise _refuse("An https:// URL.", field)
    if parts.scheme == "http" and not allow_private:
        raise _refuse("Only https:// URLs are accepted.", field)
    if parts.username or parts.password:
        raise _refuse("No user name or password in the URL.", field)
    if not allow_private:
        try:
            port = parts.port or 443
            addresses = {
                info[4][0] for info in socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
            }
        except (OSError, ValueError):
            raise _refuse(f"The host {parts.hostname} could not be resolved.", field) from None
        for address in addresses:
            ip = ipaddress.ip_address(address.split("%")[0])
            if not ip.is_global:
                raise _refuse(f"{parts.hostname} is a private or loopback address.", field)
    return url


def _slack_link(url: str, label: str) -> str:
    return f"<{url}|{label}>"


# Markdown that a Teams card would act on in a message's text, which can hold what people wrote (a
# request's purpose, a lead's comment): escaped, so that "[Approve](https://elsewhere)" in a
# purpose reads as written and is no link beside the card's own buttons.
_TEAMS_MARKDOWN = str.maketrans({c: "\\" + c for c in "\\`*_[]()<>#!|~"})


def webhook_body(*, webhook_format: str, event: dict[str, Any]) -> dict[str, Any]:
    """The JSON posted for `event` (the generic body, see docs/notifications.md) in a format."""
    actions: dict[str, str] = event.get("actions") or {}
    if webhook_format == WebhookFormat.SLACK:
        links = [_slack_link(event["link"], "Open in the portal")] if event.get("link") else []
        links += [_slack_link(url, label.capitalize()) for label, url in actions.items()]
        text = event["text"].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        return {"text": text + ("\n" + " · ".join(links) if links else "")}
    if webhook_format == WebhookFormat.TEAMS:
        targets = ([("Open in the portal", event["link"])] if event.get("link") else []) + [
            (label.capitalize(), url) for label, url in actions.items()
        ]
        return {
            "@type": "MessageCard",
            "@context": "https://schema.org/extensions",
            "summary": event["text"][:100],
            "text": event["text"].translate(_TEAMS_MARKDOWN),
            "potentialAction": [
                {"@type": "OpenUri", "name": name, "targets": [{"os": "default", "uri": uri}]}
                for name, uri in targets
            ],
        }
    return event


def webhook_deliver(*, delivery_id: int) -> int | None:
    """Post one recorded message, unless another job holds it. Returns the seconds until the next
    try (a failure short of MAX_ATTEMPTS), else None; each failure is kept on the row for the
    settings pages to show. A URL the portal no longer posts to is never tried again."""

    def post(delivery: WebhookDelivery) -> None:
        try:
            webhook_url_check(delivery.url)
        except ValidationFailed as refused:
            raise DeliveryRefused(refused.message) from refused
        response = httpx.post(
            delivery.url, json=delivery.body, timeout=TIMEOUT_SECONDS, follow_redirects=False
        )
        if response.status_code >= 300:
            raise OSError(f"HTTP {response.status_code}: {response.text[:200]}")

    return delivery_send(
        model=WebhookDelivery,
        delivery_id=delivery_id,
        send=post,
        max_attempts=MAX_ATTEMPTS,
        expected=(httpx.HTTPError, OSError),
    )
