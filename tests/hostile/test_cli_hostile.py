"""Hostile specs and control arguments through the ``jobs`` CLI (a subprocess per case): exit
2 with one ``error: <field>: <reason>`` line, nothing on stdout, nothing started; a used id
exits 0 for the identical request and 4 for a different one; a normal job still runs."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client

from jobctl.starter.dev.devserver import DevServer
from jobctl.workflows.models import MAX_PAYLOAD_DEPTH
from tests.helpers.processes import cli_env, jobs
from tests.helpers.temporal import end_singletons, running_worker
from tests.hostile.common import assert_nothing_started, normal_job_completes, started_count

pytestmark = pytest.mark.devserver

QUEUE = f"hostile-cli-{uuid.uuid4().hex[:8]}"
DEEP_FILE = "@DEEP"  # replaced by a file: 100,000 levels exceed one argv argument (128 KiB)


@pytest.fixture(scope="module")
async def env(dev_server: DevServer, dev_client: Client) -> AsyncIterator[dict[str, str]]:
    yield cli_env(dev_server.address, QUEUE)
    await end_singletons(dev_client)


async def refused(
    client: Client, env: dict[str, str], args: list[str], field: str, reason: str
) -> None:
    """Exit 2, one line naming ``field`` with ``reason``, no output, nothing started."""
    before = await started_count(client, QUEUE)
    result = await asyncio.to_thread(jobs, env, *args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (args, result.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: "), lines
    assert reason in lines[0], lines
    assert result.stdout == ""
    await assert_nothing_started(client, before, QUEUE)


def deep_json(depth: int) -> str:
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


SCHEDULE = [
    # (case, flags, field, reason)
    ("at year 1", ["--at", "0001-01-01T00:00:00Z"], "run_at", "not be before 1970"),
    ("at year 9999", ["--at", "9999-06-01T00:00:00Z"], "run_at", "at most 10 years ahead"),
    ("at Unix time", ["--at", "1900000000"], "run_at", "ISO-8601"),
    ("at a date only", ["--at", "2030-01-01"], "run_at", "timezone offset"),
    ("max attempts true", ["--in", "1m", "--max-attempts", "true"], "max_attempts", "integer"),
    ("max attempts 2.0", ["--in", "1m", "--max-attempts", "2.0"], "max_attempts", "integer"),
    ("jitter nan", ["--in", "1m", "--jitter", "nan"], "jitter", "finite"),
    ("backoff base 0.5", ["--in", "1m", "--backoff-base", "0.5"], "backoff_base", "at least 1s"),
    ("backoff base 500ms", ["--in", "1m", "--backoff-base", "500ms"], "backoff_base", "least 1s"),
    ("in nan", ["--in", "nan"], "delay", "finite"),
    ("payload NaN", ["--in", "1m", "--payload", '{"x": NaN}'], "payload", "NaN"),
    ("payload 1e400", ["--in", "1m", "--payload", '{"x": 1e400}'], "payload", "1e400"),
    ("payload Infinity", ["--in", "1m", "--payload", '{"x": -Infinity}'], "payload", "Infinity"),
    ("payload duplicate key", ["--in", "1m", "--payload", '{"a":1,"a":2}'], "payload", "twice"),
    (
        "payload too deep",
        ["--in", "1m", "--payload", deep_json(MAX_PAYLOAD_DEPTH + 1)],
        "payload",
        "nested more",
    ),
    ("payload 100000 deep", ["--in", "1m", "--payload", DEEP_FILE], "payload", "nested deeper"),
    ("payload surrogate", ["--in", "1m", "--payload", '{"x": "\\ud800"}'], "payload", "surrogate"),
    ("id of the DLQ", ["--in", "1m", "--id", "dead-letter-queue"], "id", "reserved for the system"),
    (
        "cron id of the registry",
        ["--cron", "0 3 * * *", "--id", "handler-registry"],
        "id",
        "reserved for the system",
    ),
    # argv bytes that are not UTF-8 reach Python as lone surrogates (surrogateescape)
    ("name not UTF-8", ["--in", "1m", "--name-bytes"], "name", "unicode"),
]


@pytest.mark.parametrize(
    ("flags", "field", "reason"), [s[1:] for s in SCHEDULE], ids=[s[0] for s in SCHEDULE]
)
async def test_schedule_refuses_hostile_flags(
    dev_client: Client,
    env: dict[str, str],
    tmp_path: Path,
    flags: list[str],
    field: str,
    reason: str,
) -> None:
    deep = tmp_path / "deep.json"
    if DEEP_FILE in flags:
        deep.write_text('{"a":' + "[" * 100_000 + "]" * 100_000 + "}")
    name = "hostile"
    if "--name-bytes" in flags:
        flags = [f for f in flags if f != "--name-bytes"]
        name = "bad \udcff name"
    args = ["schedule", name, "--handler", "log"]
    args += [f"@{deep}" if flag == DEEP_FILE else flag for flag in flags]
    await refused(dev_client, env, args, field, reason)


CONTROLS = [
    ("status of the DLQ", ["status", "dead-letter-queue"], "job_id", "reserved for the system"),
    ("cancel the DLQ", ["cancel", "dead-letter-queue"], "job_id", "reserved for the system"),
    ("cancel the registry", ["cancel", "handler-registry"], "job_id", "reserved for the system"),
    ("pause the registry", ["pause", "handler-registry"], "job_id", "reserved for the system"),
    ("trigger the DLQ", ["trigger", "dead-letter-queue"], "job_id", "reserved for the system"),
    ("requeue the DLQ", ["dlq", "requeue", "dead-letter-queue"], "job_id", "reserved"),
    ("pause until year 1", ["pause", "p", "--until", "0001-01-01T00:00:00Z"], "until", "1970"),
    ("pause until Unix time", ["pause", "p", "--until", "1900000000"], "until", "ISO-8601"),
    (
        "preview after year 9999",
        ["cron", "preview", "* * * * *", "--after", "9999-06-01T00:00:00Z"],
        "after",
        "at most 10 years ahead",
    ),
    (
        "preview after Unix time",
        ["cron", "preview", "* * * * *", "--after", "1900000000"],
        "after",
        "ISO-8601",
    ),
]


@pytest.mark.parametrize(
    ("args", "field", "reason"), [c[1:] for c in CONTROLS], ids=[c[0] for c in CONTROLS]
)
async def test_controls_refuse_reserved_ids_and_dates_out_of_range(
    dev_client: Client, env: dict[str, str], args: list[str], field: str, reason: str
) -> None:
    await refused(dev_client, env, args, field, reason)


async def test_a_used_id_is_fine_for_the_identical_request_and_exits_4_otherwise(
    dev_client: Client, env: dict[str, str]
) -> None:
    job_id = f"used-{uuid.uuid4().hex[:8]}"
    args = ["schedule", "p", "--handler", "log", "--in", "1h", "--id", job_id]
    first = await asyncio.to_thread(jobs, env, *args)
    assert first.returncode == 0 and first.stdout.startswith(f"scheduled {job_id}:"), first
    before = await started_count(dev_client, QUEUE)
    again = await asyncio.to_thread(jobs, env, *args)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"already scheduled (identical request) {job_id}:")
    as_json = json.loads((await asyncio.to_thread(jobs, env, *args, "--json")).stdout)
    assert as_json["job_id"] == job_id and as_json["created"] is False
    other = await asyncio.to_thread(jobs, env, *args[:-2], "--max-attempts", "3", "--id", job_id)
    assert other.returncode == 4 and other.stdout == ""
    assert other.stderr.strip() == f"error: a job with id {job_id!r} already exists"
    await assert_nothing_started(dev_client, before, QUEUE)


async def test_a_normal_job_still_runs_afterwards(dev_client: Client, env: dict[str, str]) -> None:
    async with running_worker(dev_client, QUEUE):
        await normal_job_completes(dev_client, QUEUE)
