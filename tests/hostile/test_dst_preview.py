"""Hostile DST policies on the cron preview: ``jobctl cron preview --dst-gap/--dst-repeat``
(a subprocess per case) and ``GET /cron/preview?dst_gap=&dst_repeat=`` (in process against
the session's dev server). Each case: the CLI exits 2 with one ``error: <field>: <reason>``
line and nothing on stdout, the API answers 422 ``{"error": "invalid", "detail"}`` naming the
field; nothing started. The module ends with a normal job still running (fixture teardown).

The spec's own ``dst_gap``/``dst_repeat`` (``jobctl schedule``, ``POST /jobs``) are judged by
the same types; the preview takes them as strings so both doors give the spec's messages.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlencode

import httpx
import pytest
from temporalio.client import Client

from jobctl.starter.api import create_app
from jobctl.starter.api.errors import ErrorBody
from jobctl.starter.api.guards import LOOPBACK_HOSTS
from jobctl.starter.dev.devserver import DevServer
from tests.helpers.processes import cli_env, jobs
from tests.helpers.temporal import end_singletons, running_worker
from tests.hostile.common import assert_nothing_started, normal_job_completes, started_count

pytestmark = pytest.mark.devserver

QUEUE = f"hostile-dst-{uuid.uuid4().hex[:8]}"
OWN = "http://127.0.0.1:8000"
GAP_ONLY = "30 2 * 3 0#2"  # 02:30 on March's second Sunday: always in New York's gap
GAP_REASON = "Input should be 'shift' or 'skip'"
REPEAT_REASON = "Input should be 'first', 'last' or 'both'"

# (case, expression, dst_gap, dst_repeat, field, reason); None: the option is not given.
CASES = [
    ("gap never", "30 2 * * *", "never", None, "dst_gap", GAP_REASON),
    ("gap upper case", "30 2 * * *", "SKIP", None, "dst_gap", GAP_REASON),
    ("gap empty", "30 2 * * *", "", None, "dst_gap", GAP_REASON),
    ("gap with a space", "30 2 * * *", "skip ", None, "dst_gap", GAP_REASON),
    ("gap control character", "30 2 * * *", "sk\x01ip", None, "dst_gap", GAP_REASON),
    ("repeat twice", "30 1 * * *", "shift", "twice", "dst_repeat", REPEAT_REASON),
    ("repeat none spelled", "30 1 * * *", "shift", "none", "dst_repeat", REPEAT_REASON),
    ("repeat null spelled", "30 1 * * *", "shift", "null", "dst_repeat", REPEAT_REASON),
    ("repeat empty", "30 1 * * *", "shift", "", "dst_repeat", REPEAT_REASON),
    ("repeat number", "30 1 * * *", "shift", "2", "dst_repeat", REPEAT_REASON),
    ("every time in a gap, skipped", GAP_ONLY, "skip", None, "dst_gap", "falls in a DST gap"),
    ("same, any repeat", GAP_ONLY, "skip", "last", "dst_gap", "falls in a DST gap"),
]


@pytest.fixture(scope="module")
async def env(dev_server: DevServer, dev_client: Client) -> AsyncIterator[dict[str, str]]:
    yield cli_env(dev_server.address, QUEUE)
    async with running_worker(dev_client, QUEUE):
        await normal_job_completes(dev_client, QUEUE)
    await end_singletons(dev_client)


@pytest.fixture(scope="module")
async def http(env: dict[str, str], dev_client: Client) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(
        token="", client=dev_client, task_queue=QUEUE, allowed_hosts=list(LOOPBACK_HOSTS)
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=OWN, timeout=30) as client:
        yield client


@pytest.mark.parametrize(
    ("expression", "gap", "repeat", "field", "reason"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
async def test_cli_preview_refuses(
    dev_client: Client,
    env: dict[str, str],
    expression: str,
    gap: str,
    repeat: str | None,
    field: str,
    reason: str,
) -> None:
    args = ["cron", "preview", expression, "--tz", "America/New_York", "--dst-gap", gap]
    args += [] if repeat is None else ["--dst-repeat", repeat]
    before = await started_count(dev_client, QUEUE)
    result = await asyncio.to_thread(jobs, env, *args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (args, result.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: "), lines
    assert reason in lines[0], lines
    assert result.stdout == ""
    await assert_nothing_started(dev_client, before, QUEUE)


@pytest.mark.parametrize(
    ("expression", "gap", "repeat", "field", "reason"),
    [case[1:] for case in CASES]
    + [("30 2 * * *", "s" * 17, None, "dst_gap", "at most 16 characters")],
    ids=[case[0] for case in CASES] + ["gap too long"],
)
async def test_api_preview_refuses(
    dev_client: Client,
    http: httpx.AsyncClient,
    expression: str,
    gap: str,
    repeat: str | None,
    field: str,
    reason: str,
) -> None:
    query = {"expr": expression, "tz": "America/New_York", "dst_gap": gap}
    query |= {} if repeat is None else {"dst_repeat": repeat}
    before = await started_count(dev_client, QUEUE)
    answer = await http.get(f"/cron/preview?{urlencode(query)}")
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert set(body) == {"error", "detail"} and body["error"] == "invalid", body
    ErrorBody.model_validate(body)
    assert any(field in p["field"] and reason in p["reason"] for p in body["detail"]), body
    await assert_nothing_started(dev_client, before, QUEUE)


async def test_the_api_preview_takes_a_good_policy(http: httpx.AsyncClient) -> None:
    query = {"expr": "30 1 * * *", "tz": "America/New_York", "after": "2025-11-01T12:00:00Z"}
    query |= {"n": "1", "dst_gap": "skip", "dst_repeat": "last"}
    answer = await http.get(f"/cron/preview?{urlencode(query)}")
    assert answer.status_code == 200, answer.text
    assert answer.json() == [{"local": "2025-11-02T01:30:00-05:00", "utc": "2025-11-02T06:30:00Z"}]
