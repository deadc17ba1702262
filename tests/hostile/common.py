"""Shared checks for the hostile-input tests: nothing started, and a normal job still runs.

``started_count`` reads the visibility store of the dev server (in-memory SQLite: a start is
visible as soon as the start call returns). ``normal_job_completes`` schedules a ``log`` job
due now through the operations library and waits, by the server's answer, for ``done``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from temporalio.client import Client

from starter import operations
from tests.helpers.poll import eventually
from workflows import names

# A normal job must finish this long after its run_at (the contract: 10 s).
NORMAL_JOB_DEADLINE = 10.0


# What a request can start: jobs and crons. The singletons (DLQ, handler registry) start when
# a worker publishes or a job parks; counting them made a check fail once when a worker's
# registry start became visible between the two counts (visibility is eventually consistent).
JOB_TYPES = f'WorkflowType IN ("{names.JOB_WORKFLOW}", "{names.CRON_WORKFLOW}")'


async def started_count(
    client: Client, task_queue: str | None = None, every_type: bool = False
) -> int:
    """Jobs and crons the server knows (on ``task_queue`` when given); ``every_type``:
    workflows of any type (for tests that start the singletons themselves)."""
    clauses = ([] if every_type else [JOB_TYPES]) + (
        [f'TaskQueue = "{task_queue}"'] if task_queue else []
    )
    return (await client.count_workflows(" AND ".join(clauses))).count


async def assert_nothing_started(
    client: Client, before: int, task_queue: str | None = None
) -> None:
    after = await started_count(client, task_queue)
    assert after == before, f"{after - before} workflow(s) started by hostile input"


async def normal_job_completes(client: Client, task_queue: str) -> float:
    """Schedule a ``log`` job due now on ``task_queue``; return seconds from run_at to done."""
    job_id = f"normal-{uuid.uuid4().hex[:10]}"
    now = datetime.now(UTC)
    spec = {"id": job_id, "name": "normal", "handler": "log", "payload": {"ok": 1}, "delay": 0}
    await operations.schedule(client, spec, handlers={"log"}, now=now, task_queue=task_queue)
    await eventually(
        lambda: operations.status(client, job_id),
        lambda report: report.status == "done",
        timeout=NORMAL_JOB_DEADLINE,
        what=f"normal job {job_id} done {NORMAL_JOB_DEADLINE}s after run_at",
    )
    return (datetime.now(UTC) - now).total_seconds()
