"""Hostile batches at each door of bulk scheduling: ``POST /jobs/batch`` (in process),
``jobctl schedule --from-file`` (a subprocess) and ``operations.schedule_many``.

A batch wrong as a whole (over 1,000 specs, no ``jobs`` list, not strict JSON, over the body
limit) is refused whole; a batch of bad specs is answered spec by spec. Either way each case
asserts the answer and that nothing started, and each family ends with a normal job that
still runs.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from jobctl.starter import operations
from jobctl.starter.api import create_app
from jobctl.starter.api.errors import ErrorBody
from jobctl.starter.dev.devserver import DevServer
from jobctl.starter.errors import SpecError
from jobctl.workflows.models import MAX_PAYLOAD_DEPTH
from tests.helpers.processes import JOBS, cli_env
from tests.helpers.temporal import end_singletons, running_worker
from tests.hostile.common import assert_nothing_started, normal_job_completes, started_count

pytestmark = pytest.mark.devserver

QUEUE = f"hostile-bulk-{uuid.uuid4().hex[:8]}"
JSON = {"Content-Type": "application/json"}
SPEC = {"name": "hostile", "handler": "log", "delay": 0, "payload": {"n": 1}}  # valid, due now
BAD = {"name": "hostile", "handler": "log", "delay": -1}  # invalid: delay


@dataclass
class Env:
    client: Client
    http: httpx.AsyncClient
    cli: dict[str, str]


@pytest.fixture(scope="module")
async def env(dev_server: DevServer, dev_client: Client) -> AsyncIterator[Env]:
    async with running_worker(dev_client, QUEUE, publish=True):
        app = create_app(token="", client=dev_client, task_queue=QUEUE)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", timeout=60
        ) as http:
            yield Env(dev_client, http, cli_env(dev_server.address, QUEUE))
    await end_singletons(dev_client)


def batch(*specs: Any) -> bytes:
    return json.dumps({"jobs": list(specs)}).encode()


def nested(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


SPEC_BYTES = json.dumps(SPEC).encode()
HUGE = "x" * (4 * 1024 * 1024)  # over the batch route's 4 MiB body limit
BIG = "x" * (270 * 1024)  # under the body limit, over the 256 KiB payload limit
DEEP_OBJECTS = b'{"jobs": [' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"]}"
LONG = {**SPEC, "payload": {"x": "x" * 5000}}  # 1,000 of them: over the 4 MiB body limit

# (case, body, status, kind, field, reason): the request refused whole.
WHOLE = [
    ("1001 specs", batch(*[SPEC] * 1001), 422, "invalid", "jobs", "at most 1000"),
    ("jobs an object", b'{"jobs": {"0": {}}}', 422, "invalid", "jobs", "valid list"),
    ("jobs a string", b'{"jobs": "[]"}', 422, "invalid", "jobs", "valid list"),
    ("jobs null", b'{"jobs": null}', 422, "invalid", "jobs", "valid list"),
    ("no jobs", b"{}", 422, "invalid", "jobs", "Field required"),
    ("a key beside jobs", b'{"jobs": [], "run": 1}', 422, "invalid", "run", "Extra inputs"),
    ("the body a list", b"[" + SPEC_BYTES + b"]", 422, "invalid", "body", "JSON object"),
    ("100k nested arrays", b'{"jobs": ' + b"[" * 100_000, 422, "invalid", "body", "deeper"),
    ("5000 nested objects", DEEP_OBJECTS, 422, "invalid", "body", "nested deeper"),
    ("duplicate keys in a spec", b'{"jobs": [{"a": 1, "a": 2}]}', 422, "invalid", "body", "twice"),
    ("jobs twice", b'{"jobs": [], "jobs": [' + SPEC_BYTES + b"]}", 422, "invalid", "body", "twice"),
    ("NaN in a spec", b'{"jobs": [{"delay": NaN}]}', 422, "invalid", "body", "NaN"),
    ("1e400 in a spec", b'{"jobs": [{"delay": 1e400}]}', 422, "invalid", "body", "out of range"),
    ("invalid UTF-8", b'{"jobs": [{"name": "\xff"}]}', 422, "invalid", "body", "not UTF-8"),
    ("a huge spec", batch({**SPEC, "payload": {"x": HUGE}}), 413, "too_large", "", ""),
    ("1000 specs over the limit", batch(*[LONG] * 1000), 413, "too_large", "", ""),
]


@pytest.mark.parametrize(
    ("body", "status", "kind", "field", "reason"), [c[1:] for c in WHOLE], ids=[c[0] for c in WHOLE]
)
async def test_api_refuses_the_batch_whole(
    env: Env, body: bytes, status: int, kind: str, field: str, reason: str
) -> None:
    before = await started_count(env.client, QUEUE)
    answer = await env.http.post("/jobs/batch", content=body, headers=JSON)
    assert answer.status_code == status, answer.text
    error = ErrorBody.model_validate(answer.json())
    assert error.error == kind, answer.text
    if field:
        assert isinstance(error.detail, list), error
        assert any(p.field == field and reason in p.reason for p in error.detail), error
    await assert_nothing_started(env.client, before, QUEUE)


# (case, specs, field, reason): a 200 whose every result is that 422.
EACH = [
    ("a spec that is a list", [[SPEC]], "spec", "must be a JSON object (got an array)"),
    ("specs of every JSON kind", [None, 1, "x", True, 1.5], "spec", "must be a JSON object"),
    ("1000 invalid specs", [BAD] * 1000, "delay", ""),
    ("a payload too deep", [{**SPEC, "payload": nested(MAX_PAYLOAD_DEPTH + 1)}], "payload", ""),
    ("a payload over 256 KiB", [{**SPEC, "payload": {"x": BIG}}], "payload", "limit"),
    ("a reserved id", [{**SPEC, "id": "dead-letter-queue"}], "id", "reserved"),
    ("an unknown field", [{**SPEC, "extra": 1}], "extra", ""),
]


@pytest.mark.parametrize(
    ("specs", "field", "reason"), [c[1:] for c in EACH], ids=[c[0] for c in EACH]
)
async def test_api_answers_bad_specs_one_by_one(
    env: Env, specs: list[Any], field: str, reason: str
) -> None:
    before = await started_count(env.client, QUEUE)
    answer = await env.http.post("/jobs/batch", content=batch(*specs), headers=JSON)
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert len(results) == len(specs)
    for item in results:
        assert item["ok"] is False and item["status"] == 422 and item["error"] == "invalid"
        assert any(p["field"] == field and reason in p["reason"] for p in item["detail"]), item
    await assert_nothing_started(env.client, before, QUEUE)


async def test_api_accepts_names_no_worker_serves_each_with_its_warning(env: Env) -> None:
    """Issue 41: a well-formed handler name no live worker serves is no invalid input: each
    such spec starts (and waits for a worker), its result carrying the warning."""
    specs = [{**SPEC, "handler": "no.such", "delay": 3600}] * 50
    answer = await env.http.post("/jobs/batch", content=batch(*specs), headers=JSON)
    results = answer.json()["results"]
    for item in results:
        await operations.cancel(env.client, item["job_id"], actor="test")
    assert answer.status_code == 200 and len(results) == 50
    assert all(item["ok"] for item in results), results[0]
    for item in results:
        [warning] = item["warnings"]
        assert f"no live worker on task queue {QUEUE!r} serves handler 'no.such'" in warning


async def test_api_still_schedules_and_runs_a_normal_job(env: Env) -> None:
    answer = await env.http.post("/jobs/batch", content=batch(SPEC), headers=JSON)
    assert answer.status_code == 200 and answer.json()["results"][0]["ok"], answer.text
    await normal_job_completes(env.client, QUEUE)


# -- jobs schedule --from-file -----------------------------------------------------------------


def line(data: Any) -> bytes:
    return json.dumps(data).encode() + b"\n"


# (case, file content, first stderr line starts with, error lines)
FILES = [
    ("1001 specs", line(SPEC) * 1001, "error: jobs: more than 1000 specs", 1),
    ("a spec that is a list", line([SPEC]), "line 1: error: spec: must be a JSON object", 1),
    ("a bare number", b"42\n", "line 1: error: spec: must be a JSON object (got a number)", 1),
    ("NaN", b'{"name": "a", "handler": "log", "delay": NaN}\n', "line 1: error: spec: NaN", 1),
    ("duplicate keys", b'{"name": "a", "name": "b"}\n', "line 1: error: spec: the key", 1),
    ("100k nested arrays", b"[" * 100_000 + b"\n", "line 1: error: spec: nested deeper", 1),
    ("invalid UTF-8", b'\n\n{"name": "\xff"}\n', "line 3: error: spec: not UTF-8", 1),
    ("a lone surrogate", b'{"name": "\\ud800"}\n', "line 1: error: spec: ", 1),
    ("binary garbage", b"\x00\x01\xfe\xff\n", "line 1: error: spec: not ", 1),
    ("a payload over 256 KiB", line({**SPEC, "payload": {"x": BIG}}), "line 1: error: payload", 1),
    ("1000 invalid specs", line(BAD) * 1000, "line 1: error: delay: ", 1000),
]


def schedule_file(env: dict[str, str], path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [JOBS, "schedule", "--from-file", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("content", "first", "count"), [c[1:] for c in FILES], ids=[c[0] for c in FILES]
)
async def test_cli_refuses_hostile_files(
    env: Env, tmp_path: Path, content: bytes, first: str, count: int
) -> None:
    path = tmp_path / "jobs.jsonl"
    path.write_bytes(content)
    before = await started_count(env.client, QUEUE)
    result = await asyncio.to_thread(schedule_file, env.cli, path)
    errors = result.stderr.splitlines()
    assert result.returncode == 2, result.stderr[:2000]
    assert errors[0].startswith(first) and len(errors) == count, errors[:3]
    assert result.stdout == ""
    await assert_nothing_started(env.client, before, QUEUE)


async def test_cli_still_schedules_and_runs_a_normal_job(env: Env, tmp_path: Path) -> None:
    path = tmp_path / "ok.jsonl"
    path.write_bytes(line({**SPEC, "delay": 3600}))
    result = await asyncio.to_thread(schedule_file, env.cli, path)
    assert result.returncode == 0 and ": scheduled, runs at" in result.stdout, result.stderr
    await normal_job_completes(env.client, QUEUE)


# -- operations.schedule_many ------------------------------------------------------------------


async def test_python_refuses_1001_and_answers_odd_items(env: Env) -> None:
    before = await started_count(env.client, QUEUE)
    with pytest.raises(SpecError) as refused:
        await operations.schedule_many(env.client, [SPEC] * 1001, task_queue=QUEUE)
    assert refused.value.problems[0][0] == "jobs"
    odd: list[Any] = [None, [SPEC], "spec", 7, BAD, {**SPEC, "handler": ""}]
    results = await operations.schedule_many(env.client, odd, task_queue=QUEUE)
    assert [result.ok for result in results] == [False] * len(odd)
    assert all(isinstance(result.error, SpecError) for result in results)
    await assert_nothing_started(env.client, before, QUEUE)
    await normal_job_completes(env.client, QUEUE)
