"""Record the replay histories of batches (``tests/histories/r1b-*.json``).

    python -m tests.record_batch_histories

On a fresh dev server: a batch of two (one done, one dead) with both callbacks, and a batch
of two waiting members that is cancelled; saved are both batches, the dead member and the
callback. Like tests/record_histories.py: never re-record an existing prefix.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from bench.common import fresh_server
from jobctl.activities.registry import load_handlers
from jobctl.starter.operations import batches
from jobctl.workflows import batch_rules
from tests.helpers.temporal import running_worker

HISTORIES = Path(__file__).resolve().parent / "histories"
QUEUE = "record-batches"
CALLBACK = {"name": "cb", "handler": "log", "payload": {"n": 1}}


async def record(prefix: str) -> None:
    handlers = load_handlers("tests.handlers").names()
    done = {"id": "settled", "on_complete": CALLBACK, "on_success": CALLBACK}
    members = [
        {"name": "ok", "handler": "log", "delay": 0},
        {"id": "poisoned", "name": "bad", "handler": "test.permanent", "delay": 0},
    ]
    waiting = [{"name": "later", "handler": "log", "delay": "1h"}] * 2
    async with fresh_server() as (_, client), running_worker(client, QUEUE):
        await batches.schedule_batch(client, done, members, handlers, task_queue=QUEUE)
        await batches.schedule_batch(
            client, {"id": "stopped", "on_complete": CALLBACK}, waiting, handlers, task_queue=QUEUE
        )
        while (await batches.batch_status(client, "stopped")).started < 2:
            await asyncio.sleep(0.2)
        await batches.cancel_batch(client, "stopped", note="recorded")
        for bid in ("settled", "stopped"):
            await client.get_workflow_handle(batch_rules.workflow_id(bid)).result()
        await client.get_workflow_handle("settled.on_complete").result()
        await asyncio.sleep(1)
        saved = {
            "batch/settled": "batch-settled",
            "batch/stopped": "batch-cancelled",
            "poisoned": "batch-member-dead",
            "settled.on_complete": "batch-callback",
        }
        for workflow_id, name in saved.items():
            history = await client.get_workflow_handle(workflow_id).fetch_history()
            (HISTORIES / f"{prefix}-{name}.json").write_text(history.to_json())


if __name__ == "__main__":
    asyncio.run(record(sys.argv[1] if len(sys.argv) > 1 else "r1b"))
