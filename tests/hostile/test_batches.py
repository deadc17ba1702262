"""Hostile batches at each door: ``POST /jobs/batch`` with ``batch`` (in process),
``jobctl schedule --from-file --batch`` (a subprocess), ``JobsClient.schedule_many(batch=)``.

A batch is all or nothing: every case asserts the answer (422 / exit 2 naming the field, 409
/ exit 4 for a taken id), that nothing started (no job, no batch), and each family ends with a
normal batch that still runs to its callback.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from jobctl.starter.api import create_app
from jobctl.starter.api.errors import ErrorBody
from jobctl.starter.dev.devserver import DevServer
from jobctl.starter.errors import JobExists, SpecError
from jobctl.starter.jobsclient import JobsClient
from jobctl.starter.operations import batches
from tests.helpers.poll import eventually
from tests.helpers.processes import cli_env, jobs
from tests.helpers.temporal import end_singletons, running_worker
from tests.hostile.common import started_count, started_since

pytestmark = pytest.mark.devserver

QUEUE = f"hostile-batch-{uuid.uuid4().hex[:8]}"
JSON = {"Content-Type": "application/json"}
SPEC = {"name": "m", "handler": "log", "delay": 0, "payload": {"n": 1}}
CALLBACK = {"name": "cb", "handler": "log", "payload": {"n": 1}}


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


def new_id() -> str:
    return f"hb-{uuid.uuid4().hex[:8]}"


async def count(env: Env) -> Any:
    return await started_count(env.client, QUEUE, every_type=True)


async def nothing_started(env: Env, before: Any) -> None:
    assert await started_since(env.client, before, QUEUE, every_type=True) == 0


async def normal_batch_runs(env: Env) -> None:
    bid = new_id()
    body = {"jobs": [SPEC, SPEC], "batch": {"id": bid, "on_complete": CALLBACK}}
    answer = await env.http.post("/jobs/batch", json=body)
    assert answer.status_code == 201, answer.text
    report = await eventually(
        lambda: batches.batch_status(env.client, bid),
        lambda r: r.status == "done",
        timeout=30,
        what=f"batch {bid} done",
    )
    assert report.counts["done"] == 2 and report.callbacks["on_complete"].state == "started"


LONG_ID = "b" * 181
BIG = {"x": "x" * (200 * 1024)}
HEAVY = {**SPEC, "payload": {"x": "x" * 1200}}
# (case, batch, jobs, field, reason fragment): 422, nothing started.
REFUSED: list[tuple[str, Any, Any, str, str]] = [
    ("batch not an object", "b1", [SPEC], "batch", "must be an object"),
    ("no batch id", {}, [SPEC], "batch.id", "characters"),
    ("batch id with a slash", {"id": "a/b"}, [SPEC], "batch.id", "characters"),
    ("batch id too long", {"id": LONG_ID}, [SPEC], "batch.id", "1-180"),
    (
        "an unknown batch field",
        {"id": "x", "on_fail": CALLBACK},
        [SPEC],
        "batch.on_fail",
        "unknown",
    ),
    ("empty batch", {"id": "x"}, [], "jobs", "at least one job"),
    ("1001 members", {"id": "x"}, [SPEC] * 1001, "jobs", "at most 1000"),
    ("a bad member", {"id": "x"}, [SPEC, {**SPEC, "delay": -1}], "jobs[1].delay", ""),
    ("a member not an object", {"id": "x"}, [SPEC, 7], "jobs[1]", "JSON object"),
    (
        "a cron member",
        {"id": "x"},
        [{**SPEC, "delay": None, "cron": "* * * * *"}],
        "jobs[0].cron",
        "one-shot",
    ),
    (
        "member ids colliding",
        {"id": "x"},
        [{**SPEC, "id": "a"}, {**SPEC, "id": "a"}],
        "jobs[1].id",
        "also jobs[0]",
    ),
    ("member id = a default id", {"id": "x"}, [SPEC, {**SPEC, "id": "x.0"}], "jobs[1].id", "also"),
    (
        "a reserved member id",
        {"id": "x"},
        [{**SPEC, "id": "dead-letter-queue"}],
        "jobs[0].id",
        "reserved",
    ),
    (
        "a handler that is no name",
        {"id": "x"},
        [{**SPEC, "handler": "no such!"}],
        "jobs[0].handler",
        "",
    ),
    (
        "callback not an object",
        {"id": "x", "on_complete": []},
        [SPEC],
        "batch.on_complete",
        "job spec",
    ),
    (
        "callback with run_at",
        {"id": "x", "on_complete": {**CALLBACK, "run_at": "2030-01-01T00:00:00Z"}},
        [SPEC],
        "batch.on_complete.run_at",
        "settles",
    ),
    (
        "callback a cron",
        {"id": "x", "on_complete": {**CALLBACK, "cron": "* * * * *"}},
        [SPEC],
        "batch.on_complete.cron",
        "settles",
    ),
    (
        "callback invalid",
        {"id": "x", "on_complete": {**CALLBACK, "max_attempts": 0}},
        [SPEC],
        "batch.on_complete.max_attempts",
        "",
    ),
    (
        "callback handler that is no name",
        {"id": "x", "on_success": {**CALLBACK, "handler": "no such!"}},
        [SPEC],
        "batch.on_success.handler",
        "",
    ),
    (
        "callback payload uses batch",
        {"id": "x", "on_complete": {**CALLBACK, "payload": {"batch": 1}}},
        [SPEC],
        "batch.on_complete.payload.batch",
        "reserved",
    ),
    (
        "callback payload too big",
        {"id": "x", "on_complete": {**CALLBACK, "payload": BIG}},
        [SPEC],
        "batch.on_complete.payload",
        "summary",
    ),
    (
        "callback id = member id",
        {"id": "x", "on_complete": {**CALLBACK, "id": "x.0"}},
        [SPEC],
        "batch.on_complete.id",
        "member",
    ),
    (
        "callbacks sharing an id",
        {"id": "x", "on_complete": {**CALLBACK, "id": "c"}, "on_success": {**CALLBACK, "id": "c"}},
        [SPEC],
        "batch.on_success.id",
        "distinct",
    ),
    ("oversized", {"id": "x"}, [HEAVY] * 1000, "jobs", "weigh"),
]


@pytest.mark.parametrize(
    ("batch", "specs", "field", "reason"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
async def test_api_refuses_a_hostile_batch_whole(
    env: Env, batch: Any, specs: Any, field: str, reason: str
) -> None:
    if isinstance(batch, dict) and batch.get("id") == "x":
        batch = {**batch, "id": new_id()}
        specs = [
            {**s, "id": s["id"].replace("x.", f"{batch['id']}.")}
            if isinstance(s, dict) and "id" in s
            else s
            for s in specs
        ]
        for name in ("on_complete", "on_success"):
            cb = batch.get(name)
            if isinstance(cb, dict) and cb.get("id") == "x.0":
                batch[name] = {**cb, "id": f"{batch['id']}.0"}
    before = await count(env)
    answer = await env.http.post("/jobs/batch", json={"jobs": specs, "batch": batch})
    assert answer.status_code == 422, answer.text
    error = ErrorBody.model_validate(answer.json())
    assert isinstance(error.detail, list), error
    assert any(p.field == field and reason in p.reason for p in error.detail), error
    await nothing_started(env, before)


async def test_api_taken_ids_are_409_and_the_identical_request_is_200(env: Env) -> None:
    bid = new_id()
    body = {"jobs": [SPEC], "batch": {"id": bid, "on_complete": CALLBACK}}
    first = await env.http.post("/jobs/batch", json=body)
    assert first.status_code == 201, first.text
    assert first.json()["job_ids"] == [f"{bid}.0"]
    again = await env.http.post("/jobs/batch", json=body)
    assert again.status_code == 200 and again.json()["created"] is False, again.text
    # The batch starts its member and then its callback on its own: let it finish first, so
    # the count below sees only what the refused requests might start.
    done = await eventually(
        lambda: env.http.get(f"/batches/{bid}"),
        lambda r: r.json().get("status") == "done",
        timeout=30,
        what="batch done",
    )
    before = await count(env)
    other = await env.http.post("/jobs/batch", json={**body, "jobs": [SPEC, SPEC]})
    assert other.status_code == 409 and other.json()["error"] == "conflict", other.text
    taken = {"id": new_id(), "on_complete": {**CALLBACK, "id": f"{bid}.0"}}
    clash = await env.http.post("/jobs/batch", json={"jobs": [SPEC], "batch": taken})
    assert clash.status_code == 409 and "already exists" in clash.text, clash.text
    await nothing_started(env, before)
    unknown = await env.http.get(f"/batches/{new_id()}")
    assert unknown.status_code == 404, unknown.text
    bad = await env.http.get("/batches/a%2Fb")
    assert bad.status_code in (404, 422), bad.text
    assert done.json()["callbacks"]["on_complete"]["state"] == "started"
    late = await env.http.post(f"/batches/{bid}/cancel")
    assert late.status_code == 409, late.text
    await normal_batch_runs(env)


async def test_api_cancel_runs_the_callback_with_the_members_counted_cancelled(env: Env) -> None:
    bid = new_id()
    body = {"jobs": [{**SPEC, "delay": "1h"}] * 3, "batch": {"id": bid, "on_complete": CALLBACK}}
    assert (await env.http.post("/jobs/batch", json=body)).status_code == 201
    await eventually(
        lambda: batches.batch_status(env.client, bid), lambda r: r.started == 3, what="started"
    )
    answer = await env.http.post(f"/batches/{bid}/cancel", json={"note": "wrong data"})
    assert answer.status_code == 200, answer.text
    report = await eventually(
        lambda: batches.batch_status(env.client, bid),
        lambda r: r.status == "cancelled",
        timeout=30,
        what="batch cancelled",
    )
    assert report.counts["cancelled"] == 3 and report.cancel and report.cancel.note == "wrong data"
    assert report.callbacks["on_complete"].state == "started"


CLI_CASES = [
    ("a member that is no JSON", ["--batch", "B"], "{nope\n", 2, "line 1"),
    (
        "a bad callback",
        ["--batch", "B", "--on-complete", '{"name": 1}'],
        None,
        2,
        "batch.on_complete",
    ),
    ("callback not JSON", ["--batch", "B", "--on-complete", "{x"], None, 2, "batch.on_complete"),
    ("--on-complete alone", ["--on-complete", "{}"], None, 2, "need --batch"),
    ("a bad batch id", ["--batch", "a/b"], None, 2, "batch.id"),
]


@pytest.mark.parametrize(
    ("args", "text", "code", "says"), [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES]
)
async def test_cli_refuses_hostile_batches(
    env: Env, tmp_path: Path, args: list[str], text: str | None, code: int, says: str
) -> None:
    path = tmp_path / "jobs.jsonl"
    path.write_text(text if text is not None else json.dumps(SPEC) + "\n")
    args = [new_id() if a == "B" else a for a in args]
    before = await count(env)
    done = jobs(env.cli, "schedule", "--from-file", str(path), *args)
    assert done.returncode == code, (done.stdout, done.stderr)
    assert says in done.stderr, done.stderr
    await nothing_started(env, before)


async def test_cli_schedules_a_batch_and_reads_and_refuses_it(env: Env, tmp_path: Path) -> None:
    bid = new_id()
    path = tmp_path / "jobs.jsonl"
    path.write_text(json.dumps(SPEC) + "\n" + json.dumps(SPEC) + "\n")
    callback = tmp_path / "cb.json"
    callback.write_text(json.dumps(CALLBACK))
    args = ["schedule", "--from-file", str(path), "--batch", bid, "--on-complete", f"@{callback}"]
    first = jobs(env.cli, *args, "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["job_ids"] == [f"{bid}.0", f"{bid}.1"]
    path.write_text(json.dumps(SPEC) + "\n")
    taken = jobs(env.cli, *args)
    assert taken.returncode == 4, (taken.stdout, taken.stderr)
    await eventually(
        lambda: batches.batch_status(env.client, bid),
        lambda r: r.status == "done",
        timeout=30,
        what="batch done",
    )
    shown = jobs(env.cli, "batch", "status", bid)
    assert shown.returncode == 0 and "done 2" in shown.stdout, shown.stdout
    assert json.loads(jobs(env.cli, "batch", "status", bid, "--json").stdout)["settled"] == 2
    assert jobs(env.cli, "batch", "status", new_id()).returncode == 3
    assert jobs(env.cli, "batch", "cancel", bid).returncode == 5


async def test_python_client_batch_door(env: Env, dev_server: DevServer) -> None:
    client = JobsClient(env.client, task_queue=QUEUE)
    before = await count(env)
    with pytest.raises(SpecError) as refused:
        await client.schedule_many(
            [SPEC, {**SPEC, "id": "a"}, {**SPEC, "id": "a"}], batch={"id": new_id()}
        )
    assert any(field == "jobs[2].id" for field, _ in refused.value.problems)
    await nothing_started(env, before)
    bid = new_id()
    answer = await client.schedule_many([SPEC], batch={"id": bid, "on_success": CALLBACK})
    assert answer.batch_id == bid and answer.callbacks == {"on_success": f"{bid}.on_success"}
    with pytest.raises(JobExists):
        await client.schedule_many([SPEC, SPEC], batch={"id": bid})
    report = await eventually(
        lambda: client.batch_status(bid), lambda r: r.status == "done", timeout=30, what="done"
    )
    assert report.succeeded and report.callbacks["on_success"].state == "started"
