"""A job costs Temporal no more work than its facts need (issue 14), on a dev server of this
module's own that serves its metrics (heartbeats are counted by the server, not by us):

* a one-shot no-op job: no heartbeat when it starts at once or reaches its worker less than
  3 s before run_at, one (its start record) when it waited there longer; no JobStatus upsert
  (its visibility row still says ``scheduled``; ExecutionStatus and the job's own report say
  done), at most 13 history events;
* the statuses listings filter on are still written: paused (and back to scheduled), dead,
  scheduled again once a requeue starts the next round, discarded;
* a cancel during a retry backoff keeps the attempts the job made (it used to end with
  ``attempts: []``), and the cancelled job's row carries no ``cancelled``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError

from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.workflows.models import JOB_STATUS, JobReport, JobStatus
from tests.helpers.metered import Lab, metered_lab
from tests.helpers.poll import eventually
from tests.helpers.temporal import assert_replays

pytestmark = pytest.mark.devserver
HANDLERS = load_handlers("tests.handlers").names()
UPSERT = EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
ACTIVITY_SCHEDULED = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
HEARTBEATS = 'operation="RecordActivityTaskHeartbeat",service_name="frontend"'


@pytest.fixture(scope="module")
async def lab() -> AsyncIterator[Lab]:
    async with metered_lab("lean") as lab:
        yield lab


async def submit(lab: Lab, **fields: Any) -> str:
    job_id = f"lean-{uuid.uuid4().hex[:8]}"
    spec = {"id": job_id, "name": job_id, "delay": 0, "dispatch_lead": 0, **fields}
    await operations.schedule(lab.client, spec, HANDLERS, datetime.now(UTC), task_queue=lab.queue)
    return job_id


async def report(client: Client, job_id: str) -> JobReport:
    """The job's own report (its ``status`` query)."""
    result: JobReport = await client.get_workflow_handle(job_id).query(
        "status", result_type=JobReport
    )
    return result


async def listed(client: Client, job_id: str, where: str, timeout: float = 20) -> None:
    """Until visibility lists ``job_id`` under ``where`` (visibility lags a little)."""
    query = f"WorkflowId = '{job_id}' AND {where}"
    async with asyncio.timeout(timeout):
        while not [wf async for wf in client.list_workflows(query)]:
            await asyncio.sleep(0.2)


async def job_status_upserts(client: Client, job_id: str) -> list[str]:
    """The JobStatus values the job's history upserted (TemporalChangeVersion aside)."""
    history = await client.get_workflow_handle(job_id).fetch_history()
    values = []
    for event in history.events:
        if event.event_type == UPSERT:
            fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes
            if JOB_STATUS.name in fields.indexed_fields:
                values.append(json.loads(fields.indexed_fields[JOB_STATUS.name].data))
    return values


async def replays(client: Client, job_id: str) -> None:
    await assert_replays(await client.get_workflow_handle(job_id).fetch_history())


@pytest.mark.parametrize(
    ("timing", "heartbeats"),
    [
        ({"delay": 0, "dispatch_lead": 0}, 0),
        ({"delay": "4s", "dispatch_lead": 2}, 0),  # begun after its check's earliest moment
        ({"delay": "5s", "dispatch_lead": 4}, 1),
    ],
    ids=["at-once", "dispatched-within-its-check", "dispatched-early"],
)
async def test_a_one_shot_costs_its_start_one_attempt_and_a_start_record_if_it_waited(
    lab: Lab, timing: dict[str, Any], heartbeats: int
) -> None:
    before = await lab.server.heartbeats()
    job_id = await submit(lab, handler="log", **timing)
    await lab.client.get_workflow_handle(job_id).result()
    await asyncio.sleep(1)  # a heartbeat still on its way would show by now
    assert await lab.server.heartbeats() - before == heartbeats
    assert await job_status_upserts(lab.client, job_id) == []
    history = await lab.client.get_workflow_handle(job_id).fetch_history()
    assert len(history.events) <= 13, [EventType.Name(e.event_type) for e in history.events]
    if timing["dispatch_lead"]:  # it did reach its worker well before run_at, and waited there
        job = await report(lab.client, job_id)
        [scheduled] = [e for e in history.events if e.event_type == ACTIVITY_SCHEDULED]
        assert job.run_at is not None
        assert (job.run_at - scheduled.event_time.ToDatetime(UTC)).total_seconds() >= 1
    # Visibility keeps what it was started with; Temporal and the job itself say done.
    await listed(lab.client, job_id, "ExecutionStatus = 'Completed' AND JobStatus = 'scheduled'")
    assert (await report(lab.client, job_id)).status == JobStatus.DONE
    await replays(lab.client, job_id)


async def test_pause_resume_dead_requeue_and_discard_are_written_for_listings(lab: Lab) -> None:
    waiting = await submit(lab, handler="log", delay="1h")
    await operations.pause(lab.client, waiting)
    await listed(lab.client, waiting, "JobStatus = 'paused'")
    await operations.resume(lab.client, waiting)
    await listed(lab.client, waiting, "JobStatus = 'scheduled'")
    assert await job_status_upserts(lab.client, waiting) == ["paused", "scheduled"]

    poison = {"seconds": 0, "fail_times": 1, "permanent": True}
    requeued = await submit(lab, handler="demo.sleep", payload=poison)
    await listed(lab.client, requeued, "JobStatus = 'dead'")
    await lab.client.get_workflow_handle(requeued).signal("requeue")
    await lab.client.get_workflow_handle(requeued).result()
    await listed(lab.client, requeued, "ExecutionStatus = 'Completed' AND JobStatus = 'scheduled'")
    assert await job_status_upserts(lab.client, requeued) == ["dead", "scheduled"]
    assert (await report(lab.client, requeued)).status == JobStatus.DONE

    discarded = await submit(lab, handler="demo.sleep", payload=poison)
    await listed(lab.client, discarded, "JobStatus = 'dead'")
    await lab.client.get_workflow_handle(discarded).signal("discard")
    with pytest.raises(WorkflowFailureError):
        await lab.client.get_workflow_handle(discarded).result()
    await listed(lab.client, discarded, "ExecutionStatus = 'Failed' AND JobStatus = 'discarded'")
    assert await job_status_upserts(lab.client, discarded) == ["dead", "discarded"]
    for job_id in (requeued, discarded):
        await replays(lab.client, job_id)


async def in_backoff(client: Client, job_id: str, timeout: float = 30) -> None:
    """Until the job's first attempt has failed and its retry waits out the backoff."""
    scheduled = PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
    await eventually(
        client.get_workflow_handle(job_id).describe,
        lambda desc: (
            (pending := desc.raw_description.pending_activities)
            and pending[0].attempt == 2
            and pending[0].state == scheduled
        ),
        timeout=timeout,
        what=f"{job_id} waiting out its retry backoff",
    )


async def test_a_cancel_during_the_retry_backoff_keeps_the_attempts(lab: Lab) -> None:
    job_id = await submit(
        lab,
        handler="demo.sleep",
        payload={"seconds": 0, "fail_times": 5},
        max_attempts=5,
        backoff_base=600,
        backoff_max=600,
    )
    await in_backoff(lab.client, job_id)
    await operations.cancel(lab.client, job_id, note="enough")
    handle = lab.client.get_workflow_handle(job_id)
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
    job = await report(lab.client, job_id)
    assert job.status == JobStatus.CANCELLED
    assert [(a.attempt, a.outcome) for a in job.attempts] == [(1, "failed")]
    assert job.attempts[0].error_type == "DemoFailure"
    assert await job_status_upserts(lab.client, job_id) == []
    await listed(lab.client, job_id, "ExecutionStatus = 'Canceled' AND JobStatus = 'scheduled'")
    await replays(lab.client, job_id)
