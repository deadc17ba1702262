"""Helpers for the ``http.post`` hostile tests: a loopback server, a fake DNS, a tripwire.

Nothing here sends traffic anywhere but 127.0.0.1: hostile names resolve through
:class:`FakeDNS` without any lookup, and :func:`install_tripwire` fails any connect to a
non-loopback address (or to a name, which would mean the checked address was not pinned).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from jobctl.activities.address_guard import IPAddress
from jobctl.activities.registry import JobContext


@dataclass
class Hit:
    path: str
    host: str | None
    body: Any
    key: str | None


@dataclass
class Server:
    url: str
    port: int
    hits: list[Hit] = field(default_factory=list)
    sni: list[str | None] = field(default_factory=list)


@contextmanager
def serve(tls: ssl.SSLContext | None = None) -> Iterator[Server]:
    """POST /ok answers 200; /to?url=U&code=C answers C with Location U. Records every hit."""
    server_state = Server(url="", port=0)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            server_state.hits.append(
                Hit(
                    self.path,
                    self.headers.get("Host"),
                    json.loads(raw) if raw else None,
                    self.headers.get("Idempotency-Key"),
                )
            )
            split = urlsplit(self.path)
            query = parse_qs(split.query)
            code, location = 200, None
            if split.path == "/to":
                code, location = int(query["code"][0]), query["url"][0]
            self.send_response(code)
            if location is not None:
                self.send_header("Location", location)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if tls is not None:

        def remember_sni(sock: ssl.SSLObject, name: str, ctx: ssl.SSLContext) -> None:
            server_state.sni.append(name)

        tls.sni_callback = remember_sni
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    server_state.port = server.server_address[1]
    scheme = "https" if tls else "http"
    server_state.url = f"{scheme}://127.0.0.1:{server_state.port}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server_state
    finally:
        server.shutdown()
        server.server_close()


class FakeDNS:
    """Names to addresses, without any lookup; ``rebind.example`` changes after one answer."""

    TABLE = {
        "evil.example": ["169.254.169.254"],
        "metadata.google.internal": ["169.254.169.254"],
        "internal.example": ["10.0.0.1"],
        "v6.example": ["fd00::1"],
        "mapped.example": ["::ffff:127.0.0.1"],
        "mixed.example": ["127.0.0.1", "10.0.0.1"],
        "nat64.example": ["64:ff9b::a00:1"],
        "localhost": ["127.0.0.1", "::1"],
        "hooks.internal": ["127.0.0.1"],
    }

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> list[IPAddress]:
        host = host.removesuffix(".")
        self.calls.append(host)
        if host == "rebind.example":
            answer = ["127.0.0.1"] if self.calls.count(host) == 1 else ["10.0.0.1"]
        elif host in self.TABLE:
            answer = self.TABLE[host]
        else:
            raise socket.gaierror(socket.EAI_NONAME, f"{host}: unknown to FakeDNS")
        return [ipaddress.ip_address(a) for a in answer]


def install_tripwire(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every TCP connect through httpx fail unless it goes to a loopback IP literal."""
    strays: list[str] = []
    real = anyio.connect_tcp

    async def guarded_connect(remote_host: Any, remote_port: int, **kwargs: Any) -> Any:
        try:
            loopback = ipaddress.ip_address(str(remote_host)).is_loopback
        except ValueError:
            loopback = False  # a name: the checked address was not pinned
        if not loopback:
            strays.append(f"{remote_host}:{remote_port}")
            raise AssertionError(f"tripwire: connect to {remote_host}:{remote_port}")
        return await real(remote_host, remote_port, **kwargs)

    monkeypatch.setattr(anyio, "connect_tcp", guarded_connect)
    return strays


def context(url: Any) -> JobContext:
    return JobContext(
        job_id="hostile",
        name="hostile",
        attempt=1,
        max_attempts=1,
        scheduled_at=dt.datetime.now(dt.UTC),
        idempotency_key="key-1",
        payload={"url": url, "json": {"n": 1}, "timeout": 5},
        worker="test",
    )


def redirect(server: Server, to: str, code: int = 307) -> str:
    return f"{server.url}/to?{httpx.QueryParams({'url': to, 'code': code})}"


def tls_pair(name: str, tmp: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a certificate for ``name`` and a client context trusting it."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp / "cert.pem").write_bytes(pem)
    (tmp / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp / "cert.pem", tmp / "key.pem")
    client_ctx = ssl.create_default_context(cadata=pem.decode())
    return server_ctx, client_ctx
