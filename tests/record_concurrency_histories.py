"""Record the replay histories of concurrency limits (``tests/histories/r1c-*.json``).

    python -m tests.record_concurrency_histories

A key with limit 1 on a fresh dev server: a holder runs, a waiter gets the permit after it,
a third waiter is cancelled while it waits; saved are the key's semaphore and those three
jobs. Like tests/record_histories.py: never re-record an existing prefix.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError

from bench.common import fresh_server
from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.workflows import names
from jobctl.workflows.models.concurrency import SemaphoreState, concurrency_workflow_id
from tests.helpers.temporal import running_worker

HISTORIES = Path(__file__).resolve().parent / "histories"
QUEUE = "record-concurrency"
KEY = "customer-42"


async def waiting(client: Client, count: int) -> None:
    handle = client.get_workflow_handle(concurrency_workflow_id(KEY))
    async with asyncio.timeout(60):
        while True:
            with contextlib.suppress(RPCError):  # not started yet
                state = await handle.query(names.QUERY_PERMITS, result_type=SemaphoreState)
                if len(state.waiters) == count:
                    return
            await asyncio.sleep(0.2)


async def record(prefix: str) -> None:
    handlers = load_handlers("tests.handlers").names()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.jsonl"

        async def submit(client: Client, job_id: str, seconds: float, **more: Any) -> None:
            spec = {
                "id": job_id,
                "name": job_id,
                "handler": "test.record",
                "run_at": datetime.now(UTC).isoformat(),
                "payload": {"path": str(path), "seconds": seconds},
                "concurrency_key": KEY,
                "concurrency_limit": 1,
                **more,
            }
            await operations.schedule(client, spec, handlers, task_queue=QUEUE)

        async with fresh_server() as (_, client), running_worker(client, QUEUE):
            await submit(client, "holder", 3.0)
            await waiting(client, 0)
            await submit(client, "waiter", 0.1, priority=1)
            await submit(client, "cancelled", 0.1)
            await waiting(client, 2)
            await operations.cancel(client, "cancelled")
            await waiting(client, 1)
            for job_id in ("holder", "waiter"):
                await client.get_workflow_handle(job_id).result()
            await waiting(client, 0)
            await asyncio.sleep(1)
            saved = {
                concurrency_workflow_id(KEY): "concurrency",
                "holder": "limited-holder",
                "waiter": "limited-waiter",
                "cancelled": "limited-cancelled",
            }
            for workflow_id, name in saved.items():
                history = await client.get_workflow_handle(workflow_id).fetch_history()
                (HISTORIES / f"{prefix}-{name}.json").write_text(history.to_json())


if __name__ == "__main__":
    asyncio.run(record(sys.argv[1] if len(sys.argv) > 1 else "r1c"))
