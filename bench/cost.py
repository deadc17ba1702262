"""Server cost per job: history events and workflow tasks, read from real histories.

    python -m bench.cost [--slots 5]

One fresh dev server (SQLite file, WAL) with our worker and the baseline's. Measured cases:
a successful one-shot (ours and the baseline's timer + activity), a job that fails once and
then succeeds, a dead-letter round trip (parked after its attempts, requeued, succeeds; the
DLQ workflow's own events for the round trip are added), and a cron slot (a cron job every
3 s; the parent's events and every slot's child job, divided by the slots). Prints a table
and writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from datetime import UTC, datetime
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from activities.registry import load_handlers
from bench.baseline import QUEUE as BASELINE_QUEUE
from bench.baseline import BaselineJob
from bench.common import OURS_QUEUE, side, write_result
from starter import dlq, operations
from workflows.models import DLQ_WORKFLOW_ID, JobStatus

TASKS_DONE = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED


async def cost(client: Client, workflow_id: str, run_id: str | None = None) -> tuple[int, int]:
    """(history events, completed workflow tasks) of one run."""
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    return len(history.events), sum(1 for e in history.events if e.event_type == TASKS_DONE)


async def history_length(client: Client, workflow_id: str) -> tuple[int, int]:
    try:
        return await cost(client, workflow_id)
    except Exception:  # not started yet: the DLQ workflow starts with the first park
        return 0, 0


async def wait_status(client: Client, job_id: str, wanted: JobStatus, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while (await operations.status(client, job_id)).status != wanted:
            await asyncio.sleep(0.5)


def row(case: str, kind: str, events: float, tasks: float, jobs: int = 1) -> dict[str, Any]:
    return {"case": case, "side": kind, "events": events / jobs, "tasks": tasks / jobs}


async def measure(slots: int) -> list[dict[str, Any]]:
    rows = []
    async with side() as (server, client, workers, records):
        workers.ours(server, records)
        workers.baseline(server, records)
        handlers = load_handlers("bench.handlers").names()

        async def ours(job_id: str, **fields: Any) -> str:
            spec = {"id": job_id, "name": job_id, "delay": "2s", "dispatch_lead": 1, **fields}
            await operations.schedule(client, spec, handlers, datetime.now(UTC))
            return job_id

        await client.get_workflow_handle(await ours("one-shot", handler="bench.noop")).result()
        rows.append(row("one-shot", "ours", *await cost(client, "one-shot")))

        due = datetime.now(UTC).timestamp() + 2
        base = await client.start_workflow(
            BaselineJob.run, args=["one-shot", due], id="b-one-shot", task_queue=BASELINE_QUEUE
        )
        await base.result()
        rows.append(row("one-shot", "baseline", *await cost(client, "b-one-shot")))

        flaky = {"seconds": 0, "fail_times": 1}
        retried = await ours("retried", handler="demo.sleep", payload=flaky, backoff_base=1)
        await client.get_workflow_handle(retried).result()
        rows.append(row("retried once", "ours", *await cost(client, retried)))

        dlq_before = await history_length(client, DLQ_WORKFLOW_ID)
        poison = {"seconds": 0, "fail_times": 2}
        parked = await ours(
            "round-trip", handler="demo.sleep", payload=poison, max_attempts=2, backoff_base=1
        )
        await wait_status(client, parked, JobStatus.DEAD, timeout=120)
        await dlq.release(client, parked, "requeue")
        await client.get_workflow_handle(parked).result()
        await asyncio.sleep(2)  # the DLQ workflow records the release
        job_events, job_tasks = await cost(client, parked)
        dlq_after = await history_length(client, DLQ_WORKFLOW_ID)
        rows.append(
            row(
                "DLQ round trip",
                "ours",
                job_events + dlq_after[0] - dlq_before[0],
                job_tasks + dlq_after[1] - dlq_before[1],
            )
        )

        cron = {"id": "cron", "name": "cron", "handler": "bench.noop", "cron": "*/3 * * * * *"}
        await operations.schedule(client, cron, handlers, datetime.now(UTC))
        async with asyncio.timeout(slots * 3 + 60):
            while len(children := await list_children(client)) < slots:
                await asyncio.sleep(1)
        await operations.cancel(client, "cron")
        await asyncio.sleep(2)
        events, tasks = await cost(client, "cron")
        finished = 0
        for child in children:
            desc = await client.get_workflow_handle(child).describe()
            if desc.status is not None and desc.status.name == "COMPLETED":
                child_events, child_tasks = await cost(client, child)
                events, tasks, finished = events + child_events, tasks + child_tasks, finished + 1
        rows.append(row("cron slot", "ours", events, tasks, jobs=finished))
    return rows


async def list_children(client: Client) -> list[str]:
    query = 'WorkflowId STARTS_WITH "cron@" AND ExecutionStatus = "Completed"'
    return [wf.id async for wf in client.list_workflows(query)]


async def main(slots: int) -> None:
    os.environ["JOBS_TASK_QUEUE"] = OURS_QUEUE
    rows = await measure(slots)
    print(f"{'case':16} {'side':9} {'events':>7} {'wf tasks':>9}")
    for r in rows:
        print(f"{r['case']:16} {r['side']:9} {r['events']:7.1f} {r['tasks']:9.1f}")
    path = write_result("cost", {"rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--slots", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.slots))
