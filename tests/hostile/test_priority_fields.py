"""Hostile priority, fairness, concurrency and rate fields at each door: the Python client
(``JobsClient.schedule``: SpecError naming the field), the API (``POST /jobs``: 422
``invalid`` naming the field) and the CLI (``jobctl schedule``: exit 2, one ``error: <field>:``
line). Each case asserts the answer and that nothing started; the module ends with a normal
job, and a job with valid priority and fairness fields, that still run."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from jobctl.starter.api import create_app
from jobctl.starter.api.guards import LOOPBACK_HOSTS
from jobctl.starter.dev.devserver import DevServer
from jobctl.starter.errors import SpecError
from jobctl.starter.jobsclient import JobsClient
from tests.helpers.processes import cli_env, jobs
from tests.helpers.temporal import end_singletons, running_worker
from tests.hostile.common import assert_nothing_started, normal_job_completes, started_count

pytestmark = pytest.mark.devserver

QUEUE = f"hostile-priority-{uuid.uuid4().hex[:8]}"
JSON = {"Content-Type": "application/json"}
BOTH = "concurrency_key, concurrency_limit"
RATE_BOTH = "rate_key, rate"
NOT_A_RATE = "is not a rate"
TOGETHER = "go together"

# (case, fields, field named, reason) for the client and the API (JSON values).
FIELDS: list[tuple[str, dict[str, Any], str, str]] = [
    ("priority 0", {"priority": 0}, "priority", "greater than or equal to 1"),
    ("priority 6", {"priority": 6}, "priority", "less than or equal to 5"),
    ("priority -1", {"priority": -1}, "priority", "greater than or equal to 1"),
    ("priority 10**30", {"priority": 10**30}, "priority", "less than or equal to 5"),
    ("priority 2.5", {"priority": 2.5}, "priority", "valid integer"),
    ("priority true", {"priority": True}, "priority", "valid integer"),
    ("priority as text", {"priority": "1"}, "priority", "valid integer"),
    ("fairness key empty", {"fairness_key": ""}, "fairness_key", "at least 1 character"),
    ("fairness key 65 chars", {"fairness_key": "x" * 65}, "fairness_key", "at most 64"),
    ("fairness key 66 bytes", {"fairness_key": "€" * 22}, "fairness_key", "64 bytes"),
    ("fairness key newline", {"fairness_key": "a\nb"}, "fairness_key", "printable"),
    ("fairness key number", {"fairness_key": 5}, "fairness_key", "valid string"),
    ("weight 0", {"fairness_key": "t", "fairness_weight": 0}, "fairness_weight", "0.001"),
    ("weight -1", {"fairness_key": "t", "fairness_weight": -1}, "fairness_weight", "0.001"),
    ("weight 1001", {"fairness_key": "t", "fairness_weight": 1001}, "fairness_weight", "1000"),
    ("weight text", {"fairness_key": "t", "fairness_weight": "x"}, "fairness_weight", "number"),
    ("weight true", {"fairness_key": "t", "fairness_weight": True}, "fairness_weight", "number"),
    ("weight without key", {"fairness_weight": 2}, "fairness_weight", "needs a fairness_key"),
    ("concurrency key alone", {"concurrency_key": "k"}, BOTH, TOGETHER),
    ("concurrency limit alone", {"concurrency_limit": 3}, BOTH, TOGETHER),
    (
        "concurrency limit 0",
        {"concurrency_key": "k", "concurrency_limit": 0},
        "concurrency_limit",
        "greater than or equal to 1",
    ),
    (
        "concurrency limit 1001",
        {"concurrency_key": "k", "concurrency_limit": 1001},
        "concurrency_limit",
        "less than or equal to 1000",
    ),
    (
        "concurrency limit 2.5",
        {"concurrency_key": "k", "concurrency_limit": 2.5},
        "concurrency_limit",
        "valid integer",
    ),
    (
        "concurrency key empty",
        {"concurrency_key": "", "concurrency_limit": 1},
        "concurrency_key",
        "at least 1 character",
    ),
    (
        "concurrency key 201 chars",
        {"concurrency_key": "k" * 201, "concurrency_limit": 1},
        "concurrency_key",
        "at most 200",
    ),
    (
        "concurrency key NUL",
        {"concurrency_key": "a\x00b", "concurrency_limit": 1},
        "concurrency_key",
        "printable",
    ),
    ("rate alone", {"rate": "10/s"}, RATE_BOTH, TOGETHER),
    ("rate key alone", {"rate_key": "k"}, RATE_BOTH, TOGETHER),
    ("rate burst alone", {"rate_burst": 3}, "rate_burst", "needs a rate_key"),
    ("rate 0/s", {"rate_key": "k", "rate": "0/s"}, "rate", NOT_A_RATE),
    ("rate -1/s", {"rate_key": "k", "rate": "-1/s"}, "rate", NOT_A_RATE),
    ("rate 1e309/s", {"rate_key": "k", "rate": "1e309/s"}, "rate", NOT_A_RATE),
    ("rate 10/fortnight", {"rate_key": "k", "rate": "10/fortnight"}, "rate", NOT_A_RATE),
    ("rate 1000/s", {"rate_key": "k", "rate": "1000/s"}, "rate", "the most one key can pace"),
    ("rate true", {"rate_key": "k", "rate": True}, "rate", "valid string"),
    ("rate list", {"rate_key": "k", "rate": ["10/s"]}, "rate", "valid string"),
    ("rate number", {"rate_key": "k", "rate": 10}, "rate", "valid string"),
    ("rate key 201 chars", {"rate_key": "k" * 201, "rate": "1/s"}, "rate_key", "at most 200"),
    ("rate key tab", {"rate_key": "a\tb", "rate": "1/s"}, "rate_key", "printable"),
    ("burst 0", {"rate_key": "k", "rate": "1/s", "rate_burst": 0}, "rate_burst", "1"),
    ("burst true", {"rate_key": "k", "rate": "1/s", "rate_burst": True}, "rate_burst", "integer"),
]
# JSON null is a value at the API; the client takes None as "not given" (the default).
API_ONLY: list[tuple[str, dict[str, Any], str, str]] = [
    ("priority null", {"priority": None}, "priority", "valid integer"),
    ("weight null", {"fairness_key": "t", "fairness_weight": None}, "fairness_weight", "number"),
]
# Only the client can pass these (JSON has no lone surrogate or non-finite number).
CLIENT_ONLY: list[tuple[str, dict[str, Any], str, str]] = [
    ("fairness key lone surrogate", {"fairness_key": "\ud800"}, "fairness_key", "string"),
    (
        "weight nan",
        {"fairness_key": "t", "fairness_weight": float("nan")},
        "fairness_weight",
        "finite",
    ),
    (
        "weight inf",
        {"fairness_key": "t", "fairness_weight": float("inf")},
        "fairness_weight",
        "finite",
    ),
]
# (case, flags, field named, reason) for `jobctl schedule`.
FLAGS: list[tuple[str, list[str], str, str]] = [
    ("priority 0", ["--priority", "0"], "priority", "greater than or equal to 1"),
    ("priority 6", ["--priority", "6"], "priority", "less than or equal to 5"),
    ("priority 2.5", ["--priority", "2.5"], "priority", "valid integer"),
    ("priority high", ["--priority", "high"], "priority", "valid integer"),
    ("priority empty", ["--priority", ""], "priority", "valid integer"),
    ("fairness key empty", ["--fairness-key", ""], "fairness_key", "at least 1 character"),
    ("fairness key 65 chars", ["--fairness-key", "x" * 65], "fairness_key", "at most 64"),
    ("fairness key tab", ["--fairness-key", "a\tb"], "fairness_key", "printable"),
    ("weight 0", ["--fairness-key", "t", "--fairness-weight", "0"], "fairness_weight", "0.001"),
    (
        "weight nan",
        ["--fairness-key", "t", "--fairness-weight", "nan"],
        "fairness_weight",
        "finite",
    ),
    (
        "weight inf",
        ["--fairness-key", "t", "--fairness-weight", "inf"],
        "fairness_weight",
        "finite",
    ),
    ("weight without key", ["--fairness-weight", "2"], "fairness_weight", "needs a fairness_key"),
    ("concurrency key alone", ["--concurrency-key", "k"], BOTH, TOGETHER),
    ("concurrency limit alone", ["--concurrency-limit", "3"], BOTH, TOGETHER),
    (
        "concurrency limit 0",
        ["--concurrency-key", "k", "--concurrency-limit", "0"],
        "concurrency_limit",
        "greater than or equal to 1",
    ),
    (
        "concurrency limit many",
        ["--concurrency-key", "k", "--concurrency-limit", "many"],
        "concurrency_limit",
        "valid integer",
    ),
    ("rate alone", ["--rate", "10/s"], RATE_BOTH, TOGETHER),
    ("rate 0/s", ["--rate-key", "k", "--rate", "0/s"], "rate", NOT_A_RATE),
    ("rate 1e309/s", ["--rate-key", "k", "--rate", "1e309/s"], "rate", NOT_A_RATE),
    ("rate fortnight", ["--rate-key", "k", "--rate", "10/fortnight"], "rate", NOT_A_RATE),
    (
        "burst many",
        ["--rate-key", "k", "--rate", "1/s", "--rate-burst", "x"],
        "rate_burst",
        "integer",
    ),
]


@dataclass
class Env:
    client: Client
    jobs: JobsClient
    http: httpx.AsyncClient
    cli: dict[str, str]


@pytest.fixture(scope="module")
async def env(dev_server: DevServer, dev_client: Client) -> AsyncIterator[Env]:
    app = create_app(
        token="", client=dev_client, task_queue=QUEUE, allowed_hosts=list(LOOPBACK_HOSTS)
    )
    transport = httpx.ASGITransport(app=app)
    async with (
        running_worker(dev_client, QUEUE, publish=True),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http,
    ):
        client = JobsClient(dev_client, task_queue=QUEUE)
        yield Env(dev_client, client, http, cli_env(dev_server.address, QUEUE))
    await end_singletons(dev_client)


def named(problems: list[tuple[str, str]], field: str, reason: str) -> bool:
    return any(f == field and reason in r for f, r in problems)


@pytest.mark.parametrize(
    ("fields", "field", "reason"),
    [c[1:] for c in FIELDS + CLIENT_ONLY],
    ids=[c[0] for c in FIELDS + CLIENT_ONLY],
)
async def test_the_client_refuses(
    env: Env, fields: dict[str, Any], field: str, reason: str
) -> None:
    before = await started_count(env.client, QUEUE)
    with pytest.raises(SpecError) as err:
        await env.jobs.schedule("hostile", handler="log", in_=60, **fields)
    assert named(err.value.problems, field, reason), err.value.problems
    await assert_nothing_started(env.client, before, QUEUE)


@pytest.mark.parametrize(
    ("fields", "field", "reason"),
    [c[1:] for c in FIELDS + API_ONLY],
    ids=[c[0] for c in FIELDS + API_ONLY],
)
async def test_the_api_refuses_with_422(
    env: Env, fields: dict[str, Any], field: str, reason: str
) -> None:
    before = await started_count(env.client, QUEUE)
    body = {"name": "hostile", "handler": "log", "delay": 0, **fields}
    answer = await env.http.post("/jobs", content=json.dumps(body), headers=JSON)
    assert answer.status_code == 422, answer.text
    shape = answer.json()
    assert set(shape) == {"error", "detail"} and shape["error"] == "invalid", shape
    problems = [(p["field"], p["reason"]) for p in shape["detail"]]
    assert named(problems, field, reason), problems
    await assert_nothing_started(env.client, before, QUEUE)


@pytest.mark.parametrize(
    ("flags", "field", "reason"), [c[1:] for c in FLAGS], ids=[c[0] for c in FLAGS]
)
async def test_the_cli_exits_2(env: Env, flags: list[str], field: str, reason: str) -> None:
    before = await started_count(env.client, QUEUE)
    args = ["schedule", "hostile", "--handler", "log", "--in", "1m", *flags]
    result = await asyncio.to_thread(jobs, env.cli, *args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (flags, result.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: "), lines
    assert reason in lines[0], lines
    assert result.stdout == ""
    await assert_nothing_started(env.client, before, QUEUE)


async def test_normal_jobs_still_run_afterwards(env: Env) -> None:
    """A plain job, and one with every priority and fairness field set, both run."""
    await normal_job_completes(env.client, QUEUE)
    handle = await env.jobs.schedule(
        "valid", handler="log", in_=0, priority=1, fairness_key="t", fairness_weight=2.5
    )
    assert (await handle.result(timeout=30)).status == "done"
