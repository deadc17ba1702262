"""Hostile destinations for ``http.post``: refused by default, permanent, nothing sent.

Traffic goes only to loopback servers started here. Hostile names resolve through an injected
resolver (``FakeDNS``) to private and metadata addresses, and a tripwire on the connect call
fails the test if anything ever tries to connect anywhere but a loopback IP (or connects by
name instead of to the checked address).
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from temporalio.client import Client

from jobctl.activities import http_post as guarded
from jobctl.activities.address_guard import AllowList, DestinationRefused
from jobctl.activities.builtin import http_post as http_post_handler
from jobctl.activities.registry import PermanentError
from jobctl.starter import dlq, operations
from jobctl.workflows.models import JobReport, JobStatus
from tests.helpers.poll import eventually
from tests.helpers.temporal import end_singletons, running_worker
from tests.hostile.common import normal_job_completes
from tests.hostile.http_post_support import (
    FakeDNS,
    Server,
    context,
    install_tripwire,
    redirect,
    serve,
    tls_pair,
)

ENV = "JOBS_HTTP_ALLOWED_HOSTS"


@pytest.fixture(autouse=True)
def tripwire(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    strays = install_tripwire(monkeypatch)
    yield strays
    assert strays == [], f"connections to non-loopback destinations: {strays}"


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> FakeDNS:
    fake = FakeDNS()
    monkeypatch.setattr(guarded, "RESOLVER", fake)
    monkeypatch.delenv(ENV, raising=False)
    return fake


@pytest.fixture
def server() -> Iterator[Server]:
    with serve() as running:
        yield running


# (url with {port} = the live loopback server, fragment the refusal must contain)
HOSTILE: list[tuple[str, str]] = [
    ("http://127.0.0.1:{port}/ok", "127.0.0.1 is a loopback address"),
    ("HTTP://127.0.0.1:{port}/ok", "127.0.0.1 is a loopback address"),
    ("http://127.0.0.1.:{port}/ok", "127.0.0.1 is a loopback address"),
    ("http://127.1:{port}/ok", "it means 127.0.0.1, a loopback"),
    ("http://2130706433:{port}/ok", "it means 127.0.0.1, a loopback"),
    ("http://0x7f.1:{port}/ok", "it means 127.0.0.1, a loopback"),
    ("http://0x7f000001:{port}/ok", "it means 127.0.0.1, a loopback"),
    ("http://0177.0.0.1:{port}/ok", "not a valid URL: Invalid IPv4 address"),
    ("http://0:{port}/ok", "it means 0.0.0.0, an unspecified address"),
    ("http://0.0.0.0:{port}/ok", "0.0.0.0 is an unspecified address"),
    ("http://[::1]:{port}/ok", "::1 is a loopback address"),
    ("http://[::]:{port}/ok", ":: is an unspecified address"),
    ("http://[::ffff:127.0.0.1]:{port}/ok", "IPv4-mapped form of 127.0.0.1, a loopback"),
    ("http://[::ffff:7f00:1]:{port}/ok", "IPv4-mapped form of 127.0.0.1, a loopback"),
    ("http://localhost:{port}/ok", "localhost: it resolves to 127.0.0.1, a loopback"),
    ("http://mapped.example:{port}/ok", "IPv4-mapped form of 127.0.0.1"),
    ("http://mixed.example:{port}/ok", "it resolves to 127.0.0.1, a loopback"),
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local"),
    ("https://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local"),
    ("http://0251.0376.0251.0376/latest/", "not a valid URL: Invalid IPv4 address"),
    ("http://0251.254.43518/latest/", "it means 169.254.169.254, a link-local"),
    ("http://0xa9fea9fe/latest/", "it means 169.254.169.254, a link-local"),
    ("http://2852039166/latest/", "it means 169.254.169.254, a link-local"),
    ("http://[fd00:ec2::254]/latest/meta-data/", "fd00:ec2::254 is a private"),
    ("http://metadata.google.internal/computeMetadata/v1/", "resolves to 169.254.169.254"),
    ("http://evil.example/hook", "evil.example: it resolves to 169.254.169.254, a link-local"),
    ("https://evil.example:8443/hook", "resolves to 169.254.169.254"),
    ("http://internal.example/admin", "resolves to 10.0.0.1, a private address"),
    ("http://v6.example/", "resolves to fd00::1, a private (unique local)"),
    ("http://nat64.example/", "the NAT64 form of 10.0.0.1, a private"),
    ("http://10.0.0.1/", "10.0.0.1 is a private address"),
    ("http://172.16.0.1/", "172.16.0.1 is a private address"),
    ("http://192.168.1.1/", "192.168.1.1 is a private address"),
    ("http://100.64.0.1/", "shared (carrier-grade NAT)"),
    ("http://224.0.0.1/", "224.0.0.1 is a multicast address"),
    ("http://255.255.255.255/", "a broadcast address"),
    ("http://[fe80::1]/", "fe80::1 is a link-local address"),
    ("http://[ff02::1]/", "ff02::1 is a multicast address"),
    ("http://[64:ff9b::a9fe:a9fe]/", "the NAT64 form of 169.254.169.254"),
    ("http://[2002:a9fe:a9fe::]/", "the 6to4 form of 169.254.169.254"),
    ("http://user:pw@127.0.0.1:{port}/ok", "credentials before the host"),
    ("http://evil.example@127.0.0.1:{port}/ok", "credentials before the host"),
    ("http://evil.example\\@127.0.0.1:{port}/ok", "credentials before the host"),
    ("ftp://127.0.0.1:{port}/ok", "payload.url must be an http(s) URL"),
    ("file:///etc/passwd", "payload.url must be an http(s) URL"),
    ("gopher://127.0.0.1:{port}/_INFO", "payload.url must be an http(s) URL"),
    ("//127.0.0.1:{port}/ok", "payload.url must be an http(s) URL"),
    ("javascript:alert(1)", "payload.url must be an http(s) URL"),
    ("http:///ok", "it has no host"),
    ("http://%31%32%37.0.0.1:{port}/ok", "not a valid host name"),
]


@pytest.mark.parametrize(("url", "fragment"), HOSTILE, ids=[u for u, _ in HOSTILE])
async def test_hostile_destinations_are_refused_permanently_and_nothing_is_sent(
    dns: FakeDNS, server: Server, url: str, fragment: str
) -> None:
    with pytest.raises(DestinationRefused) as refused:
        await http_post_handler(context(url.format(port=server.port)))
    assert isinstance(refused.value, PermanentError)
    assert fragment in str(refused.value)
    assert server.hits == []


@pytest.mark.parametrize("url", [None, 7, ["http://127.0.0.1/"], "", "not a url"])
async def test_a_url_that_is_not_an_http_url_string_is_permanent(dns: FakeDNS, url: Any) -> None:
    with pytest.raises(PermanentError, match=r"payload.url must be an http\(s\) URL"):
        await http_post_handler(context(url))


async def test_a_destination_refusal_names_host_address_and_variable(
    dns: FakeDNS, server: Server
) -> None:
    with pytest.raises(DestinationRefused) as refused:
        await http_post_handler(context("http://evil.example/hook"))
    assert str(refused.value) == (
        "http.post refused evil.example: it resolves to 169.254.169.254, a link-local (cloud "
        "metadata) address. Only public addresses are allowed unless JOBS_HTTP_ALLOWED_HOSTS "
        "on the workers names the host, address or network "
        "(e.g. JOBS_HTTP_ALLOWED_HOSTS=evil.example)"
    )
    assert dns.calls == ["evil.example"]


async def test_the_system_resolver_is_checked_too(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(DestinationRefused, match=r"localhost: it resolves to (127\.0\.0\.1|::1),"):
        await http_post_handler(context(f"http://localhost:{server.port}/ok"))
    assert server.hits == []


@pytest.mark.parametrize(
    ("allowed", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:{port}/ok"),
        ("127.0.0.0/8", "http://0x7f.1:{port}/ok"),
        (" 10.0.0.0/8 , 127.0.0.1 ", "http://[::ffff:127.0.0.1]:{port}/ok"),
        ("localhost", "http://localhost:{port}/ok"),  # the name: ::1 is fine too, not tried
        ("hooks.internal", "http://Hooks.Internal.:{port}/ok"),
    ],
)
async def test_the_allow_list_permits_hosts_addresses_and_networks(
    dns: FakeDNS, server: Server, monkeypatch: pytest.MonkeyPatch, allowed: str, url: str
) -> None:
    monkeypatch.setenv(ENV, allowed)
    assert await http_post_handler(context(url.format(port=server.port))) == {"status": 200}
    [hit] = server.hits
    assert (hit.path, hit.body, hit.key) == ("/ok", {"n": 1}, "key-1")
    assert hit.host == urlsplit(url.format(port=server.port)).netloc.lower()  # as written


async def test_a_malformed_allow_list_is_a_permanent_error_naming_the_variable(
    dns: FakeDNS, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "127.0.0.1,10.0.0.0/33")
    with pytest.raises(PermanentError, match=re.escape("JOBS_HTTP_ALLOWED_HOSTS: '10.0.0.0/33'")):
        await http_post_handler(context(f"http://127.0.0.1:{server.port}/ok"))
    assert server.hits == []


async def test_every_resolved_address_must_be_allowed(
    dns: FakeDNS, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "127.0.0.1")  # mixed.example also answers 10.0.0.1
    with pytest.raises(
        DestinationRefused, match=re.escape("resolves to 10.0.0.1, a private address")
    ):
        await http_post_handler(context(f"http://mixed.example:{server.port}/ok"))
    assert server.hits == []


async def test_the_checked_address_is_the_one_connected_to_despite_rebinding(
    dns: FakeDNS, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rebind.example answers 127.0.0.1 once, then 10.0.0.1: one lookup, pinned connect."""
    monkeypatch.setenv(ENV, "127.0.0.1")
    url = f"http://rebind.example:{server.port}/ok"
    assert await http_post_handler(context(url)) == {"status": 200}
    assert dns.calls == ["rebind.example"]
    [hit] = server.hits
    assert hit.host == f"rebind.example:{server.port}"
    # A second job resolves again and gets the private answer: refused, nothing sent.
    with pytest.raises(DestinationRefused, match=re.escape("resolves to 10.0.0.1")):
        await http_post_handler(context(url))
    assert len(server.hits) == 1


@pytest.mark.parametrize(
    ("target", "fragment"),
    [
        ("http://internal.example/admin", "internal.example: it resolves to 10.0.0.1"),
        ("https://evil.example/latest/meta-data/", "it resolves to 169.254.169.254"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local"),
        ("http://[::ffff:10.0.0.1]/", "IPv4-mapped form of 10.0.0.1"),
        ("http://user@internal.example/", "credentials before the host"),
        ("file:///etc/passwd", "payload.url must be an http(s) URL"),
    ],
)
@pytest.mark.parametrize("code", [307, 308])
async def test_a_redirect_from_an_allowed_server_to_a_refused_address_is_refused(
    dns: FakeDNS,
    server: Server,
    monkeypatch: pytest.MonkeyPatch,
    target: str,
    fragment: str,
    code: int,
) -> None:
    monkeypatch.setenv(ENV, "127.0.0.1")
    with pytest.raises(DestinationRefused) as refused:
        await http_post_handler(context(redirect(server, target, code)))
    assert fragment in str(refused.value)
    assert str(refused.value).endswith(f"(after a redirect from 127.0.0.1:{server.port})")
    assert [hit.path.split("?")[0] for hit in server.hits] == ["/to"]  # only the allowed hop


async def test_307_and_308_are_followed_with_the_body_and_each_hop_is_checked(
    dns: FakeDNS, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "127.0.0.1,hooks.internal")
    final = f"http://hooks.internal:{server.port}/ok"
    url = redirect(server, redirect(server, final, 308), 307)
    assert await http_post_handler(context(url)) == {"status": 200}
    assert [(h.body, h.key) for h in server.hits] == [({"n": 1}, "key-1")] * 3
    assert server.hits[-1].host == f"hooks.internal:{server.port}"


async def test_other_redirects_are_not_followed_and_fail_as_before(
    dns: FakeDNS, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "127.0.0.1")
    with pytest.raises(httpx.HTTPStatusError, match="answered 302"):
        await http_post_handler(context(redirect(server, "http://internal.example/", 302)))
    assert len(server.hits) == 1


async def test_a_redirect_loop_stops_after_five_hops(
    dns: FakeDNS, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "127.0.0.1")
    url = f"{server.url}/ok"
    for _ in range(6):
        url = redirect(server, url)
    with pytest.raises(PermanentError, match="redirected more than 5 times"):
        await http_post_handler(context(url))
    assert len(server.hits) == 6


async def test_https_keeps_the_name_for_sni_and_the_certificate_check(
    dns: FakeDNS, tmp_path: Path
) -> None:
    server_ctx, client_ctx = tls_pair("hooks.internal", tmp_path)
    allow = AllowList.parse("hooks.internal")
    with serve(tls=server_ctx) as tls_server:
        url = f"https://hooks.internal:{tls_server.port}/ok"
        response = await guarded.post(url, {"n": 1}, {}, 5, allow=allow, verify=client_ctx)
        assert response.status_code == 200
        assert tls_server.sni == ["hooks.internal"]
        assert tls_server.hits[0].host == f"hooks.internal:{tls_server.port}"
        # The same server by address: its certificate does not name 127.0.0.1.
        by_address = f"https://127.0.0.1:{tls_server.port}/ok"
        with pytest.raises(httpx.ConnectError, match="certificate"):
            await guarded.post(
                by_address, {}, {}, 5, allow=AllowList.parse("127.0.0.1"), verify=client_ctx
            )
    assert len(tls_server.hits) == 1


# End to end: refused jobs on the dev server, through a real in-process worker.


async def wait_parked(client: Client, job_id: str, timeout: float = 60) -> JobReport:
    """Until the job is dead and the dead-letter queue's index holds it (it is signalled)."""

    async def look() -> tuple[JobReport, set[str]]:
        report = await operations.status(client, job_id)
        assert isinstance(report, JobReport)
        return report, {entry.job_id for entry in await dlq.recent_entries(client)}

    report, _ = await eventually(
        look,
        lambda seen: seen[0].status == JobStatus.DEAD and job_id in seen[1],
        timeout=timeout,
        what=f"{job_id} parked",
    )
    return report


@pytest.fixture
async def devserver_worker(dev_client: Client, task_queue: str) -> AsyncIterator[Client]:
    try:
        async with running_worker(dev_client, task_queue):
            yield dev_client
    finally:
        await end_singletons(dev_client)


async def schedule_post(client: Client, task_queue: str, url: str) -> str:
    job_id = f"hostile-post-{uuid.uuid4().hex[:8]}"
    spec = {
        "id": job_id,
        "name": "hostile post",
        "handler": "http.post",
        "payload": {"url": url, "json": {"n": 1}},
        "delay": 0,
        "max_attempts": 5,
        "backoff_base": 1.0,
    }
    await operations.schedule(client, spec, handlers={"http.post"}, task_queue=task_queue)
    return job_id


@pytest.mark.devserver
@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("http://127.0.0.1:{port}/ok", "127.0.0.1 is a loopback address"),
        ("http://0x7f.1:{port}/ok", "0x7f.1: it means 127.0.0.1, a loopback address"),
        ("http://[::ffff:127.0.0.1]:{port}/ok", "IPv4-mapped form of 127.0.0.1"),
        ("http://evil.example/hook", "evil.example: it resolves to 169.254.169.254"),
        ("http://internal.example/", "internal.example: it resolves to 10.0.0.1"),
        ("http://user:pw@127.0.0.1:{port}/ok", "credentials before the host"),
        ("redirect:http://internal.example/", "internal.example: it resolves to 10.0.0.1"),
    ],
)
async def test_a_refused_job_is_dead_after_one_attempt_and_a_normal_job_still_runs(
    dns: FakeDNS,
    server: Server,
    devserver_worker: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    fragment: str,
) -> None:
    client = devserver_worker
    if url.startswith("redirect:"):
        monkeypatch.setenv(ENV, "127.0.0.1")  # the first hop is allowed, its target is not
        url = redirect(server, url.removeprefix("redirect:"))
    job_id = await schedule_post(client, task_queue, url.format(port=server.port))
    report = await wait_parked(client, job_id)
    [attempt] = report.attempts  # permanent: no retry although 5 attempts were allowed
    assert attempt.error_type == "DestinationRefused"
    assert attempt.error is not None and fragment in attempt.error
    assert report.last_error is not None and fragment in report.last_error
    assert [hit.path.split("?")[0] for hit in server.hits] == (["/to"] if "/to?" in url else [])
    await normal_job_completes(client, task_queue)


@pytest.mark.devserver
async def test_an_allowed_loopback_job_is_done(
    dns: FakeDNS,
    server: Server,
    devserver_worker: Client,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV, "127.0.0.1")
    job_id = await schedule_post(devserver_worker, task_queue, f"{server.url}/ok")
    deadline = time.monotonic() + 60
    while (report := await operations.status(devserver_worker, job_id)).status != JobStatus.DONE:
        assert time.monotonic() < deadline, f"{job_id} not done: {report}"
        await asyncio.sleep(0.2)
    assert isinstance(report, JobReport) and report.result == {"status": 200}
    assert [(hit.path, hit.key) for hit in server.hits] == [("/ok", job_id)]
