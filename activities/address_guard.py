"""Where ``http.post`` may send: the URL shape, the address classes it refuses, the allow-list.

Pure decisions, no I/O: :mod:`activities.http_post` resolves the host, asks
:func:`check_addresses`, and connects to the address that was checked.

By default only globally routable unicast addresses are allowed. Loopback, private,
link-local (cloud metadata), shared (CGNAT), unspecified, multicast, broadcast, documentation,
benchmarking and reserved ranges are refused, in IPv4 and IPv6, including IPv4 addresses
wrapped in IPv6 (IPv4-mapped ``::ffff:a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``).
``JOBS_HTTP_ALLOWED_HOSTS`` (comma-separated host names, IP addresses and CIDR networks)
lets an operator permit destinations.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

from jobctl.activities.context import PermanentError

ALLOWED_HOSTS_ENV = "JOBS_HTTP_ALLOWED_HOSTS"
URL_SHAPE_ERROR = "payload.url must be an http(s) URL"

IPAddress = IPv4Address | IPv6Address
IPNetwork = IPv4Network | IPv6Network

# Special-purpose ranges (IANA registries) that are not ours to reach, most specific first.
_SPECIAL: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/32", "unspecified"),
    ("0.0.0.0/8", "'this network'"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared (carrier-grade NAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local (cloud metadata)"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "IETF protocol assignment"),
    ("192.0.2.0/24", "documentation"),
    ("192.88.99.0/24", "6to4 relay anycast"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("255.255.255.255/32", "broadcast"),
    ("240.0.0.0/4", "reserved"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("::/96", "IPv4-compatible (deprecated)"),
    ("64:ff9b:1::/48", "local-use NAT64"),
    ("100::/64", "discard-only"),
    ("2001:db8::/32", "documentation"),
    ("2001::/23", "IETF protocol assignment"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "segment routing"),
    ("fc00::/7", "private (unique local)"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local (deprecated)"),
    ("ff00::/8", "multicast"),
)
_SPECIAL_NETWORKS = tuple((ipaddress.ip_network(net), label) for net, label in _SPECIAL)
_NAT64 = IPv6Network("64:ff9b::/96")

# inet_aton's spellings: 2130706433, 0x7f.1, 0177.0.0.1, 127.1, 0 (what getaddrinfo accepts).
_LEGACY_IPV4 = re.compile(r"[0-9][0-9a-fx.]*", re.IGNORECASE)
_HOST_NAME = re.compile(
    r"(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*"
)


class DestinationRefused(PermanentError):
    """``http.post`` will not send to this destination (permanent: retrying cannot help)."""


def embedded_ipv4(address: IPAddress) -> tuple[str, IPv4Address] | None:
    """The IPv4 address an IPv6 address stands for (mapped, NAT64, 6to4), with the form."""
    if isinstance(address, IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return "IPv4-mapped", address.ipv4_mapped
    if address in _NAT64:
        return "NAT64", IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return "6to4", address.sixtofour
    return None


def refusal_reason(address: IPAddress) -> str | None:
    """Why ``address`` is not a public destination (``"a loopback address"``), or None."""
    wrapped = embedded_ipv4(address)
    if wrapped is not None:
        form, inner = wrapped
        reason = refusal_reason(inner)
        return None if reason is None else f"the {form} form of {inner}, {reason}"
    label = None
    for network, name in _SPECIAL_NETWORKS:
        if address.version == network.version and address in network:
            label = name
            break
    if label is None and address.is_reserved:
        label = "reserved"
    if label is None and not address.is_global:
        label = "non-global"
    if label is None:
        return None
    article = "an" if label[0] in "aeiouAEIOU" else "a"
    return f"{article} {label} address"


def literal_address(host: str) -> IPAddress | None:
    """``host`` as an IP address if it is one in any spelling the system resolver accepts."""
    bare = host[:-1] if host.endswith(".") else host
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    if _LEGACY_IPV4.fullmatch(bare):
        try:
            return IPv4Address(socket.inet_aton(bare))  # pure parsing, no lookup
        except OSError:
            return None
    return None


def normalise_name(host: str) -> str:
    return host.lower().removesuffix(".")


@dataclass(frozen=True)
class AllowList:
    """Destinations an operator permits despite their address class."""

    names: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, spec: str) -> AllowList:
        """``"127.0.0.1,localhost,10.0.0.0/8,hooks.internal"``; raises ValueError if malformed."""
        names: set[str] = set()
        networks: list[IPNetwork] = []
        for entry in filter(None, (part.strip() for part in spec.split(","))):
            if "/" in entry or literal_address(entry.strip("[]")) is not None:
                networks.append(_network(entry))
            elif _HOST_NAME.fullmatch(normalise_name(entry)):
                names.add(normalise_name(entry))
            else:
                raise ValueError(
                    f"{ALLOWED_HOSTS_ENV}: {entry!r} is not a host name, IP address or CIDR network"
                )
        return cls(frozenset(names), tuple(networks))

    @classmethod
    def from_env(cls) -> AllowList:
        return cls.parse(os.environ.get(ALLOWED_HOSTS_ENV, ""))

    def permits_name(self, host: str) -> bool:
        return normalise_name(host) in self.names

    def permits_address(self, address: IPAddress) -> bool:
        mapped = address.ipv4_mapped if isinstance(address, IPv6Address) else None
        return any(
            candidate.version == network.version and candidate in network
            for network in self.networks
            for candidate in (address, mapped)
            if candidate is not None
        )


def _network(entry: str) -> IPNetwork:
    bare = entry.strip("[]")
    try:
        literal = literal_address(bare)
        if literal is not None:
            return ipaddress.ip_network(literal)
        return ipaddress.ip_network(bare, strict=False)
    except ValueError as err:
        raise ValueError(f"{ALLOWED_HOSTS_ENV}: {entry!r} is not a valid network: {err}") from err


def check_url(url: httpx.URL) -> str:
    """The host to resolve for ``url``, or a :class:`DestinationRefused` for a bad shape."""
    if url.scheme not in ("http", "https"):
        raise DestinationRefused(URL_SHAPE_ERROR)
    host = url.raw_host.decode("ascii")
    if not host:
        raise DestinationRefused(f"{URL_SHAPE_ERROR}: it has no host")
    if url.userinfo:
        raise DestinationRefused(
            f"http.post refused a URL with credentials before the host ({host}): "
            "user:password@ is not supported"
        )
    if literal_address(host) is None and not _HOST_NAME.fullmatch(normalise_name(host)):
        raise DestinationRefused(f"http.post refused {host[:100]!r}: not a valid host name")
    return host


def check_addresses(host: str, addresses: list[IPAddress], allow: AllowList) -> None:
    """Raise :class:`DestinationRefused` unless every address ``host`` resolved to is allowed."""
    if allow.permits_name(host):
        return
    for address in addresses:
        if allow.permits_address(address):
            continue
        reason = refusal_reason(address)
        if reason is None:
            continue
        literal = literal_address(host)
        if literal is None:
            where = f"it resolves to {address},"
        elif host.strip("[]").removesuffix(".") == str(address):
            where = f"{address} is"
        else:
            where = f"it means {address},"
        example = host if literal is None else str(address)
        raise DestinationRefused(
            f"http.post refused {host}: {where} {reason}. Only public addresses are allowed "
            f"unless {ALLOWED_HOSTS_ENV} on the workers names the host, address or network "
            f"(e.g. {ALLOWED_HOSTS_ENV}={example})"
        )
