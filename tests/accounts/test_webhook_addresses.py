"""Where a webhook post may go in production (private addresses refused): every address its host
has is checked, IPv4 addresses carried inside IPv6 ones included, and each post connects to the
address its one lookup checked, its TLS verified for the host's name, so a name that answers a
public address to the check and a private one afterwards (DNS rebinding) reaches nothing inside."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from portal.accounts import webhooks
from portal.accounts.models import WebhookDelivery
from portal.accounts.webhooks import webhook_deliver, webhook_url_check
from portal.core.errors import ValidationFailed

pytestmark = pytest.mark.django_db
HOST = "hooks.portal.test"
INSIDE = "10.255.255.1"  # what the name answers once it has been checked


def _answer(address: str, port: int) -> list:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    return [(family, socket.SOCK_STREAM, 6, "", (address, port))]


@pytest.mark.parametrize(
    "address",
    [
        "10.0.0.1",
        "169.254.169.254",
        "::1",
        "fd00::1",
        "::ffff:10.0.0.1",  # IPv4-mapped
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "2002:a00:1::1",  # 6to4 of 10.0.0.1
        "::a00:1",  # IPv4-compatible 10.0.0.1
    ],
)
def test_a_host_with_an_address_inside_is_refused(address, settings, monkeypatch):
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = False
    public = "203.0.113.7" if ":" not in address else "2606:4700::1111"
    monkeypatch.setattr(
        socket, "getaddrinfo", lambda host, port, **kw: _answer(public, port) + _answer(address, port)
    )
    with pytest.raises(ValidationFailed, match="private or loopback"):
        webhook_url_check(f"https://{HOST}/hook")


def test_public_addresses_with_ipv4_inside_them_are_accepted(settings, monkeypatch):
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = False
    answers = _answer("64:ff9b::808:808", 443) + _answer("2606:4700::1111", 443) + _answer("8.8.8.8", 443)
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, port, **kw: answers)
    assert webhook_url_check(f"https://{HOST}/hook") == f"https://{HOST}/hook"


def _certificate(name: str, *, issuer_key=None, issuer_name=None, ca: bool = False):
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name or subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
    return key, builder.sign(issuer_key or key, hashes.SHA256())


def _pem(key, cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@pytest.fixture
def tls_receiver(tmp_path: Path, settings, monkeypatch) -> Iterator[tuple[list, callable]]:
    """An https receiver on loopback, its certificate for HOST signed by a CA the portal trusts
    (SSL_CERT_FILE); HOST answers loopback to its first lookup and INSIDE to any later one, and
    loopback counts as public here, INSIDE not."""
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = False
    ca_key, ca_cert = _certificate("Portal test CA", ca=True)
    (tmp_path / "ca.pem").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    bodies: list = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # the name http.server calls
            bodies.append(
                (self.headers["Host"], json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            )
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    servers = []

    def serve(name: str) -> int:
        key, cert = _certificate(name, issuer_key=ca_key, issuer_name=ca_cert.subject)
        (tmp_path / f"{name}.pem").write_bytes(_pem(key, cert))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tmp_path / f"{name}.pem")
        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1]

    real = socket.getaddrinfo
    lookups: list[str] = []

    def rebinding(host, port, *args, **kwargs):
        if host != HOST:
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        return _answer("127.0.0.1" if len(lookups) == 1 else INSIDE, port)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    monkeypatch.setattr(webhooks, "_public", lambda ip: ip != ipaddress.ip_address(INSIDE))
    yield bodies, serve
    for server in servers:
        server.shutdown()
        server.server_close()


def _hook(url: str) -> WebhookDelivery:
    return WebhookDelivery.objects.create(
        url=url, webhook_format="generic", kind="budget", body={"text": "hi"}
    )


def test_a_post_goes_to_the_address_its_lookup_checked_with_tls_for_the_name(tls_receiver, researcher):
    bodies, serve = tls_receiver
    port = serve(HOST)
    delivery = _hook(f"https://{HOST}:{port}/hook")
    delivery.user = researcher
    delivery.save()

    assert webhook_deliver(delivery_id=delivery.pk) is None
    delivery.refresh_from_db()
    assert delivery.state == WebhookDelivery.State.SENT, delivery.last_error
    assert bodies == [(f"{HOST}:{port}", {"text": "hi"})]  # the name in Host; one lookup, not rebound


def test_a_certificate_for_another_name_is_refused(tls_receiver, researcher):
    bodies, serve = tls_receiver
    port = serve("elsewhere.portal.test")
    delivery = _hook(f"https://{HOST}:{port}/hook")
    delivery.user = researcher
    delivery.save()

    webhook_deliver(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert delivery.state == WebhookDelivery.State.PENDING and delivery.attempts == 1
    assert "CERTIFICATE_VERIFY_FAILED" in delivery.last_error and bodies == []


def test_a_name_that_now_answers_an_address_inside_is_never_posted_to_again(tls_receiver, researcher):
    bodies, serve = tls_receiver
    port = serve(HOST)
    webhook_url_check(f"https://{HOST}:{port}/hook")  # accepted when set: its first lookup
    delivery = _hook(f"https://{HOST}:{port}/hook")
    delivery.user = researcher
    delivery.save()

    assert webhook_deliver(delivery_id=delivery.pk) is None
    delivery.refresh_from_db()
    assert delivery.state == WebhookDelivery.State.FAILED and "private or loopback" in delivery.last_error
    assert bodies == []


def test_a_host_that_does_not_resolve_for_now_is_tried_again(settings, monkeypatch, researcher):
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = False

    def down(*args, **kwargs):
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", down)
    delivery = _hook(f"https://{HOST}/hook")
    delivery.user = researcher
    delivery.save()
    assert webhook_deliver(delivery_id=delivery.pk) is not None  # seconds until its retry
    delivery.refresh_from_db()
    assert delivery.state == WebhookDelivery.State.PENDING and "could not be resolved" in delivery.last_error
