"""Shared checks for the hostile-input tests: nothing started, and a normal job still runs.

``started_count`` reads the visibility store of the dev server. Visibility is eventually
consistent: a workflow a fixture started a moment ago may show up between two counts, and
twice a run failed so ("1 workflow(s) started by hostile input": the fixture's own target).
So a count is also a moment (:class:`Started`), and :func:`assert_nothing_started` counts the
jobs whose start time is after it: anything a fixture started before is not the request's.
``normal_job_completes`` schedules a ``log`` job due now through the operations library and
waits, by the server's answer, for ``done``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from temporalio.client import Client

from jobctl.starter import operations
from jobctl.workflows import names
from tests.helpers.poll import eventually

# A normal job must finish this long after its run_at (the contract: 10 s).
NORMAL_JOB_DEADLINE = 10.0


# What a request can start: jobs and crons. The singletons (DLQ, handler registry) start when
# a worker publishes or a job parks; counting them made a check fail once when a worker's
# registry start became visible between the two counts (visibility is eventually consistent).
JOB_TYPES = f'WorkflowType IN ("{names.JOB_WORKFLOW}", "{names.CRON_WORKFLOW}")'


class Started(int):
    """A count of started workflows, and when it was taken (this machine's clock, which is
    the test server's)."""

    taken_at: datetime


def _query(task_queue: str | None, every_type: bool, since: datetime | None = None) -> str:
    clauses = [] if every_type else [JOB_TYPES]
    if task_queue:
        clauses.append(f'TaskQueue = "{task_queue}"')
    if since is not None:
        clauses.append(f'StartTime >= "{since.isoformat()}"')
    return " AND ".join(clauses)


async def started_count(
    client: Client, task_queue: str | None = None, every_type: bool = False
) -> Started:
    """Jobs and crons the server knows (on ``task_queue`` when given); ``every_type``:
    workflows of any type (for tests that start the singletons themselves)."""
    taken_at = datetime.now(UTC)
    count = Started((await client.count_workflows(_query(task_queue, every_type))).count)
    count.taken_at = taken_at
    return count


async def started_since(
    client: Client, before: Started, task_queue: str | None = None, every_type: bool = False
) -> int:
    """Jobs and crons (``every_type``: any workflow) started after ``before`` was counted."""
    query = _query(task_queue, every_type, before.taken_at)
    return (await client.count_workflows(query)).count


async def assert_nothing_started(
    client: Client, before: Started, task_queue: str | None = None
) -> None:
    """No job or cron started since ``before`` was counted."""
    after = await started_since(client, before, task_queue)
    assert after == 0, f"{after} workflow(s) started by hostile input"


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
