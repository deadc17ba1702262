"""The pure destination checks of ``http.post`` (activities/address_guard.py): no I/O."""

from __future__ import annotations

import ipaddress

import httpx
import pytest

from jobctl.activities.address_guard import (
    AllowList,
    DestinationRefused,
    check_addresses,
    check_url,
    literal_address,
    refusal_reason,
)
from jobctl.activities.registry import PermanentError

NONE = AllowList()


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "a loopback address"),
        ("127.255.0.9", "a loopback address"),
        ("10.1.2.3", "a private address"),
        ("172.16.0.1", "a private address"),
        ("192.168.1.1", "a private address"),
        ("169.254.169.254", "a link-local (cloud metadata) address"),
        ("100.64.0.1", "a shared (carrier-grade NAT) address"),
        ("0.0.0.0", "an unspecified address"),
        ("0.1.2.3", "a 'this network' address"),
        ("224.0.0.1", "a multicast address"),
        ("255.255.255.255", "a broadcast address"),
        ("240.0.0.1", "a reserved address"),
        ("192.0.2.1", "a documentation address"),
        ("198.18.0.1", "a benchmarking address"),
        ("192.0.0.9", "an IETF protocol assignment address"),
        ("::1", "a loopback address"),
        ("::", "an unspecified address"),
        ("fe80::1", "a link-local address"),
        ("fc00::1", "a private (unique local) address"),
        ("fd12:3456::1", "a private (unique local) address"),
        ("fec0::1", "a site-local (deprecated) address"),
        ("ff02::1", "a multicast address"),
        ("2001:db8::1", "a documentation address"),
        ("::7f00:1", "an IPv4-compatible (deprecated) address"),
        ("::ffff:127.0.0.1", "the IPv4-mapped form of 127.0.0.1, a loopback address"),
        ("::ffff:169.254.169.254", "the IPv4-mapped form of 169.254.169.254, a link-local"),
        ("64:ff9b::a9fe:a9fe", "the NAT64 form of 169.254.169.254, a link-local"),
        ("64:ff9b::a00:1", "the NAT64 form of 10.0.0.1, a private address"),
        ("64:ff9b:1::1", "a local-use NAT64 address"),
        ("2002:7f00:1::", "the 6to4 form of 127.0.0.1, a loopback address"),
        ("2002:a9fe:a9fe::1", "the 6to4 form of 169.254.169.254"),
        ("2001::1", "an IETF protocol assignment address"),  # Teredo
        ("4000::1", "a reserved address"),
    ],
)
def test_non_global_addresses_are_refused_with_their_class(address: str, reason: str) -> None:
    found = refusal_reason(ipaddress.ip_address(address))
    assert found is not None and found.startswith(reason)


@pytest.mark.parametrize(
    "address",
    ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808",
     "2002:808:808::1"],
)  # fmt: skip
def test_public_addresses_pass(address: str) -> None:
    assert refusal_reason(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0x7F000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("127.0.0.1.", "127.0.0.1"),
        ("::ffff:127.0.0.1", "::ffff:7f00:1"),
        ("0251.0376.0251.0376", "169.254.169.254"),
    ],
)
def test_every_ipv4_spelling_is_read_as_the_address(host: str, address: str) -> None:
    assert literal_address(host) == ipaddress.ip_address(address)


@pytest.mark.parametrize("host", ["example.com", "cafe.face", "1e100.net", "localhost"])
def test_names_are_not_addresses(host: str) -> None:
    assert literal_address(host) is None


def test_allow_list_names_addresses_and_networks() -> None:
    allow = AllowList.parse(" 127.0.0.1, LOCALHOST., 10.0.0.0/8 ,hooks.internal,[::1],fd00::/8,")
    assert allow.names == {"localhost", "hooks.internal"}
    assert allow.permits_name("Hooks.Internal.") and not allow.permits_name("internal")
    for ok in ("127.0.0.1", "::ffff:127.0.0.1", "10.200.0.1", "::1", "fd00::5"):
        assert allow.permits_address(ipaddress.ip_address(ok)), ok
    for refused in ("127.0.0.2", "11.0.0.1", "169.254.169.254", "fe80::1"):
        assert not allow.permits_address(ipaddress.ip_address(refused)), refused


@pytest.mark.parametrize("spec", ["10.0.0.0/33", "bad host", "10.0.0.0/x", "a..b", "ex%41mple"])
def test_a_malformed_allow_list_is_an_error_naming_the_variable(spec: str) -> None:
    with pytest.raises(ValueError, match="JOBS_HTTP_ALLOWED_HOSTS"):
        AllowList.parse(spec)


def test_every_resolved_address_must_be_allowed() -> None:
    public = ipaddress.ip_address("93.184.216.34")
    private = ipaddress.ip_address("10.0.0.1")
    check_addresses("ok.example", [public], NONE)
    with pytest.raises(DestinationRefused) as refused:
        check_addresses("mixed.example", [public, private], NONE)
    message = str(refused.value)
    assert "mixed.example" in message and "10.0.0.1" in message
    assert "JOBS_HTTP_ALLOWED_HOSTS=mixed.example" in message
    assert isinstance(refused.value, PermanentError)
    check_addresses("mixed.example", [public, private], AllowList.parse("10.0.0.0/8"))
    check_addresses("mixed.example", [private], AllowList.parse("mixed.example"))


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.com/", "must be an http(s) URL"),
        ("file:///etc/passwd", "must be an http(s) URL"),
        ("gopher://127.0.0.1:6379/_INFO", "must be an http(s) URL"),
        ("http:///path", "has no host"),
        ("http://user:pw@example.com/", "credentials"),
        ("http://example.com@127.0.0.1/", "credentials"),
        ("http://%31%32%37.0.0.1/", "not a valid host name"),
        ("http://ex%2fample/", "not a valid host name"),
    ],
)
def test_url_shapes_that_are_refused(url: str, message: str) -> None:
    with pytest.raises(DestinationRefused, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_url(httpx.URL(url))


def test_a_url_names_the_host_to_resolve() -> None:
    assert check_url(httpx.URL("https://Hooks.Example.COM:8443/x?y=1")) == "hooks.example.com"
    assert check_url(httpx.URL("http://[::1]:80/")) == "::1"
    assert check_url(httpx.URL("http://bücher.example/")) == "xn--bcher-kva.example"
