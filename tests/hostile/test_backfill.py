"""Hostile backfills of a cron through every door: the Python client (``JobHandle.backfill``),
the ``jobctl cron backfill`` CLI (a subprocess per case), ``POST /cron/{id}/backfill`` and the
workflow's ``backfill`` update sent directly (bypassing every client-side check).

Each case asserts the answer (SpecError field and reason / exit code and one error line / HTTP
status and ``{"error", "detail"}`` / the update's refusal), that nothing started and that the
target cron queued nothing (no ``backfill`` in its audit trail, no backfilled slot). The module
ends with a normal job that still runs and a legitimate backfill that still works.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowUpdateFailedError

from jobctl.starter import operations
from jobctl.starter.api import create_app
from jobctl.starter.api.errors import ErrorBody
from jobctl.starter.api.guards import LOOPBACK_HOSTS
from jobctl.starter.dev.devserver import DevServer
from jobctl.starter.errors import InvalidTransition, JobNotFound, JobsError, SpecError
from jobctl.starter.jobsclient import JobsClient
from jobctl.workflows import names
from jobctl.workflows.cron_rules import MAX_BACKFILL_SLOTS
from jobctl.workflows.models import CronReport
from tests.helpers.cron import report as cron_report
from tests.helpers.poll import eventually
from tests.helpers.processes import cli_env, jobs
from tests.helpers.temporal import end_singletons, running_worker
from tests.hostile.common import assert_nothing_started, normal_job_completes, started_count

pytestmark = pytest.mark.devserver

QUEUE = f"hostile-backfill-{uuid.uuid4().hex[:8]}"
OWN = "http://127.0.0.1:8000"
JSON = {"Content-Type": "application/json"}
HOUR_TOP = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
PAST = (HOUR_TOP - timedelta(hours=3)).isoformat()
LATER_PAST = (HOUR_TOP - timedelta(hours=1)).isoformat()
FUTURE = (datetime.now(UTC) + timedelta(days=1)).isoformat()
TOO_MANY_FROM = (HOUR_TOP - timedelta(hours=MAX_BACKFILL_SLOTS)).isoformat()  # one too many
CAP = f"more than {MAX_BACKFILL_SLOTS:,} slots"
ELEVEN_YEARS = (datetime.now(UTC) + timedelta(days=11 * 366)).isoformat()


@dataclass
class Env:
    client: Client
    http: httpx.AsyncClient
    cli: dict[str, str]
    cron_id: str  # hourly; no refused backfill may queue anything in it
    job_id: str  # a one-shot waiting an hour: not a cron


@pytest.fixture(scope="module")
async def env(dev_server: DevServer, dev_client: Client) -> AsyncIterator[Env]:
    cron_id, job_id = f"bf-cron-{uuid.uuid4().hex[:8]}", f"bf-job-{uuid.uuid4().hex[:8]}"
    async with running_worker(dev_client, QUEUE, publish=True):
        for data in (
            {"id": cron_id, "name": "target cron", "handler": "log", "cron": "0 * * * *"},
            {"id": job_id, "name": "target job", "handler": "log", "delay": "1h"},
        ):
            await operations.schedule(dev_client, data, handlers={"log"}, task_queue=QUEUE)
        app = create_app(
            token="", client=dev_client, task_queue=QUEUE, allowed_hosts=list(LOOPBACK_HOSTS)
        )
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=OWN, timeout=30) as http:
            yield Env(dev_client, http, cli_env(dev_server.address, QUEUE), cron_id, job_id)
        # After every family: a normal job still runs, and a real backfill still works.
        await normal_job_completes(dev_client, QUEUE)
        await legitimate_backfill_works(dev_client, cron_id)
        for target in (job_id, cron_id):
            await operations.cancel(dev_client, target, None)
    await end_singletons(dev_client)


async def legitimate_backfill_works(client: Client, cron_id: str) -> None:
    answer = await operations.backfill(client, cron_id, PAST, LATER_PAST)
    assert answer.slots == 3

    await eventually(
        lambda: cron_report(client, cron_id),
        lambda report: report.counts.get("backfilled") == 3 and not report.running,
        what="the legitimate backfill ran",
    )


async def untouched(env: Env) -> None:
    """Nothing queued in the target cron: no backfill in its trail, no backfilled slot."""
    report = await operations.status(env.client, env.cron_id)
    assert isinstance(report, CronReport)
    assert not [entry for entry in report.audit if entry.action == "backfill"], report.audit
    assert "backfilled" not in report.counts and "duplicate" not in report.counts


# -- the Python client ------------------------------------------------------------------------

CLIENT_CASES: list[tuple[str, Any, Any, Any, dict[str, Any], str, str]] = [
    # (case, from, to, overlap, extra, field, reason)
    ("from after to", LATER_PAST, PAST, None, {}, "from", "must not be after to"),
    ("to in the future", PAST, FUTURE, None, {}, "to", "must not be in the future"),
    ("naive from", "2026-01-01T00:00:00", LATER_PAST, None, {}, "from", "timezone offset"),
    ("date only", "2026-01-01", LATER_PAST, None, {}, "from", "timezone offset"),
    ("before 1970", "1969-12-31T23:59:59Z", LATER_PAST, None, {}, "from", "before 1970"),
    ("eleven years ahead", PAST, ELEVEN_YEARS, None, {}, "to", "at most 10 years ahead"),
    ("Unix time", 1900000000, LATER_PAST, None, {}, "from", "ISO-8601"),
    ("a bool", PAST, True, None, {}, "to", "ISO-8601"),
    ("words", "last tuesday", LATER_PAST, None, {}, "from", "ISO-8601"),
    ("a naive datetime", datetime(2026, 1, 1), LATER_PAST, None, {}, "from", "offset"),
    ("overlap skip", PAST, LATER_PAST, "skip", {}, "overlap", "allow_all"),
    ("overlap nonsense", PAST, LATER_PAST, "sometimes", {}, "overlap", "buffer_all"),
    ("note too long", PAST, LATER_PAST, None, {"note": "n" * 501}, "note", "500"),
    ("too many slots", TOO_MANY_FROM, HOUR_TOP.isoformat(), None, {}, "to", CAP),
]


@pytest.mark.parametrize(
    ("start", "end", "overlap", "extra", "field", "reason"),
    [case[1:] for case in CLIENT_CASES],
    ids=[case[0] for case in CLIENT_CASES],
)
async def test_the_client_refuses_a_bad_backfill(
    env: Env,
    start: Any,
    end: Any,
    overlap: Any,
    extra: dict[str, Any],
    field: str,
    reason: str,
) -> None:
    before = await started_count(env.client, QUEUE)
    handle = JobsClient(env.client).get_handle(env.cron_id)
    with pytest.raises(SpecError) as err:
        await handle.backfill(start, end, overlap, **extra)
    assert any(f == field and reason in r for f, r in err.value.problems), err.value.problems
    assert err.value.exit_code == 2
    await assert_nothing_started(env.client, before, QUEUE)
    await untouched(env)


@pytest.mark.parametrize(
    ("target", "error"),
    [
        ("job", InvalidTransition),
        ("missing", JobNotFound),
        (names.DLQ_WORKFLOW_ID, SpecError),
        (names.REGISTRY_WORKFLOW_ID, SpecError),
    ],
)
async def test_only_a_cron_is_backfilled(env: Env, target: str, error: type[JobsError]) -> None:
    job_id = {"job": env.job_id, "missing": f"no-such-{uuid.uuid4().hex[:6]}"}.get(target, target)
    before = await started_count(env.client, QUEUE)
    with pytest.raises(error):
        await JobsClient(env.client).get_handle(job_id).backfill(PAST, LATER_PAST)
    await assert_nothing_started(env.client, before, QUEUE)
    await untouched(env)


# -- the CLI --------------------------------------------------------------------------------

CLI_CASES: list[tuple[str, list[str], str | None]] = [
    # (case, arguments after the cron id, "field: reason" of the one error line or None)
    ("from after to", ["--from", LATER_PAST, "--to", PAST], "from: must not be after to"),
    ("to in the future", ["--from", PAST, "--to", FUTURE], "to: must not be in the future"),
    ("Unix time", ["--from", "1900000000", "--to", LATER_PAST], "from: must be an ISO-8601"),
    ("naive", ["--from", "2026-01-01T00:00", "--to", LATER_PAST], "from: must include"),
    ("too many slots", ["--from", TOO_MANY_FROM, "--to", HOUR_TOP.isoformat()], "to: the range"),
    ("overlap skip", ["--from", PAST, "--to", LATER_PAST, "--overlap", "skip"], None),
    ("no --to", ["--from", PAST], None),
]


@pytest.mark.parametrize(
    ("args", "line"), [case[1:] for case in CLI_CASES], ids=[case[0] for case in CLI_CASES]
)
async def test_the_cli_refuses_a_bad_backfill(env: Env, args: list[str], line: str | None) -> None:
    before = await started_count(env.client, QUEUE)
    result = await asyncio.to_thread(jobs, env.cli, "cron", "backfill", env.cron_id, *args)
    assert result.returncode == 2, (args, result.stderr)
    assert result.stdout == ""
    if line is not None:  # our error line (else click's usage error)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {line}"), lines
    await assert_nothing_started(env.client, before, QUEUE)
    await untouched(env)


@pytest.mark.parametrize(("target", "code"), [("job", 5), ("missing", 3)])
async def test_the_cli_backfills_only_a_cron(env: Env, target: str, code: int) -> None:
    job_id = env.job_id if target == "job" else f"no-such-{uuid.uuid4().hex[:6]}"
    before = await started_count(env.client, QUEUE)
    args = ["cron", "backfill", job_id, "--from", PAST, "--to", LATER_PAST]
    result = await asyncio.to_thread(jobs, env.cli, *args)
    assert result.returncode == code, result.stderr
    assert result.stdout == "" and len(result.stderr.strip().splitlines()) == 1
    await assert_nothing_started(env.client, before, QUEUE)
    await untouched(env)


# -- the HTTP API ---------------------------------------------------------------------------


def body(**fields: Any) -> bytes:
    return json.dumps({"from": PAST, "to": LATER_PAST, **fields}).encode()


API_CASES: list[tuple[str, bytes, dict[str, str], int, str, str | None]] = [
    # (case, body, headers, status, error, "field" named in detail or None)
    ("from after to", body(**{"from": LATER_PAST, "to": PAST}), JSON, 422, "invalid", "from"),
    ("to in the future", body(to=FUTURE), JSON, 422, "invalid", "to"),
    ("from a number", body(**{"from": 1900000000}), JSON, 422, "invalid", "from"),
    ("to null", body(to=None), JSON, 422, "invalid", "to"),
    ("no to", json.dumps({"from": PAST}).encode(), JSON, 422, "invalid", "to"),
    ("an extra field", body(actor="mallory"), JSON, 422, "invalid", "actor"),
    ("overlap cancel_other", body(overlap="cancel_other"), JSON, 422, "invalid", "overlap"),
    (
        "too many slots",
        body(**{"from": TOO_MANY_FROM, "to": HOUR_TOP.isoformat()}),
        JSON,
        422,
        "invalid",
        "to",
    ),
    ("a list", b"[]", JSON, 422, "invalid", "body"),
    ("NaN", b'{"from": NaN, "to": 1}', JSON, 422, "invalid", "body"),
    ("duplicate keys", b'{"from": "x", "from": "y", "to": "z"}', JSON, 422, "invalid", "body"),
    ("cross-site", body(), {**JSON, "Sec-Fetch-Site": "cross-site"}, 403, "forbidden", None),
    ("foreign origin", body(), {**JSON, "Origin": "http://evil.example"}, 403, "forbidden", None),
    ("no media type", body(), {}, 415, "unsupported_media_type", None),
    ("text/plain", body(), {"Content-Type": "text/plain"}, 415, "unsupported_media_type", None),
]


@pytest.mark.parametrize(
    ("content", "headers", "status", "error", "field"),
    [case[1:] for case in API_CASES],
    ids=[case[0] for case in API_CASES],
)
async def test_the_api_refuses_a_bad_backfill(
    env: Env,
    content: bytes,
    headers: dict[str, str],
    status: int,
    error: str,
    field: str | None,
) -> None:
    before = await started_count(env.client, QUEUE)
    answer = await env.http.post(f"/cron/{env.cron_id}/backfill", content=content, headers=headers)
    assert answer.status_code == status, answer.text
    data = answer.json()
    assert set(data) == {"error", "detail"} and data["error"] == error, data
    ErrorBody.model_validate(data)
    if field is not None:
        assert any(p["field"] == field for p in data["detail"]), data["detail"]
    await assert_nothing_started(env.client, before, QUEUE)
    await untouched(env)


@pytest.mark.parametrize(("target", "status"), [("job", 409), ("missing", 404)])
async def test_the_api_backfills_only_a_cron(env: Env, target: str, status: int) -> None:
    job_id = env.job_id if target == "job" else f"no-such-{uuid.uuid4().hex[:6]}"
    before = await started_count(env.client, QUEUE)
    answer = await env.http.post(f"/cron/{job_id}/backfill", content=body(), headers=JSON)
    assert answer.status_code == status, answer.text
    assert set(answer.json()) == {"error", "detail"}
    await assert_nothing_started(env.client, before, QUEUE)
    await untouched(env)


# -- the workflow's update, sent directly ---------------------------------------------------

DECODING = "Failed decoding arguments"  # the SDK refuses an argument that is no BackfillRequest
UPDATE_CASES: list[tuple[str, Any, str]] = [
    # (case, the update's argument as JSON, what the refusal says)
    ("from after to", {"from": LATER_PAST, "to": PAST}, "from is after to"),
    ("to in the future", {"from": PAST, "to": FUTURE}, "to is in the future"),
    ("too many slots", {"from": TOO_MANY_FROM, "to": HOUR_TOP.isoformat()}, CAP),
    ("actor too long", {"from": PAST, "to": LATER_PAST, "actor": "a" * 10_000}, "actor"),
    ("no to", {"from": PAST}, DECODING),
    ("a string", "last week", DECODING),
    ("null", None, "must be an object with from and to"),
    ("an extra field", {"from": PAST, "to": LATER_PAST, "slots": 5}, DECODING),
    ("overlap skip", {"from": PAST, "to": LATER_PAST, "overlap": "skip"}, DECODING),
    ("a naive from", {"from": "2026-01-01T00:00:00", "to": LATER_PAST}, DECODING),
]


@pytest.mark.parametrize(
    ("argument", "reason"), [case[1:] for case in UPDATE_CASES], ids=[c[0] for c in UPDATE_CASES]
)
async def test_the_workflow_refuses_a_bad_backfill_sent_directly(
    env: Env, argument: Any, reason: str
) -> None:
    before = await started_count(env.client, QUEUE)
    handle = env.client.get_workflow_handle(env.cron_id)
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await handle.execute_update(names.UPDATE_BACKFILL, argument)
    assert reason in str(err.value.cause), err.value.cause
    await assert_nothing_started(env.client, before, QUEUE)
    await untouched(env)
    failed = EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    assert not [e async for e in handle.fetch_history_events() if e.event_type == failed]
