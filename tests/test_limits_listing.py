"""``jobctl limits``, ``GET /limits`` and ``JobsClient.limits()`` on the dev server: a rate
key with a job waiting and a concurrency key with a holder, each listed with its limit, its
recent starts or holders, and its waiting jobs; the same rows through every door."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client
from temporalio.service import RPCError

from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.starter.api import create_app
from jobctl.starter.jobsclient import JobsClient
from jobctl.starter.operations.limits import LIMITER_TYPES
from jobctl.workflows.models.ratelimit import rate_workflow_id
from tests.helpers.cli import jobs_here_sync
from tests.helpers.poll import eventually
from tests.helpers.temporal import running_worker

pytestmark = pytest.mark.devserver

HANDLERS = load_handlers("tests.handlers").names()


@pytest.fixture
async def worker(dev_client: Client, task_queue: str) -> AsyncIterator[str]:
    await end_other_limiters(dev_client)
    async with running_worker(dev_client, task_queue):
        yield task_queue


async def end_other_limiters(client: Client) -> None:
    """The session's dev server still runs the limiters of earlier tests, whose workers are
    gone: each would take the listing's whole query timeout to answer. They are not this
    test's subject."""
    query = f'{LIMITER_TYPES} AND ExecutionStatus = "Running"'
    async for execution in client.list_workflows(query):
        with contextlib.suppress(RPCError):
            await client.get_workflow_handle(execution.id).terminate(reason="test isolation")


async def submit(client: Client, queue: str, path: Path, **fields: Any) -> str:
    spec = {
        "name": "listed",
        "handler": "test.record",
        "run_at": datetime.now(UTC).isoformat(),
        "dispatch_lead": 0,
        "payload": {"path": str(path), "seconds": fields.pop("seconds", 0)},
        **fields,
    }
    return (await operations.schedule(client, spec, HANDLERS, task_queue=queue)).job_id


def mine(limits: operations.Limits, *keys: str) -> dict[str, operations.LimitInfo]:
    return {info.key: info for info in limits.limits if info.key in keys}


async def test_every_door_lists_rate_and_concurrency_keys(
    dev_client: Client, worker: str, tmp_path: Path, cli: dict[str, str]
) -> None:
    rate_key, sem_key = f"api-{uuid.uuid4().hex[:8]}", f"db-{uuid.uuid4().hex[:8]}"
    path = tmp_path / "runs.jsonl"
    rated = {"rate_key": rate_key, "rate": "2/m", "rate_burst": 2}
    for _ in range(3):  # two start at once (the burst), the third waits 30 s
        await submit(dev_client, worker, path, **rated)
    sem = {"concurrency_key": sem_key, "concurrency_limit": 1}
    holder = await submit(dev_client, worker, path, seconds=120, **sem)
    await eventually(
        lambda: operations.list_limits(dev_client),
        lambda limits: sem_key in mine(limits, sem_key),
        what="the holder's permit",
        timeout=60,
    )
    waiter = await submit(dev_client, worker, path, **sem)

    def ready(limits: operations.Limits) -> bool:
        rows = mine(limits, rate_key, sem_key)
        return (
            len(rows) == 2
            and rows[rate_key].waiting == 1
            and rows[rate_key].recent_starts == 2
            and rows[sem_key].running == 1
            and rows[sem_key].waiting == 1
        )

    # Limiters of earlier tests on this server (their workers gone) answer slowly or not.
    listed = await eventually(
        lambda: operations.list_limits(dev_client), ready, what="both keys", timeout=60
    )
    rate = mine(listed, rate_key)[rate_key]
    assert (rate.kind, rate.limit, rate.workflow_id) == (
        "rate",
        "2/m burst 2",
        rate_workflow_id(rate_key),
    )
    assert rate.next_start is not None and rate.next_start > datetime.now(UTC)
    assert mine(listed, sem_key)[sem_key].limit == "1"

    jobs = await JobsClient.connect(address=cli["TEMPORAL_ADDRESS"])
    assert ready(await jobs.limits())

    app = create_app(token="", client=dev_client, task_queue=worker)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as http:
        answer = await http.get("/limits")
    assert answer.status_code == 200
    assert ready(operations.Limits.model_validate(answer.json()))

    # The commands run in a thread (the worker answering the queries runs in this loop).
    table = await asyncio.to_thread(jobs_here_sync, cli, "limits")
    assert table.returncode == 0, table.stderr
    line = next(line for line in table.stdout.splitlines() if rate_key in line)
    assert line.split()[:5] == ["rate", rate_key, "2/m", "burst", "2"], table.stdout
    as_json = await asyncio.to_thread(jobs_here_sync, cli, "limits", "--json")
    assert ready(operations.Limits.model_validate(json.loads(as_json.stdout))), as_json.stdout
    for job in (holder, waiter):
        await operations.cancel(dev_client, job)
