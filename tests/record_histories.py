"""Record the workflow histories the replay tests check (``tests/histories/*.json``).

    python -m tests.record_histories [PREFIX]

Runs each scenario on a fresh dev server with an in-process worker and saves every workflow's
history, named ``PREFIX-...`` (default ``r1``). Never re-record an existing prefix: the point
of the committed files is that a code change which would break workflows already running
fails CI (``tests/test_replay.py``). ``r1`` is the one generation of 1.0.0; a change to
workflow code follows docs/ARCHITECTURE.md, "Changing workflow code" (a patch, a new
generation under a new prefix, the old ones kept).
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowHandle

from bench.common import fresh_server
from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.workflows.cron_workflow import CronJobWorkflow
from jobctl.workflows.models import (
    CronInput,
    CronReport,
    JobStatus,
    ReleaseRequest,
    WorkerHandlers,
    parse_spec,
)
from jobctl.workflows.names import DLQ_WORKFLOW_ID, REGISTRY_WORKFLOW_ID
from jobctl.workflows.registry_workflow import HandlerRegistryWorkflow
from tests.helpers.cron import report
from tests.helpers.poll import eventually
from tests.helpers.temporal import running_worker

HISTORIES = Path(__file__).resolve().parent / "histories"
QUEUE = "record-histories"


async def wait_status(client: Client, job_id: str, status: JobStatus) -> None:
    async with asyncio.timeout(60):
        while (await operations.status(client, job_id)).status != status:
            await asyncio.sleep(0.2)


async def wait_backoff(client: Client, job_id: str) -> None:
    """Until the job's first attempt failed and its retry waits out the backoff."""
    scheduled = PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
    async with asyncio.timeout(60):
        while True:
            desc = await client.get_workflow_handle(job_id).describe()
            pending = desc.raw_description.pending_activities
            if pending and pending[0].attempt == 2 and pending[0].state == scheduled:
                return
            await asyncio.sleep(0.2)


async def save(handle: WorkflowHandle[Any, Any], name: str) -> None:
    history = await handle.fetch_history()
    (HISTORIES / f"{name}.json").write_text(history.to_json())
    print(f"saved {name}: {len(history.events)} events")


async def record_jobs(client: Client, prefix: str) -> list[str]:
    """One-shots through retries, controls, pre-dispatch, cancels and the DLQ; their ids."""
    handlers = load_handlers().names()
    schedule = operations.schedule

    retried = await schedule(
        client,
        {
            "id": f"{prefix}-retries",
            "name": "retries",
            "handler": "demo.sleep",
            "payload": {"seconds": 0, "fail_times": 2},
            "delay": 0,
            "backoff_base": 1,
        },
        handlers,
    )
    controlled = await schedule(
        client,
        {"id": f"{prefix}-controls", "name": "controls", "handler": "log", "delay": "1h"},
        handlers,
    )
    await operations.pause(client, controlled.job_id, note="hold", actor="recorder")
    await operations.resume(client, controlled.job_id, note="go", actor="recorder")
    await operations.trigger(client, controlled.job_id, note="now", actor="recorder")
    dispatched = await schedule(
        client,
        {
            "id": f"{prefix}-dispatched",
            "name": "dispatched",
            "handler": "log",
            "delay": "4s",
            "dispatch_lead": 3,
        },
        handlers,
    )
    cancelled = await schedule(
        client,
        {
            "id": f"{prefix}-cancelled",
            "name": "cancel",
            "handler": "demo.sleep",
            "payload": {"seconds": 30},
            "delay": 0,
            "lease": 2,
        },
        handlers,
    )
    await wait_status(client, cancelled.job_id, JobStatus.RUNNING)
    await operations.cancel(client, cancelled.job_id, note="stop", actor="recorder")
    dead = await schedule(
        client,
        {
            "id": f"{prefix}-dlq",
            "name": "poison",
            "handler": "demo.sleep",
            "payload": {"seconds": 0, "fail_times": 1, "permanent": True},
            "delay": 0,
        },
        handlers,
    )
    backed_off = await schedule(
        client,
        {
            "id": f"{prefix}-cancelled-backoff",
            "name": "cancel in backoff",
            "handler": "demo.sleep",
            "payload": {"seconds": 0, "fail_times": 5},
            "delay": 0,
            "backoff_base": 600,
            "backoff_max": 600,
        },
        handlers,
    )
    await wait_backoff(client, backed_off.job_id)
    await operations.cancel(client, backed_off.job_id, note="stop", actor="recorder")
    await wait_status(client, dead.job_id, JobStatus.DEAD)
    request = ReleaseRequest(job_id=dead.job_id, actor="recorder", note="fixed")
    await client.get_workflow_handle(DLQ_WORKFLOW_ID).signal("requeue", request)
    for job_id in (retried.job_id, controlled.job_id, dead.job_id, dispatched.job_id):
        await wait_status(client, job_id, JobStatus.DONE)
    await wait_status(client, cancelled.job_id, JobStatus.CANCELLED)
    await wait_status(client, backed_off.job_id, JobStatus.CANCELLED)
    jobs = (retried, controlled, cancelled, dead, dispatched, backed_off)
    return [job.job_id for job in jobs]


async def record(client: Client, prefix: str) -> None:
    job_ids = await record_jobs(client, prefix)
    handlers = load_handlers().names()
    now = datetime.now(UTC)
    spec = parse_spec(
        {"name": "every second", "handler": "log", "cron": "* * * * * *", "overlap": "allow_all"},
        now,
        new_id=f"{prefix}-cron",
    )
    cron = await client.start_workflow(
        CronJobWorkflow.run, CronInput(spec=spec, event_budget=80), id=spec.id, task_queue=QUEUE
    )
    async with asyncio.timeout(60):
        while True:
            status = await operations.status(client, spec.id)
            assert isinstance(status, CronReport)
            if status.generation >= 2:
                break
            await asyncio.sleep(0.5)
    await operations.pause(client, spec.id, note="enough", actor="recorder")
    skipping = await skip_cron(client, prefix)
    await client.start_workflow(
        HandlerRegistryWorkflow.run,
        [],
        id=REGISTRY_WORKFLOW_ID,
        task_queue=QUEUE,
        start_signal="publish",
        start_signal_args=[WorkerHandlers(worker="recorder", handlers=handlers, published_at=now)],
    )
    await asyncio.sleep(1)

    for job_id in job_ids:
        await save(client.get_workflow_handle(job_id), job_id)
    await save(client.get_workflow_handle(DLQ_WORKFLOW_ID), f"{prefix}-dead-letter-queue")
    await save(client.get_workflow_handle(REGISTRY_WORKFLOW_ID), f"{prefix}-handler-registry")
    info = (await cron.describe()).raw_description.workflow_execution_info
    first_run = client.get_workflow_handle(spec.id, run_id=info.first_run_id)
    await save(first_run, f"{prefix}-cron-run1")
    await save(cron, f"{prefix}-cron-current")
    async for child in client.list_workflows(f'WorkflowId STARTS_WITH "{spec.id}@"', limit=1):
        await save(client.get_workflow_handle(child.id), f"{prefix}-cron-slot")
    await save(client.get_workflow_handle(skipping), f"{prefix}-cron-skip")


async def skip_cron(client: Client, prefix: str) -> str:
    """A ``skip`` cron whose 3 s slots outlast its 2 s interval (from v4: the slot due during a
    run is decided at that run's end), paused once a slot was skipped and its slots ended."""
    cron_id = f"{prefix}-cron-skip"
    spec = {
        "id": cron_id,
        "name": "skip",
        "handler": "demo.sleep",
        "payload": {"seconds": 3},
        "cron": "*/2 * * * * *",
        "lease": 2,
    }
    await operations.schedule(client, spec, load_handlers().names())

    await eventually(
        lambda: report(client, cron_id),
        lambda c: bool(c.counts.get("skipped")) and c.counts.get("ran", 0) >= 2,
        timeout=60,
        what=f"{cron_id} skipped a slot",
    )
    await operations.pause(client, cron_id)
    await eventually(
        lambda: report(client, cron_id), lambda c: not c.running, timeout=60, what="settled"
    )
    return cron_id


async def main(prefix: str) -> None:
    if any(HISTORIES.glob(f"{prefix}-*.json")):
        raise SystemExit(f"histories named {prefix}-* exist already: record under a new prefix")
    HISTORIES.mkdir(exist_ok=True)
    os.environ["JOBS_TASK_QUEUE"] = QUEUE
    async with fresh_server() as (_, client), running_worker(client, QUEUE):
        await record(client, prefix)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "r1"))
