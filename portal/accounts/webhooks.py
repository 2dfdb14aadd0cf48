"""Webhook messages: their body per format, which URLs the portal posts to, and the posting.

The portal posts only to URLs it accepts here: https, and (unless PORTAL_WEBHOOK_ALLOW_PRIVATE,
on by default with DEBUG) never to a host that resolves to a loopback, private, link-local or
reserved address, nor to an IPv6 address that carries such an IPv4 one (mapped, NAT64, 6to4,
Teredo), so a webhook cannot be used to reach the portal's own network (SSRF). Before each post
the host is resolved once, and the post connects to the address that was checked (its TLS still
verified for the host's name): a name that answers a public address to the check and a private
one to the connection (DNS rebinding) reaches nothing inside. Behind an egress proxy the post
goes through it by name, and the proxy guards the way out.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings

from portal.accounts.deliveries import DeliveryRefused, delivery_send
from portal.accounts.models import WebhookDelivery, WebhookFormat
from portal.core.errors import ValidationFailed

TIMEOUT_SECONDS = 5.0
# Of a reply, only its status matters, and the start of its body for the error kept on a failure:
# no more is read (a receiver could answer gigabytes, into the worker's memory), uncompressed.
REPLY_BYTES_KEPT = 2048
ADDRESSES_TRIED = 3  # of a host's addresses, in the order of its lookup: a send stays inside its hold
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
    _checked(url, field)
    return url


def _checked(url: str, field: str) -> list[str]:
    """The addresses a webhook URL's host has now, each one checked (none where private ones are
    allowed); ValidationFailed for a URL the portal does not post to."""
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
    try:
        parts.port  # noqa: B018 (a port out of range or not a number shows only when asked for)
        target = httpx.URL(url)  # its host as it is sent: IDNA 2008, as httpx encodes it
    except (httpx.InvalidURL, ValueError):
        raise _refuse("Not a valid host name or port.", field) from None
    if allow_private:
        return []
    try:
        return _public_addresses(_ascii_host(target), target.port or 443, field)
    except Unresolved:
        if _proxy_for(target):  # only the egress proxy resolves outside names: it guards the way
            return []
        raise


def _ascii_host(target: httpx.URL) -> str:
    return target.raw_host.decode("ascii")


# IPv6 prefixes whose addresses carry an IPv4 address in their last 32 bits: NAT64 (RFC 6052,
# RFC 8215) and the deprecated IPv4-compatible form.
_IPV4_CARRIERS = tuple(ipaddress.ip_network(net) for net in ("64:ff9b::/96", "64:ff9b:1::/48", "::/96"))


def _public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether an address is on the public internet, with any IPv4 address it carries."""
    if not ip.is_global:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        carried = [ip.ipv4_mapped, ip.sixtofour, ip.teredo[1] if ip.teredo else None]
        carried += [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) for net in _IPV4_CARRIERS if ip in net]
        return all(_public(inner) for inner in carried if inner is not None)
    return True


class Unresolved(ValidationFailed, status=400, code="invalid"):
    """The host has no address now: refused when the URL is set, tried again when posting (DNS
    may be down for a while)."""


def _public_addresses(hostname: str, port: int, field: str) -> list[str]:
    """Every address the host resolves to, if each one is public; else ValidationFailed."""
    try:
        found = socket.getaddrinfo(hostname, port, type=socket.SOCK_STREAM)
    except (OSError, ValueError, UnicodeError):
        message = f"The host {hostname} could not be resolved."
        raise Unresolved(f"Webhook URL: {message}", fields={field: [message]}) from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
    for address in addresses:
        if not _public(ipaddress.ip_address(address.split("%")[0])):
            raise _refuse(f"{hostname} is a private or loopback address.", field)
    return addresses


def _proxy_for(target: httpx.URL) -> str:
    """The egress proxy the environment names for this URL (HTTPS_PROXY or ALL_PROXY, either
    case, unless NO_PROXY names the host), as a URL ("proxy:3128" reads as http://, as curl and
    httpx read it), or ""."""
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(target.scheme) or proxies.get("all") or ""
    host = f"{_ascii_host(target)}:{target.port or 443}"  # NO_PROXY entries match with or without port
    if not proxy or urllib.request.proxy_bypass_environment(host, proxies):
        return ""
    return proxy if "://" in proxy else f"http://{proxy}"


def _client(proxy: str | None = None) -> httpx.Client:
    """A client that takes its proxy from `_proxy_for`, not from the environment itself (an IP
    address would not match NO_PROXY's names), and its CAs from the environment still
    (SSL_CERT_FILE, SSL_CERT_DIR), as httpx does by default."""
    return httpx.Client(
        timeout=TIMEOUT_SECONDS,
        follow_redirects=False,
        proxy=proxy,
        trust_env=False,
        verify=httpx.create_ssl_context(trust_env=True),
    )


@dataclass(frozen=True)
class Reply:
    """A receiver's answer: its status, and the start of its body (REPLY_BYTES_KEPT at most)."""

    status_code: int
    text: str


def _send(client: httpx.Client, url: httpx.URL, body: dict[str, Any], **options: Any) -> Reply:
    """POST, then read no more of the reply than REPLY_BYTES_KEPT (asked for uncompressed, so that
    what is read is what arrives) and close it."""
    headers = {"Accept-Encoding": "identity", **options.pop("headers", {})}
    with client.stream("POST", url, json=body, headers=headers, **options) as response:
        head = b""
        for chunk in response.iter_raw():
            head += chunk
            if len(head) >= REPLY_BYTES_KEPT:
                break
    return Reply(response.status_code, head[:REPLY_BYTES_KEPT].decode("utf-8", errors="replace"))


def _post(url: str, body: dict[str, Any]) -> Reply:
    """POST the body to the URL, connecting to an address its host was checked at just now (one
    lookup; the next one if a connection fails), its TLS verified for the host's name. Behind an
    egress proxy the post goes through it by name: the proxy resolves it, and guards the way out.
    ValidationFailed for a URL the portal does not post to (any more)."""
    addresses = _checked(url, "webhook_url")
    target = httpx.URL(url)
    proxy = _proxy_for(target)
    if proxy and not proxy.startswith(("http://", "https://")):
        raise OSError(
            f"Webhooks go through http:// or https:// egress proxies only, not {proxy.split(':')[0]}."
        )
    if not addresses or proxy:
        with _client(proxy=proxy or None) as client:
            return _send(client, target, body)
    name = _ascii_host(target)
    host = (f"[{name}]" if ":" in name else name) + (f":{target.port}" if target.port else "")
    tries = addresses[:ADDRESSES_TRIED]
    with _client() as client:
        for address in tries[:-1]:
            try:
                return _post_to(client, target.copy_with(host=address), body, host=host, name=name)
            except (httpx.ConnectError, httpx.ConnectTimeout):
                continue  # as a connection by name would: the next address
        return _post_to(client, target.copy_with(host=tries[-1]), body, host=host, name=name)


def _post_to(client: httpx.Client, pinned: httpx.URL, body: dict[str, Any], *, host: str, name: str) -> Reply:
    # the name in Host, and in SNI, which is also the name the certificate must carry
    return _send(client, pinned, body, headers={"Host": host}, extensions={"sni_hostname": name})


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
            response = _post(delivery.url, delivery.body)
        except Unresolved as unresolved:
            raise OSError(unresolved.message) from unresolved
        except ValidationFailed as refused:
            raise DeliveryRefused(refused.message) from refused
        if response.status_code >= 300:
            raise OSError(f"HTTP {response.status_code}: {response.text[:200]}")

    return delivery_send(
        model=WebhookDelivery,
        delivery_id=delivery_id,
        send=post,
        max_attempts=MAX_ATTEMPTS,
        expected=(httpx.HTTPError, OSError),
    )
