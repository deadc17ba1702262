"""Record the replay histories of rate limits (``tests/histories/r1r-*.json``).

    python -m tests.record_rate_histories

A key at 10/m (a start each 6 s) on a fresh dev server: the first job starts at once, the
second and third wait in the limiter's queue until it reserves their start (then the round
waits in a worker for it), the fourth is cancelled while it waits there; a fifth job
has the rate key and a concurrency key. Saved are the key's limiter and those jobs.
Like tests/record_histories.py: never re-record an existing prefix.
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
from jobctl.workflows.models.ratelimit import RateState, rate_workflow_id
from tests.helpers.temporal import running_worker

HISTORIES = Path(__file__).resolve().parent / "histories"
QUEUE = "record-rate"
KEY = "api"


async def queued(client: Client, job_id: str) -> None:
    handle = client.get_workflow_handle(rate_workflow_id(KEY))
    async with asyncio.timeout(60):
        while True:
            with contextlib.suppress(RPCError):  # not started yet
                state = await handle.query(names.QUERY_RESERVATIONS, result_type=RateState)
                if any(w.request.holder == job_id for w in state.waiters):
                    return
            await asyncio.sleep(0.05)


async def record(prefix: str) -> None:
    handlers = load_handlers("tests.handlers").names()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.jsonl"

        async def submit(client: Client, job_id: str, **more: Any) -> None:
            spec = {
                "id": job_id,
                "name": job_id,
                "handler": "test.record",
                "run_at": datetime.now(UTC).isoformat(),
                "payload": {"path": str(path), "seconds": 0.1},
                "rate_key": KEY,
                "rate": "10/m",
                **more,
            }
            await operations.schedule(client, spec, handlers, task_queue=QUEUE)

        async with fresh_server() as (_, client), running_worker(client, QUEUE):
            for job_id in ("first", "second", "queued"):
                await submit(client, job_id)
                await asyncio.sleep(0.2)  # in this order
            await queued(client, "queued")
            await submit(client, "cancelled")
            await queued(client, "cancelled")
            await operations.cancel(client, "cancelled")
            await submit(client, "both", concurrency_key=KEY, concurrency_limit=1)
            for job_id in ("first", "second", "queued", "both"):
                await client.get_workflow_handle(job_id).result()
            await asyncio.sleep(1)
            saved = {
                rate_workflow_id(KEY): "ratelimit",
                "first": "rated-first",
                "second": "rated-second",
                "queued": "rated-queued",
                "cancelled": "rated-cancelled",
                "both": "rated-both",
            }
            for workflow_id, name in saved.items():
                history = await client.get_workflow_handle(workflow_id).fetch_history()
                (HISTORIES / f"{prefix}-{name}.json").write_text(history.to_json())


if __name__ == "__main__":
    asyncio.run(record(sys.argv[1] if len(sys.argv) > 1 else "r1r"))
