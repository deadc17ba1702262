"""The HTTP API's gates: ASGI middlewares that refuse a request before any route sees it.

From the outside in (see :func:`install`):

1. :class:`HostGuard`: the ``Host`` header must be in the allow-list (loopback names by
   default; ``JOBS_API_ALLOWED_HOSTS`` adds more, ``*`` allows any), so a web page whose name
   an attacker re-points at 127.0.0.1 (DNS rebinding) gets 400, never data. Starlette's
   ``TrustedHostMiddleware`` decides; this only gives its refusal the API's error shape.
2. :class:`CodecCors`: CORS for the codec endpoints (the Temporal Web UI calls them).
3. :class:`CrossSiteGuard`: when the API has no token, a POST/PUT/PATCH/DELETE a browser sends
   on behalf of another site (``Sec-Fetch-Site: cross-site`` or ``same-site``, or an
   ``Origin`` that is not this API's own) is refused with 403. With tokens configured it has
   nothing to do: a browser cannot attach the ``Authorization`` header cross-site without a
   CORS preflight, which the API never grants (the codec endpoints aside).
4. :class:`Guard`: the bearer token and the body size limit, before FastAPI reads anything.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import re
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI
from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware

from jobctl.starter.api.docs_page import PUBLIC_PATHS as DOCS_ASSETS
from jobctl.starter.api.errors import error_response
from jobctl.starter.board.routes import PUBLIC_PATHS as BOARD_PATHS
from jobctl.starter.errors import SpecError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_ENV = "JOBS_API_TOKEN"
# Named tokens, "alice:tok1,bob:tok2": the name is who acts in the jobs' audit trails.
TOKENS_ENV = "JOBS_API_TOKENS"
SINGLE_TOKEN_NAME = "api"  # the actor of JOBS_API_TOKEN
ANONYMOUS = "anonymous"  # the actor when the API runs without tokens (loopback only)
ACTOR_KEY = "jobs.actor"  # where Guard leaves the caller's name in the ASGI scope
TOKEN_NAME_RE = re.compile(r"[A-Za-z0-9._@-]{1,64}")
MAX_BODY_BYTES = 320 * 1024  # the 256 KiB payload limit plus room for the rest of the spec
# The board page, its assets and the docs page's assets hold no data.
PUBLIC_PATHS = {"/healthz", *BOARD_PATHS, *DOCS_ASSETS}
CODEC_PREFIX = "/codec/"
CODEC_MAX_BODY_BYTES = 4 * 1024 * 1024  # a history event's payloads, base64 in JSON
BATCH_PATH = "/jobs/batch"
BATCH_MAX_BODY_BYTES = 4 * 1024 * 1024  # 1,000 specs of ~4 KiB (each payload still <= 256 KiB)
CORS_ENV = "JOBS_CODEC_CORS_ORIGINS"
DEFAULT_CORS_ORIGINS = "http://localhost:8233"
HOSTS_ENV = "JOBS_API_ALLOWED_HOSTS"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
WILDCARD_BINDS = {"", "0.0.0.0", "::", "[::]"}
STATE_CHANGING = {"POST", "PUT", "PATCH", "DELETE"}
# "same-site" too: another port of localhost is another application, not this API.
REFUSED_FETCH_SITES = {"cross-site", "same-site"}
HOST_OK_KEY = "jobs.host_ok"


class HostGuard:
    """The ``Host`` allow-list: Starlette's ``TrustedHostMiddleware`` decides (any port
    matches; ``*.example.com`` patterns and ``*`` work as it documents), the refusal is the
    API's 400 ``bad_request``."""

    def __init__(self, app: ASGIApp, allowed_hosts: list[str]):
        self.app = app
        self.allowed = allowed_hosts
        self.check = TrustedHostMiddleware(_mark_host_ok, allowed_hosts, www_redirect=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.check(scope, receive, _discard)  # its own refusal is thrown away
        if scope.pop(HOST_OK_KEY, False):
            await self.app(scope, receive, send)
            return
        given = Headers(scope=scope).get("host")
        shown = "no Host header" if given is None else f"Host {given[:100]!r}"
        detail = f"{shown} is not served here; allowed: {', '.join(self.allowed)} ({HOSTS_ENV})"
        await error_response(400, "bad_request", detail)(scope, receive, send)


async def _mark_host_ok(scope: Scope, receive: Receive, send: Send) -> None:
    scope[HOST_OK_KEY] = True


async def _discard(message: Message) -> None:
    return None


class CrossSiteGuard:
    """403 for a state-changing request a browser makes on another site's behalf, when the
    API runs without tokens (with tokens, :class:`Guard` already needs a header no cross-site
    page can send). The codec endpoints accept the origins their CORS policy allows."""

    def __init__(self, app: ASGIApp, codec_origins: list[str]):
        self.app = app
        self.codec_origins = set(codec_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in STATE_CHANGING:
            problem = self.problem(scope)
            if problem is not None:
                await error_response(403, "forbidden", problem)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def problem(self, scope: Scope) -> str | None:
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        codec = scope["path"].startswith(CODEC_PREFIX)
        if codec and origin is not None and origin.rstrip("/") in self.codec_origins:
            return None
        why = "this API has no token, so it takes changes only from its own pages and from "
        why += "non-browser clients (or set JOBS_API_TOKEN)"
        site = headers.get("sec-fetch-site", "").strip().lower()
        if site in REFUSED_FETCH_SITES:
            return f"cross-site request refused (Sec-Fetch-Site: {site}): {why}"
        if origin is not None and not same_origin(origin, headers.get("host"), scope["scheme"]):
            return f"request from another origin refused (Origin: {origin[:100]!r}): {why}"
        return None


DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def same_origin(origin: str, host: str | None, scheme: str) -> bool:
    """Whether an ``Origin`` header names this server: the request's scheme, and the host
    and port of its ``Host`` header (``null`` and anything unparsable are not)."""
    try:
        theirs = urlsplit(origin)
        ours = urlsplit(f"//{host}")
        their_port = theirs.port or DEFAULT_PORTS.get(theirs.scheme)
        our_port = ours.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return False
    if theirs.scheme != scheme or not theirs.hostname or host is None:
        return False
    return theirs.hostname == ours.hostname and their_port == our_port


class Guard:
    """Bearer token on every path but the public ones, and the body size limit, both
    enforced before FastAPI reads or parses anything."""

    def __init__(self, app: ASGIApp, tokens: Mapping[str, str] | None = None):
        self.app = app
        self.tokens = [(name, secret.encode()) for name, secret in (tokens or {}).items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        actor = self._actor(scope) if self.tokens else ANONYMOUS
        if actor is None and scope["path"] not in PUBLIC_PATHS:
            await error_response(401, "unauthorized", "missing or wrong bearer token")(
                scope, receive, send
            )
            return
        scope[ACTOR_KEY] = actor or ANONYMOUS
        length = Headers(scope=scope).get("content-length")
        limit = body_limit(scope["path"])
        if length is not None:
            if not length.isdigit() or int(length) > limit:
                await self._too_large(scope, receive, send, limit)
                return
            await self.app(scope, receive, send)
            return
        # No length (chunked): buffer up to the limit ourselves, then replay it to the app.
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left mid-body: nobody to answer, nothing to do
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > limit:
                await self._too_large(scope, receive, send, limit)
                return
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _actor(self, scope: Scope) -> str | None:
        """The name of the bearer token presented, or None. Every token is compared (in
        constant time), so the answer's timing does not tell which name matched."""
        for name, value in scope.get("headers") or []:
            if name == b"authorization":
                scheme, _, given = value.decode("latin-1").partition(" ")
                if scheme.lower() != "bearer":
                    return None
                secret = given.strip().encode()
                found = None
                for who, expected in self.tokens:
                    if hmac.compare_digest(secret, expected) and found is None:
                        found = who
                return found
        return None

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        response = error_response(413, "too_large", f"request body over {limit} bytes")
        await response(scope, receive, send)


class CodecCors:
    """CORS on the codec endpoints only (the Web UI calls them from the browser). A preflight
    ``OPTIONS`` is answered here, before the token check, because browsers never send
    ``Authorization`` on a preflight."""

    def __init__(self, app: ASGIApp, origins: list[str]):
        self.app = app
        self.cors = CORSMiddleware(
            app,
            allow_origins=origins,
            allow_methods=["POST"],
            allow_headers=["authorization", "content-type", "x-namespace"],
            allow_credentials=True,  # the UI may "include cross-origin credentials"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(CODEC_PREFIX):
            await self.cors(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def install(app: FastAPI, tokens: Mapping[str, str], allowed_hosts: list[str]) -> None:
    """Add the gates, outermost last (Starlette wraps each new one around the others)."""
    origins = cors_origins()
    app.add_middleware(Guard, tokens=tokens)
    if not tokens:
        app.add_middleware(CrossSiteGuard, codec_origins=origins)
    app.add_middleware(CodecCors, origins=origins)
    app.add_middleware(HostGuard, allowed_hosts=allowed_hosts)


def cors_origins() -> list[str]:
    """``JOBS_CODEC_CORS_ORIGINS``: comma-separated origins, default the dev server's UI."""
    raw = os.environ.get(CORS_ENV, DEFAULT_CORS_ORIGINS)
    return [origin.strip().rstrip("/") for origin in raw.split(",") if origin.strip()]


def load_allowed_hosts(bind: str | None = None) -> list[str]:
    """The ``Host`` allow-list: the loopback names, the address the API binds (unless a
    wildcard), and ``JOBS_API_ALLOWED_HOSTS`` (comma-separated names or IPs, no port;
    ``*.example.com`` for subdomains, ``*`` for any). A malformed entry stops the API at
    start-up."""
    hosts = list(LOOPBACK_HOSTS)
    extra = [] if bind is None or bind.strip() in WILDCARD_BINDS else [bind]
    extra += os.environ.get(HOSTS_ENV, "").split(",")
    for item in extra:
        entry = _host_pattern(item.strip().lower())
        if entry and entry not in hosts:
            hosts.append(entry)
    return hosts


def _host_pattern(entry: str) -> str:
    if not entry or entry == "*":
        return entry
    bare = entry[1:-1] if entry.startswith("[") and entry.endswith("]") else entry
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        address = None
    if address is not None:
        return f"[{address}]" if address.version == 6 else str(address)
    label = r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?"
    if re.fullmatch(rf"(\*\.)?{label}(\.{label})*", entry):
        return entry
    raise SpecError(
        [(HOSTS_ENV, f"{entry[:100]!r} is not a host name, IP address or *.domain (no port)")]
    )


def load_tokens() -> dict[str, str]:
    """Bearer tokens by name: ``JOBS_API_TOKEN`` (named ``api``) and ``JOBS_API_TOKENS``
    (``alice:tok1,bob:tok2``). A malformed list stops the API at start-up (never echoing a
    token)."""
    tokens: dict[str, str] = {}
    single = os.environ.get(TOKEN_ENV)
    if single:
        tokens[SINGLE_TOKEN_NAME] = single
    for item in os.environ.get(TOKENS_ENV, "").split(","):
        if not item.strip():
            continue
        name, sep, secret = (part.strip() for part in item.strip().partition(":"))
        if not sep or not secret or not TOKEN_NAME_RE.fullmatch(name):
            raise SpecError(
                [
                    (
                        TOKENS_ENV,
                        "each entry must be name:token, the name 1-64 letters, digits or . _ @ -",
                    )
                ]
            )
        if name in tokens:
            taken = (
                f" ({TOKEN_ENV} is named {SINGLE_TOKEN_NAME})" if name == SINGLE_TOKEN_NAME else ""
            )
            raise SpecError([(TOKENS_ENV, f"the name {name!r} is given twice{taken}")])
        if secret in tokens.values():
            raise SpecError([(TOKENS_ENV, f"{name!r} has the same token as another name")])
        tokens[name] = secret
    return tokens


def named_tokens(token: str | None, tokens: Mapping[str, str] | None) -> dict[str, str]:
    """``create_app``'s arguments as one name -> token map (the environment when both are
    None)."""
    if token is None and tokens is None:
        return load_tokens()
    return {**({SINGLE_TOKEN_NAME: token} if token else {}), **(tokens or {})}


def body_limit(path: str) -> int:
    """The most bytes a request body to ``path`` may have."""
    if path.startswith(CODEC_PREFIX):
        return CODEC_MAX_BODY_BYTES
    return BATCH_MAX_BODY_BYTES if path == BATCH_PATH else MAX_BODY_BYTES
