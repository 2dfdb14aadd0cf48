"""Where a webhook post may go in production (private addresses refused): every address its host
has is checked, IPv4 addresses carried inside IPv6 ones included, and each post connects to the
address its one lookup checked, its TLS verified for the host's name, so a name that answers a
public address to the check and a private one afterwards (DNS rebinding) reaches nothing inside."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import select
import socket
import socketserver
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
_real_getaddrinfo = socket.getaddrinfo
HOST = "hooks.portal.test"
INSIDE = "10.255.255.1"  # what the name answers once it has been checked
IDN = "bücher.portal.test"
IDN_ASCII = "xn--bcher-kva.portal.test"  # IDNA 2008, as it goes on the wire


@pytest.fixture(autouse=True)
def _no_proxy_from_the_machine(monkeypatch):
    """Proxies the machine running the tests may name are not the ones these tests set."""
    for name in ("https_proxy", "http_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


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
        if host not in (HOST, IDN_ASCII):
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        return _answer("127.0.0.1" if len(lookups) == 1 else INSIDE, port)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    monkeypatch.setattr(webhooks, "_public", lambda ip: ip != ipaddress.ip_address(INSIDE))
    yield bodies, serve
    for server in servers:
        server.shutdown()
        server.server_close()


def _hook(url: str, user) -> WebhookDelivery:
    return WebhookDelivery.objects.create(
        user=user, url=url, webhook_format="generic", kind="budget", body={"text": "hi"}
    )


def _delivered(url: str, user) -> WebhookDelivery:
    """A message to `url` after one job's try at it."""
    delivery = _hook(url, user)
    webhook_deliver(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    return delivery


def test_a_post_goes_to_the_address_its_lookup_checked_with_tls_for_the_name(tls_receiver, researcher):
    bodies, serve = tls_receiver
    port = serve(HOST)
    delivery = _delivered(f"https://{HOST}:{port}/hook", researcher)
    assert delivery.state == WebhookDelivery.State.SENT, delivery.last_error
    assert bodies == [(f"{HOST}:{port}", {"text": "hi"})]  # the name in Host; one lookup, not rebound


def test_a_certificate_for_another_name_is_refused(tls_receiver, researcher):
    bodies, serve = tls_receiver
    port = serve("elsewhere.portal.test")
    delivery = _delivered(f"https://{HOST}:{port}/hook", researcher)
    assert delivery.state == WebhookDelivery.State.PENDING and delivery.attempts == 1
    assert "CERTIFICATE_VERIFY_FAILED" in delivery.last_error and bodies == []


def test_a_name_that_now_answers_an_address_inside_is_never_posted_to_again(tls_receiver, researcher):
    bodies, serve = tls_receiver
    port = serve(HOST)
    webhook_url_check(f"https://{HOST}:{port}/hook")  # accepted when set: its first lookup
    delivery = _hook(f"https://{HOST}:{port}/hook", researcher)

    assert webhook_deliver(delivery_id=delivery.pk) is None
    delivery.refresh_from_db()
    assert delivery.state == WebhookDelivery.State.FAILED and "private or loopback" in delivery.last_error
    assert bodies == []


def test_a_host_that_does_not_resolve_for_now_is_tried_again(settings, monkeypatch, researcher):
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = False

    def down(*args, **kwargs):
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", down)
    delivery = _hook(f"https://{HOST}/hook", researcher)
    assert webhook_deliver(delivery_id=delivery.pk) is not None  # seconds until its retry
    delivery.refresh_from_db()
    assert delivery.state == WebhookDelivery.State.PENDING and "could not be resolved" in delivery.last_error


def test_an_internationalised_host_is_looked_up_sent_and_verified_as_it_goes_on_the_wire(
    tls_receiver, researcher
):
    bodies, serve = tls_receiver
    port = serve(IDN_ASCII)
    delivery = _delivered(f"https://{IDN}:{port}/hook", researcher)
    assert delivery.state == WebhookDelivery.State.SENT, delivery.last_error
    assert bodies == [(f"{IDN_ASCII}:{port}", {"text": "hi"})]


def test_the_next_address_is_tried_when_the_first_refuses_the_connection(
    tls_receiver, researcher, monkeypatch
):
    _bodies, serve = tls_receiver
    port = serve(HOST)
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, p, *a, **k: (
        _answer("127.0.0.2", p) + _answer("127.0.0.1", p) if host == HOST else _real_getaddrinfo(host, p, *a, **k)
    ))  # fmt: skip
    delivery = _delivered(f"https://{HOST}:{port}/hook", researcher)
    assert delivery.state == WebhookDelivery.State.SENT, delivery.last_error


@pytest.mark.parametrize("url", ["https://example.com:99999/hook", "https://example.com:abc/hook"])
def test_a_port_that_is_none_is_a_clear_refusal(url, settings):
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(ValidationFailed, match="valid host name or port"):
        webhook_url_check(url)


class _ConnectProxy(socketserver.BaseRequestHandler):
    """An egress proxy: CONNECT host:port, then bytes both ways."""

    seen: list[str] = []

    def handle(self) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += self.request.recv(4096)
        target = data.split(b"\r\n")[0].split()[1].decode()
        self.seen.append(target)
        host, port = target.rsplit(":", 1)
        upstream = socket.create_connection((host.strip("[]"), int(port)))
        self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        ends = [self.request, upstream]
        while True:
            ready, _, _ = select.select(ends, [], [], 5)
            if not ready:
                return
            for end in ready:
                chunk = end.recv(65536)
                if not chunk:
                    return
                (upstream if end is self.request else self.request).sendall(chunk)


@pytest.fixture
def proxy(monkeypatch) -> Iterator[list[str]]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _ConnectProxy)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _ConnectProxy.seen = []
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{server.server_address[1]}")
    yield _ConnectProxy.seen
    server.shutdown()
    server.server_close()


def _steady(monkeypatch) -> None:
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, p, *a, **k: (
        _answer("127.0.0.1", p) if host == HOST else _real_getaddrinfo(host, p, *a, **k)
    ))  # fmt: skip


def test_behind_an_egress_proxy_the_post_goes_through_it_by_name(
    tls_receiver, proxy, researcher, monkeypatch
):
    _bodies, serve = tls_receiver
    port = serve(HOST)
    _steady(monkeypatch)
    delivery = _delivered(f"https://{HOST}:{port}/hook", researcher)
    assert delivery.state == WebhookDelivery.State.SENT, delivery.last_error
    assert proxy == [f"{HOST}:{port}"]  # the proxy resolves the name, and guards the way out


def test_a_host_the_proxy_is_not_for_is_posted_to_directly_at_its_checked_address(
    tls_receiver, proxy, researcher, monkeypatch
):
    bodies, serve = tls_receiver
    port = serve(HOST)
    _steady(monkeypatch)
    monkeypatch.setenv("NO_PROXY", HOST)
    delivery = _delivered(f"https://{HOST}:{port}/hook", researcher)
    assert delivery.state == WebhookDelivery.State.SENT, delivery.last_error
    assert proxy == [] and bodies == [(f"{HOST}:{port}", {"text": "hi"})]


def test_a_proxy_named_without_a_scheme_is_an_http_proxy(tls_receiver, proxy, researcher, monkeypatch):
    _, serve = tls_receiver
    port = serve(HOST)
    _steady(monkeypatch)
    monkeypatch.setenv("HTTPS_PROXY", os.environ["HTTPS_PROXY"].removeprefix("http://"))  # as curl reads it
    delivery = _delivered(f"https://{HOST}:{port}/hook", researcher)
    assert delivery.state == WebhookDelivery.State.SENT, delivery.last_error
    assert proxy == [f"{HOST}:{port}"]


def test_a_socks_proxy_is_a_clear_failure_without_its_credentials(researcher, settings, monkeypatch):
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = False
    _steady(monkeypatch)
    monkeypatch.setattr(webhooks, "_public", lambda ip: True)
    monkeypatch.setenv("ALL_PROXY", "socks5://user:s3cret@proxy.corp:1080")
    delivery = _delivered(f"https://{HOST}/hook", researcher)
    assert "http:// or https:// egress proxies only, not socks5" in delivery.last_error
    assert "s3cret" not in delivery.last_error


def test_where_only_the_proxy_resolves_names_the_post_goes_through_it(
    tls_receiver, proxy, researcher, monkeypatch
):
    _, serve = tls_receiver
    port = serve(HOST)

    def only_the_proxy(host, p, *args, **kwargs):
        if host != HOST:
            return _real_getaddrinfo(host, p, *args, **kwargs)
        if threading.current_thread() is threading.main_thread():  # the portal: no outside DNS
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return _answer("127.0.0.1", p)  # the proxy's own lookup

    monkeypatch.setattr(socket, "getaddrinfo", only_the_proxy)
    assert webhook_url_check(f"https://{HOST}:{port}/hook")  # accepted when set, too
    delivery = _delivered(f"https://{HOST}:{port}/hook", researcher)
    assert delivery.state == WebhookDelivery.State.SENT, delivery.last_error
    assert proxy == [f"{HOST}:{port}"]


def test_no_proxy_may_name_the_host_with_its_port(tls_receiver, proxy, researcher, monkeypatch):
    bodies, serve = tls_receiver
    port = serve(HOST)
    _steady(monkeypatch)
    monkeypatch.setenv("NO_PROXY", f"{HOST}:{port}")
    delivery = _delivered(f"https://{HOST}:{port}/hook", researcher)
    assert delivery.state == WebhookDelivery.State.SENT, delivery.last_error
    assert proxy == [] and len(bodies) == 1


def test_the_next_address_is_tried_when_the_first_never_answers(tls_receiver, researcher, monkeypatch):
    _, serve = tls_receiver
    port = serve(HOST)
    silent = socket.socket()  # takes the connection, never says a word of TLS
    silent.bind(("127.0.0.2", port))
    silent.listen(8)
    monkeypatch.setattr(webhooks, "TIMEOUT_SECONDS", 0.5)
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, p, *a, **k: (
        _answer("127.0.0.2", p) + _answer("127.0.0.1", p) if host == HOST else _real_getaddrinfo(host, p, *a, **k)
    ))  # fmt: skip
    try:
        delivery = _delivered(f"https://{HOST}:{port}/hook", researcher)
    finally:
        silent.close()
    assert delivery.state == WebhookDelivery.State.SENT, delivery.last_error
