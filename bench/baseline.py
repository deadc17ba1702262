"""The baseline the benchmarks compare with: raw Temporal, as one would write it first.

A workflow sleeps with a timer until run_at, then runs one no-op activity; the worker uses SDK
defaults. ``python -m bench.baseline worker`` runs that worker (TEMPORAL_ADDRESS, queue
``baseline``).
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from bench.handlers import note_start

QUEUE = "baseline"


@activity.defn(name="baseline_noop")
async def baseline_noop(key: str, run_at: float) -> None:
    note_start(key, run_at, activity.info().attempt)


@workflow.defn(name="BaselineJob")
class BaselineJob:
    @workflow.run
    async def run(self, key: str, run_at: float) -> None:
        delay = run_at - workflow.now().timestamp()
        if delay > 0:
            await workflow.sleep(delay)
        await workflow.execute_activity(
            baseline_noop, args=[key, run_at], start_to_close_timeout=timedelta(minutes=10)
        )


def baseline_worker(client: Client) -> Worker:
    """The baseline's worker on ``client``: SDK defaults, its queue, its workflow and activity."""
    return Worker(client, task_queue=QUEUE, workflows=[BaselineJob], activities=[baseline_noop])


async def serve() -> None:
    client = await Client.connect(os.environ.get("TEMPORAL_ADDRESS", "localhost:7233"))
    worker = baseline_worker(client)
    print("baseline worker polling", flush=True)
    await worker.run()


if __name__ == "__main__":
    if sys.argv[1:] != ["worker"]:
        sys.exit("usage: python -m bench.baseline worker")
    asyncio.run(serve())
