"""A worker whose event loop a handler blocks takes no more attempts than the polls it had out
(activities/attempt_slots.py).

The SDK polls in its Rust core, outside the loop. With fixed slots per handler worker, a
process whose loop was blocked kept taking attempts at full speed; when the loop watchdog
then ended it (or the handler did), every one of them was lost and counted against its job
as an attempt lost in its handler (the poison drill saw an innocent job lose all of its
attempts so). Its slots are now reserved on the loop: a blocked loop reserves none.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client

from jobctl.activities.job_worker import HANDLER_POLLERS_MAX
from jobctl.starter import operations
from jobctl.workflows.models import JobReport, JobStatus
from tests.helpers.poll import eventually
from tests.helpers.processes import Workers

pytestmark = [pytest.mark.devserver, pytest.mark.timeout(240)]

BLOCK = 15.0  # seconds the blocking handler holds the loop
JOBS = 40  # due while it does: more than the polls a worker has out on a queue (10 at most)


async def schedule(client: Client, task_queue: str, handler: str, payload: dict[str, Any]) -> str:
    job_id = f"{handler.replace('.', '-')}-{uuid.uuid4().hex[:8]}"
    spec = {"id": job_id, "name": "stall", "handler": handler, "payload": payload, "delay": 0}
    await operations.schedule(client, spec, handlers={handler}, task_queue=task_queue)
    return job_id


async def started_by(client: Client, job_id: str) -> str | None:
    """The worker the job's attempt is started on, if the server has handed it to one."""
    desc = await client.get_workflow_handle(job_id).describe()
    for pending in desc.raw_description.pending_activities:
        if pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED:
            return pending.last_worker_identity
    return None


async def test_a_worker_with_a_blocked_loop_stops_taking_attempts(
    dev_client: Client, task_queue: str, workers: Workers
) -> None:
    # Workflows run elsewhere, so the jobs reach their handler queues while the loop is blocked.
    workers.start(JOBS_WORKER_ROLE="workflows")
    stalled = workers.start(
        JOBS_WORKER_ROLE="activities",
        JOBS_LOOP_STALL_LIMIT="0",  # no watchdog: the worker lives on after the block
        JOBS_MAX_CONCURRENT_JOBS="5",
        JOBS_PREFETCH="100",  # room for every job: only the blocked loop may hold them back
    )
    identity = workers.identity(stalled)
    blocker = await schedule(
        dev_client, task_queue, "test.poison_async", {"how": "block_loop", "seconds": BLOCK}
    )
    await eventually(
        lambda: started_by(dev_client, blocker),
        lambda worker: worker == identity,
        timeout=30,
        what="the blocking attempt started",
    )
    await asyncio.sleep(1.0)  # its handler has blocked the loop by now
    ids = [await schedule(dev_client, task_queue, "log", {"n": n}) for n in range(JOBS)]
    # Every attempt is due; give the server time to hand them all out (it took them all
    # within a second or two before the fix), while the loop is still blocked.
    await asyncio.sleep(5.0)
    held = [await started_by(dev_client, job_id) for job_id in ids]
    taken = sum(worker == identity for worker in held)
    # At most one attempt per poll out on the log handler's queue when the loop blocked, and
    # one more for the slot its poller had reserved for its next poll.
    assert taken <= HANDLER_POLLERS_MAX + 1, (taken, held)
    assert await started_by(dev_client, blocker) == identity  # still blocked meanwhile
    # Once the loop turns again, every job runs, the blocker included: nothing was lost.
    for job_id in [blocker, *ids]:
        report = await done(dev_client, job_id)
        assert [a.outcome for a in report.attempts] == ["succeeded"], report.attempts


async def done(client: Client, job_id: str) -> JobReport:
    async def status() -> JobReport:
        report = await operations.status(client, job_id)
        assert isinstance(report, JobReport)
        return report

    return await eventually(
        status, lambda r: r.status == JobStatus.DONE, timeout=BLOCK + 60, what=f"{job_id} done"
    )
