"""The Web UI reads like a job board: every job carries Temporal user metadata (a static
summary and details set at start, current details kept up to date by the workflow, and
summaries on its timers and activities). Checked on the dev server, through the same APIs the
Web UI uses (describe, the ``__temporal_workflow_metadata`` query, the history)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowHandle

from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.workflows.models import CronReport, DlqLogLine, JobReport, JobStatus
from jobctl.workflows.names import DLQ_WORKFLOW_ID, NOTIFY_DEAD_JOBS, PARK_IN_DLQ, RUN_JOB
from jobctl.workflows.uitext import moment_text
from tests.helpers.poll import eventually
from tests.helpers.temporal import end_singletons, running_worker

pytestmark = pytest.mark.devserver

HANDLERS = load_handlers("tests.handlers").names()
METADATA_QUERY = "__temporal_workflow_metadata"


@pytest.fixture
async def worker(dev_client: Client, task_queue: str) -> AsyncIterator[None]:
    try:
        async with running_worker(dev_client, task_queue):
            yield
    finally:
        await end_singletons(dev_client)


async def schedule(client: Client, queue: str, **spec: Any) -> WorkflowHandle[Any, Any]:
    spec = {"id": f"ui-{uuid.uuid4().hex[:8]}", **spec}
    scheduled = await operations.schedule(client, spec, HANDLERS, task_queue=queue)
    return client.get_workflow_handle(scheduled.job_id)


async def wait_status(client: Client, job_id: str, status: JobStatus) -> JobReport:
    report = await eventually(
        lambda: operations.status(client, job_id),
        lambda report: report.status == status,
        timeout=60,
        what=f"{job_id} {status}",
    )
    assert isinstance(report, JobReport)
    return report


async def current_details(handle: WorkflowHandle[Any, Any]) -> str:
    """What the Web UI shows as the workflow's current details (answered by a worker)."""
    metadata = await handle.query(METADATA_QUERY, result_type=WorkflowMetadata)
    return str(metadata.current_details)


async def summaries(
    client: Client, handle: WorkflowHandle[Any, Any], event_type: EventType.ValueType
) -> list[tuple[HistoryEvent, str | None]]:
    """Each event of ``event_type`` with its user-metadata summary, decoded."""
    found: list[tuple[HistoryEvent, str | None]] = []
    async for event in handle.fetch_history_events():
        if event.event_type != event_type:
            continue
        summary = None
        if event.user_metadata.HasField("summary"):
            [summary] = await client.data_converter.decode([event.user_metadata.summary], [str])
        found.append((event, summary))
    return found


async def activity_summaries(client: Client, handle: WorkflowHandle[Any, Any]) -> dict[str, str]:
    scheduled = await summaries(client, handle, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    return {
        event.activity_task_scheduled_event_attributes.activity_type.name: summary or ""
        for event, summary in scheduled
    }


async def test_one_shot_job_reads_like_a_job_board(
    dev_client: Client, task_queue: str, worker: None
) -> None:
    # Paused and resumed before it is due, so it waits on a timer; then triggered to run now.
    handle = await schedule(
        dev_client,
        task_queue,
        name="send-report",
        handler="demo.sleep",
        payload={"seconds": 0},
        delay="1h",
        dispatch_lead=0,
    )
    await operations.pause(dev_client, handle.id)
    assert (await current_details(handle)).startswith("**paused** · until resumed")
    await operations.resume(dev_client, handle.id)
    scheduled = await current_details(handle)
    await operations.trigger(dev_client, handle.id)
    report = await wait_status(dev_client, handle.id, JobStatus.DONE)
    assert report.run_at is not None
    due = moment_text(report.run_at)

    desc = await handle.describe()
    assert await desc.static_summary() == f"send-report · demo.sleep · at {due}"
    details = await desc.static_details()
    assert details is not None
    assert details.startswith("**send-report** runs handler `demo.sleep`")
    assert f"- job id: `{handle.id}`" in details
    assert f"- schedule: once, at {due}" in details
    assert "- attempts: up to 8 (" in details

    # The status line, then the operator's trail (the pause and resume above, no actor given).
    status_line, trail = scheduled.split("\n\n")
    assert status_line == f"**scheduled** · next run {due} · up to 8 attempt(s)"
    head, paused_line, resumed_line = trail.splitlines()
    assert head == "operator actions (last 2 of 2):"
    assert paused_line.startswith("- pause by `unknown` at ")
    assert resumed_line.startswith("- resume by `unknown` at ")
    done = await current_details(handle)
    assert done.startswith("**done** · succeeded on attempt 1 of 8 · finished ")
    assert "last error" not in done

    timers = await summaries(dev_client, handle, EventType.EVENT_TYPE_TIMER_STARTED)
    assert timers, "the resumed job waited for its run_at on a timer"
    assert [summary for _, summary in timers] == [f"wait until run_at {due}"] * len(timers)
    activities = await activity_summaries(dev_client, handle)
    assert activities == {RUN_JOB: "demo.sleep · round 1 · attempts 1-8 of 8"}


async def test_dead_job_shows_its_last_error(
    dev_client: Client, task_queue: str, worker: None
) -> None:
    handle = await schedule(
        dev_client,
        task_queue,
        name="poison",
        handler="demo.sleep",
        payload={"seconds": 0, "always_fail": True},
        delay=0,
        max_attempts=1,
    )
    report = await wait_status(dev_client, handle.id, JobStatus.DEAD)
    assert report.run_at is not None and report.last_error

    desc = await handle.describe()
    assert await desc.static_summary() == f"poison · demo.sleep · at {moment_text(report.run_at)}"
    details = await desc.static_details()
    assert details is not None and "- attempts: up to 1 (" in details

    dead = await current_details(handle)
    assert dead.startswith("**dead** · 1 of 1 attempt(s) failed · parked ")
    assert "requeue or discard it in the dead-letter queue" in dead
    assert dead.endswith(f"last error: `{report.last_error}`")
    assert "always_fail" in dead

    activities = await activity_summaries(dev_client, handle)
    assert activities == {
        RUN_JOB: "demo.sleep · round 1 · attempt 1 of 1",
        PARK_IN_DLQ: "park in the dead-letter queue after 1 attempt(s)",
    }

    # The dead-letter queue says what it holds, and its alert activity says what it sends.
    dlq = dev_client.get_workflow_handle(DLQ_WORKFLOW_ID)
    async with asyncio.timeout(30):
        while not any(
            line.action == "alerted"
            for line in await dlq.query("log", result_type=list[DlqLogLine])
        ):
            await asyncio.sleep(0.2)
    dlq_details = await current_details(dlq)
    assert dlq_details.startswith("**1 dead job(s)** indexed")
    assert "alerted 1, parked 1" in dlq_details
    assert (await activity_summaries(dev_client, dlq)) == {NOTIFY_DEAD_JOBS: "alert: 1 dead job(s)"}


async def test_cron_and_its_slot_jobs_carry_summaries(
    dev_client: Client, task_queue: str, worker: None
) -> None:
    cron = await schedule(
        dev_client,
        task_queue,
        name="tick",
        handler="demo.sleep",
        payload={"seconds": 0},
        cron="*/2 * * * * *",
        # Slots at their time, each after a timer (whose summary is checked): with the default
        # lead a cron this frequent starts each slot's job ahead and needs no timer.
        dispatch_lead=0,
    )
    try:
        desc = await cron.describe()
        assert await desc.static_summary() == "tick · demo.sleep · cron */2 * * * * * UTC"
        details = await desc.static_details()
        assert details is not None and "- schedule: cron `*/2 * * * * *` in UTC" in details

        async with asyncio.timeout(30):
            while not (slots := (await cron.query("status", result_type=CronReport)).recent_slots):
                await asyncio.sleep(0.2)
        first = slots[-1]
        assert first.job_id is not None
        slot_job = dev_client.get_workflow_handle(first.job_id)
        await wait_status(dev_client, slot_job.id, JobStatus.DONE)
        slot_desc = await slot_job.describe()
        assert await slot_desc.static_summary() == (
            f"tick · demo.sleep · slot {moment_text(first.slot)} of cron */2 * * * * *"
        )
        slot_details = await slot_desc.static_details()
        assert slot_details is not None
        assert f"ran slot {moment_text(first.slot)} of cron job `{cron.id}`" in slot_details

        now = await current_details(cron)
        assert now.startswith("**scheduled** · next slot ")
        assert "last slot " in now
        timers = await summaries(dev_client, cron, EventType.EVENT_TYPE_TIMER_STARTED)
        assert timers and all(
            summary is not None and summary.startswith("next slot ") for _, summary in timers
        )
    finally:
        await cron.cancel()
    async with asyncio.timeout(30):
        while not (await current_details(cron)).startswith("**cancelled** · no further slots"):
            await asyncio.sleep(0.2)


def test_timestamps_are_short_and_name_the_zone() -> None:
    moment = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    assert moment_text(moment) == "2026-12-01 09:00 UTC"
    assert moment_text(moment + timedelta(seconds=5)) == "2026-12-01 09:00:05 UTC"
    assert moment_text(moment, "Europe/Paris") == "2026-12-01 10:00 Europe/Paris (09:00 UTC)"
    assert moment_text(moment + timedelta(hours=12), "Asia/Tokyo") == (
        "2026-12-02 06:00 Asia/Tokyo (2026-12-01 21:00 UTC)"
    )
