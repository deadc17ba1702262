"""Bulk scheduling end to end on the dev server: ``operations.schedule_many``, ``POST
/jobs/batch`` (in process) and ``jobctl schedule --from-file`` (a subprocess): per-item results
in order, the valid specs started with the right run_at, the refused ones started nothing, and
the 1,000-spec cap."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from jobctl.starter import operations
from jobctl.starter.api import create_app
from jobctl.starter.errors import JobExists, JobNotFound, SpecError
from jobctl.workflows.models import JOB_RUN_AT
from tests.helpers.poll import eventually
from tests.helpers.processes import JOBS, cli_env
from tests.hostile.common import Started, assert_nothing_started, started_count, started_since

pytestmark = pytest.mark.devserver

HOUR = timedelta(hours=1)


def new_id(prefix: str = "bulk") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def run_at_of(client: Client, job_id: str) -> datetime | None:
    described = await client.get_workflow_handle(job_id).describe()
    return described.typed_search_attributes.get(JOB_RUN_AT)


async def exists(client: Client, job_id: str) -> bool:
    try:
        await operations.describe(client, job_id)
    except JobNotFound:
        return False
    return True


def mixed_batch(ids: list[str], at: datetime) -> list[Any]:
    """valid (delay), invalid, valid (run_at), the first's id with a different spec, the
    first again identical, an unknown handler, a list, a cron."""
    first = {"id": ids[0], "name": "a", "handler": "log", "delay": 3600}
    return [
        first,
        {"id": ids[1], "name": "b", "handler": "log", "delay": -1, "max_attempts": 0},
        {"id": ids[2], "name": "c", "handler": "log", "run_at": at.isoformat()},
        {**first, "name": "different"},
        dict(first),
        {"id": ids[3], "name": "d", "handler": "no.such.handler", "delay": 60},
        ["not", "an", "object"],
        {"id": ids[4], "name": "e", "handler": "log", "cron": "0 3 * * *"},
    ]


async def exactly_started(client: Client, before: Started, task_queue: str, count: int) -> None:
    """``count`` jobs started since ``before`` once visibility has caught up, and no more."""
    await eventually(
        lambda: started_since(client, before, task_queue),
        lambda n: n >= count,
        what=f"{count} jobs started",
    )
    assert await started_since(client, before, task_queue) == count


async def test_schedule_many_mixed_batch_answers_in_order(
    dev_client: Client, task_queue: str
) -> None:
    ids = [new_id() for _ in range(5)]
    now = datetime.now(UTC).replace(microsecond=0)
    at = now + 2 * HOUR
    before = await started_count(dev_client, task_queue)
    results = await operations.schedule_many(
        dev_client, mixed_batch(ids, at), handlers={"log"}, now=now, task_queue=task_queue
    )
    assert len(results) == 8
    ok, bad, timed, other, again, unknown, listed, cron = results
    assert ok.ok and ok.scheduled is not None and ok.scheduled.created
    assert ok.scheduled.job_id == ids[0] and ok.scheduled.next_run_at == now + HOUR
    assert isinstance(bad.error, SpecError) and not bad.ok
    assert {field for field, _ in bad.problems()} == {"delay", "max_attempts"}, bad.problems()
    assert timed.scheduled is not None and timed.scheduled.next_run_at == at
    assert isinstance(other.error, JobExists), other  # same id, another request: 409
    assert again.scheduled is not None and not again.scheduled.created  # identical: the same job
    assert isinstance(unknown.error, SpecError) and unknown.problems()[0][0] == "handler"
    assert listed.problems() == [("spec", "must be a JSON object (got an array)")]
    assert cron.scheduled is not None and cron.scheduled.next_run_at is not None
    assert await run_at_of(dev_client, ids[0]) == now + HOUR
    assert await run_at_of(dev_client, ids[2]) == at
    assert not await exists(dev_client, ids[1]) and not await exists(dev_client, ids[3])
    await exactly_started(dev_client, before, task_queue, 3)  # a, c and the cron
    await operations.cancel(dev_client, ids[4], None)


async def test_the_cap_is_1000_and_over_it_nothing_starts(
    dev_client: Client, task_queue: str
) -> None:
    now = datetime.now(UTC)
    specs = [{"name": f"n{i}", "handler": "log", "delay": 3600} for i in range(1001)]
    assert len(operations.check_batch(specs[:1000], now)) == 1000  # 1,000 is a batch
    before = await started_count(dev_client, task_queue)
    with pytest.raises(SpecError) as refused:
        await operations.schedule_many(dev_client, specs, {"log"}, now, task_queue)
    assert refused.value.problems == [("jobs", "at most 1000 specs per batch (got 1001)")]
    await assert_nothing_started(dev_client, before, task_queue)


async def test_an_empty_batch_is_an_empty_answer(dev_client: Client) -> None:
    assert await operations.schedule_many(dev_client, []) == []


# -- POST /jobs/batch --------------------------------------------------------------------------


@pytest.fixture
async def api(dev_client: Client, task_queue: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(token="", client=dev_client, task_queue=task_queue)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        yield http


async def test_batch_route_answers_each_spec_as_post_jobs_would(
    api: httpx.AsyncClient, dev_client: Client, task_queue: str
) -> None:
    ids = [new_id("bulk-api") for _ in range(5)]
    at = datetime.now(UTC).replace(microsecond=0) + 2 * HOUR
    specs = mixed_batch(ids, at)
    before = await started_count(dev_client, task_queue)
    answer = await api.post("/jobs/batch", json={"jobs": specs})
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [item["ok"] for item in results] == [True, False, True, False, True, True, False, True]
    assert [item.get("status") for item in results] == [None, 422, None, 409, None, None, 422, None]
    assert results[0]["job_id"] == ids[0] and results[0]["created"] is True
    assert results[2]["next_run_at"] == at.isoformat().replace("+00:00", "Z")
    assert results[4] == {**results[0], "created": False}
    # A handler no live worker serves is accepted, with the warning POST /jobs gives.
    [warning] = results[5]["warnings"]
    assert "serves handler 'no.such.handler': the job waits for one" in warning
    assert results[6]["detail"] == [
        {"field": "spec", "reason": "must be a JSON object (got an array)"}
    ]
    # A refusal is what POST /jobs answers for the same spec, status and body alike.
    for index in (1, 3):
        single = await api.post("/jobs", json=specs[index])
        expected = {"ok": False, "status": single.status_code, **single.json()}
        assert results[index] == expected, (index, results[index], expected)
    assert await run_at_of(dev_client, ids[2]) == at
    assert not await exists(dev_client, ids[1]) and await exists(dev_client, ids[3])
    await exactly_started(dev_client, before, task_queue, 4)
    await operations.cancel(dev_client, ids[4], None)
    await operations.cancel(dev_client, ids[3], None)


async def test_batch_route_cap_and_empty_list(
    api: httpx.AsyncClient, dev_client: Client, task_queue: str
) -> None:
    before = await started_count(dev_client, task_queue)
    spec = {"name": "n", "handler": "log", "delay": 3600}
    over = await api.post("/jobs/batch", json={"jobs": [spec] * 1001})
    assert over.status_code == 422 and over.json()["error"] == "invalid", over.text
    assert over.json()["detail"][0]["field"] == "jobs"
    empty = await api.post("/jobs/batch", json={"jobs": []})
    assert empty.status_code == 200 and empty.json() == {"results": []}
    await assert_nothing_started(dev_client, before, task_queue)


# -- jobs schedule --from-file -----------------------------------------------------------------


def jobs_file(env: dict[str, str], *args: str, stdin: str | None = None) -> Any:
    return subprocess.run(
        [JOBS, "schedule", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_from_file_reports_each_line_and_exits_2_on_a_bad_one(
    cli: dict[str, str], dev_client: Client, task_queue: str, tmp_path: Path
) -> None:
    good, bad = new_id("bulk-cli"), new_id("bulk-cli")
    lines = [
        json.dumps({"id": good, "name": "g", "handler": "log", "delay": 3600}),
        "",
        "   ",
        '{"name": "x", "handler": "log", "delay": 60',  # cut short
        json.dumps({"id": bad, "name": "b", "handler": "log", "delay": -5}),
        "[1, 2]",
    ]
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    before = await started_count(dev_client, task_queue)
    result = await asyncio.to_thread(jobs_file, cli, "--from-file", str(path))
    assert result.returncode == 2, result.stderr
    out = result.stdout.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(f"{good}: scheduled, runs at "), out
    said = result.stderr.strip().splitlines()
    # No worker serves log on this queue: the scheduled line's job waits for one, and says so.
    [warning] = [line for line in said if ": warning: " in line]
    assert warning.startswith("line 1: warning: no live worker on task queue"), warning
    errors = [line for line in said if ": warning: " not in line]
    assert errors[0].startswith("line 4: error: spec: not valid JSON"), errors
    assert errors[1].startswith("line 5: error: delay: "), errors
    assert errors[2] == "line 6: error: spec: must be a JSON object (got an array)", errors
    assert len(errors) == 3
    assert await exists(dev_client, good) and not await exists(dev_client, bad)
    await exactly_started(dev_client, before, task_queue, 1)


async def test_from_stdin_with_json_and_a_used_id(
    cli: dict[str, str], dev_client: Client, task_queue: str
) -> None:
    ids = [new_id("bulk-stdin") for _ in range(2)]
    specs = [{"id": job_id, "name": "s", "handler": "log", "delay": 7200} for job_id in ids]
    stdin = "".join(json.dumps(spec) + "\n" for spec in specs)
    result = await asyncio.to_thread(jobs_file, cli, "--from-file", "-", "--json", stdin=stdin)
    assert result.returncode == 0, result.stderr
    items = json.loads(result.stdout)
    assert [(item["line"], item["ok"], item["job_id"]) for item in items] == [
        (1, True, ids[0]),
        (2, True, ids[1]),
    ]
    for job_id in ids:
        assert await exists(dev_client, job_id)
    # The same id with another spec: the single schedule's exit 4 (JobExists), not 2.
    taken = json.dumps({**specs[0], "name": "other"}) + "\n"
    again = await asyncio.to_thread(jobs_file, cli, "--from-file", "-", stdin=taken)
    assert again.returncode == 4, again.stderr
    assert again.stderr.startswith("line 1: error: a job with id"), again.stderr
    # Flags with --from-file are a usage error (exit 2), before anything is read.
    mixed = await asyncio.to_thread(jobs_file, cli, "x", "--from-file", "-", stdin=taken)
    assert mixed.returncode == 2 and "--from-file" in mixed.stderr


def test_from_file_without_temporal_still_reports_bad_lines(tmp_path: Path) -> None:
    env = cli_env("127.0.0.1:1", "nowhere")  # nothing listens: only invalid lines are fine
    path = tmp_path / "bad.jsonl"
    path.write_text('{"name": "x", "handler": "log", "delay": "soon"}\n')
    result = jobs_file(env, "--from-file", str(path))
    assert result.returncode == 2 and result.stderr.startswith("line 1: error: delay: ")
    path.write_text('{"name": "x", "handler": "log", "delay": 60}\n')
    down = jobs_file(env, "--from-file", str(path))
    assert down.returncode == 6 and "cannot reach Temporal" in down.stderr, down.stderr
