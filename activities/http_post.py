"""The guarded HTTP client behind ``http.post``: resolve once, check, connect to that address.

Every request (the first and each followed redirect) goes through :class:`PinnedTransport`:
it resolves the host once, refuses unless :func:`activities.address_guard.check_addresses`
allows every address, then connects to the checked address itself, keeping the ``Host``
header and the TLS server name (SNI and certificate check) of the URL. A DNS answer that
changes between the check and the connection (rebinding) therefore cannot win.

Redirects: only 307 and 308 (which keep the method and body) are followed, at most
:data:`MAX_REDIRECTS`, each checked like the first request. Other 3xx answers are returned
as they are (``http.post`` treats them as failures). Proxy variables are not used: the
worker connects directly, so the checked address is the one reached.

:data:`RESOLVER` is the host-name lookup; tests replace it to make a name resolve anywhere
without sending traffic there.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable
from ipaddress import IPv6Address
from typing import Any

import httpx

from jobctl.activities.address_guard import (
    AllowList,
    DestinationRefused,
    IPAddress,
    check_addresses,
    check_url,
    literal_address,
)
from jobctl.activities.context import PermanentError

Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]

MAX_REDIRECTS = 5
_FOLLOWED = (307, 308)


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    """Every address the system resolver gives for ``host`` (IPv4 and IPv6)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: list[IPAddress] = []
    for family, _, _, _, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6):
            address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
            if address not in found:
                found.append(address)
    return found


RESOLVER: Resolver = system_resolver


@functools.cache
def default_tls() -> ssl.SSLContext:
    """One verifying context per process (loading the CA bundle costs ~50 ms of CPU)."""
    return httpx.create_ssl_context()


class PinnedTransport(httpx.AsyncBaseTransport):
    """Resolves, checks and connects to the checked address (see the module docstring)."""

    def __init__(
        self,
        allow: AllowList,
        resolver: Resolver,
        timeout: float,
        verify: ssl.SSLContext | None = None,
    ) -> None:
        self._allow = allow
        self._resolver = resolver
        self._timeout = timeout
        # No keep-alive: a connection is never reused for another host behind the same IP.
        self._inner = httpx.AsyncHTTPTransport(
            verify=verify or default_tls(), limits=httpx.Limits(max_keepalive_connections=0)
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        host = check_url(request.url)
        addresses = await self._resolve(request, host)
        check_addresses(host, addresses, self._allow)
        extensions = dict(request.extensions)
        if literal_address(host) is None:
            extensions["sni_hostname"] = host.removesuffix(".")  # the certificate's name
        error: httpx.ConnectError | None = None
        for address in addresses:  # the next address only if nothing was sent to this one
            mapped = address.ipv4_mapped if isinstance(address, IPv6Address) else None
            pinned = httpx.Request(
                request.method,
                request.url.copy_with(host=str(mapped or address)),
                headers=request.headers,  # carries Host: the URL's own host
                stream=request.stream,
                extensions=extensions,
            )
            try:
                return await self._inner.handle_async_request(pinned)
            except httpx.ConnectError as err:
                error = err
        assert error is not None  # _resolve never returns an empty list
        raise error

    async def _resolve(self, request: httpx.Request, host: str) -> list[IPAddress]:
        literal = literal_address(host)
        if literal is not None:
            return [literal]
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        try:
            async with asyncio.timeout(self._timeout):
                addresses = await self._resolver(host, port)
        except TimeoutError as err:
            raise httpx.ConnectTimeout(f"resolving {host} timed out", request=request) from err
        except OSError as err:  # socket.gaierror: retried, DNS may come back
            raise httpx.ConnectError(f"cannot resolve {host}: {err}", request=request) from err
        if not addresses:
            raise httpx.ConnectError(f"{host} has no address", request=request)
        return addresses

    async def aclose(self) -> None:
        await self._inner.aclose()


async def post(
    url: str,
    body: Any,
    headers: dict[str, str],
    timeout: float,
    *,
    allow: AllowList | None = None,
    resolver: Resolver | None = None,
    verify: ssl.SSLContext | None = None,
) -> httpx.Response:
    """POST ``body`` as JSON to ``url`` through :class:`PinnedTransport`, following 307/308.

    ``allow`` defaults to ``JOBS_HTTP_ALLOWED_HOSTS``, ``resolver`` to :data:`RESOLVER` and
    ``verify`` (the TLS context) to :func:`default_tls`.
    Raises :class:`DestinationRefused` (permanent) for a refused URL or destination.
    """
    try:
        target = httpx.URL(url)
    except httpx.InvalidURL as err:
        raise DestinationRefused(f"payload.url is not a valid URL: {err}") from err
    check_url(target)
    if allow is None:
        try:
            allow = AllowList.from_env()
        except ValueError as err:
            raise PermanentError(str(err)) from err
    transport = PinnedTransport(allow, resolver or RESOLVER, timeout, verify)
    redirected_by: str | None = None
    async with httpx.AsyncClient(transport=transport, timeout=timeout) as client:
        for _ in range(MAX_REDIRECTS + 1):
            try:
                response = await client.post(target, json=body, headers=headers)
            except DestinationRefused as err:
                if redirected_by is None:
                    raise
                raise DestinationRefused(f"{err} (after a redirect from {redirected_by})") from err
            location = response.headers.get("location")
            if response.status_code not in _FOLLOWED or location is None:
                return response
            redirected_by = response.url.netloc.decode("ascii")
            try:
                target = response.url.join(location)
            except httpx.InvalidURL as err:
                raise DestinationRefused(f"{redirected_by} redirected to a bad URL: {err}") from err
    raise PermanentError(f"POST {url} redirected more than {MAX_REDIRECTS} times")
