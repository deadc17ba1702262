"""What a cron slot and a dead-letter round trip cost Temporal, read from real histories on the
time-skipping server, or the dev server where real time matters (issue 14): a slot's end comes
from the child's completion (no ``slot_finished`` signal, no second timer, no ``JobRunAt``
upsert per slot), and a job reaches a running DLQ by one signal per message, never an activity
plus a signal-with-start."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from jobctl.activities import metrics
from jobctl.starter import dlq, operations
from jobctl.starter.dev import binaries
from jobctl.starter.dev.devserver import free_port
from jobctl.testing import register_search_attributes
from jobctl.workflows.cron_rules import next_run_from_memo
from jobctl.workflows.models import CronReport, CronUpdate, JobStatus
from jobctl.workflows.names import DLQ_WORKFLOW_ID
from jobctl.workflows.names import MEMO_SCHEDULE as CRON_MEMO_KEY
from jobctl.workflows.names import MEMO_SLOT_END as SLOT_END_MEMO_KEY
from tests.helpers.cron import report, settle, slots_longer_than_the_interval, start_cron
from tests.helpers.dlq import POISON_ONCE, wait_for_log
from tests.helpers.jobs import finished, submit, wait_for_status
from tests.helpers.poll import eventually
from tests.helpers.prometheus import parse, scrape, total
from tests.helpers.temporal import end_singletons, running_worker

E = EventType


async def history(client: Client, workflow_id: str) -> WorkflowHistory:
    return await client.get_workflow_handle(workflow_id).fetch_history()


def count(events: WorkflowHistory, kind: int) -> int:
    return sum(1 for e in events.events if e.event_type == kind)


def signals(events: WorkflowHistory) -> list[str]:
    return [
        e.workflow_execution_signaled_event_attributes.signal_name
        for e in events.events
        if e.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    ]


def sent_signals(events: WorkflowHistory) -> list[str]:
    return [
        e.signal_external_workflow_execution_initiated_event_attributes.signal_name
        for e in events.events
        if e.event_type == E.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED
    ]


def activities(events: WorkflowHistory) -> list[str]:
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in events.events
        if e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


def slot_status(report: CronReport, job_id: str | None) -> JobStatus | None:
    """The status the cron's report shows for the slot that ran as ``job_id``."""
    return next((r.status for r in report.recent_slots if r.job_id == job_id), None)


def upserted_keys(events: WorkflowHistory) -> list[list[str]]:
    return [
        sorted(
            e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        )
        for e in events.events
        if e.event_type == E.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
    ]


# -- cron --------------------------------------------------------------------------------


async def test_a_cron_slot_costs_one_timer_and_a_child_start_and_nothing_else(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Before: each slot's child signalled ``slot_finished``, the signal woke the wait and a
    second timer started for the same slot, and ``JobRunAt`` was upserted every slot."""
    async with running_worker(ts_env.client, task_queue):
        cron = await start_cron(ts_env, task_queue, cron="0 * * * *")
        await ts_env.sleep(timedelta(hours=4, minutes=30))
        final = await settle(ts_env, cron.id)
        children = [await history(ts_env.client, r.job_id) for r in final.recent_slots if r.job_id]
        await cron.cancel()
        with pytest.raises(WorkflowFailureError):
            await cron.result()
        parent = await history(ts_env.client, cron.id)
    ran = final.counts["ran"]
    assert ran >= 4 and set(final.counts) == {"ran"}
    assert {r.status for r in final.recent_slots} == {JobStatus.DONE}  # read from completions
    assert count(parent, E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED) == ran
    assert count(parent, E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED) == ran
    # One timer per slot: one fired per slot, one more waits for the next hour.
    assert count(parent, E.EVENT_TYPE_TIMER_STARTED) == ran + 1
    assert count(parent, E.EVENT_TYPE_TIMER_CANCELED) == 0
    assert signals(parent) == []
    # No JobRunAt per slot, no JobStatus=cancelled at the end (the execution status says
    # it), and no patch marker since 1.0: no upsert at all.
    assert upserted_keys(parent) == []
    for child in children:
        assert sent_signals(child) == []
        started = child.events[0].workflow_execution_started_event_attributes
        assert SLOT_END_MEMO_KEY in started.memo.fields


async def test_buffered_slot_starts_when_the_child_ends_without_a_timer(
    dev_client: Client, task_queue: str
) -> None:
    """buffer_one: the slot buffered behind a running child starts at that child's completion
    (no signal), and neither the wait for it nor the buffer costs a timer. (Ended by a cancel,
    not a pause: no update, so nothing here waits on an update's round trip under load.)

    Real time, so on the dev server: the handler sleeps in real time, which a time-skipping
    server would not wait for before expiring its lease."""
    async with running_worker(dev_client, task_queue):
        cron = await start_cron(
            dev_client, task_queue, **slots_longer_than_the_interval(2.5, overlap="buffer_one")
        )
        await asyncio.sleep(9)
        await cron.cancel()
        with pytest.raises(WorkflowFailureError):
            await cron.result()
        final = await report(dev_client, cron.id)
        parent = await history(dev_client, cron.id)
    await end_singletons(dev_client)
    buffered = {r.slot for r in final.recent_slots if r.outcome == "buffered"}
    ran = [r for r in final.recent_slots if r.outcome == "ran"]
    started = buffered & {r.slot for r in ran}
    assert started and len(buffered - started) <= 1  # the last one may wait when cancelled
    # A buffered slot starts once its predecessor has ended: that end came by completion.
    assert JobStatus.DONE in {r.status for r in ran if r.slot in started}
    assert signals(parent) == []
    # No timer at all: every slot is due within 10 s of the end that
    # decides it, so it is buffered (or skipped) at that end and started at once. Before:
    # one timer per slot the cron looked at.
    assert count(parent, E.EVENT_TYPE_TIMER_STARTED) == 0


async def test_continue_as_new_waits_for_the_children_it_tracks(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A tiny event budget: the cron rotates many times and never loses a slot's end."""
    async with running_worker(ts_env.client, task_queue):
        cron = await start_cron(ts_env, task_queue, event_budget=30, cron="0 * * * *")
        for _ in range(4):
            await ts_env.sleep(timedelta(hours=3))
        final = await settle(ts_env, cron.id)
        await cron.cancel()
    assert final.generation >= 3
    assert final.counts == {"ran": 12}
    assert {r.status for r in final.recent_slots} == {JobStatus.DONE}
    assert final.running == []


async def test_a_parked_slot_tells_its_cron_and_after_a_requeue_its_end(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A dead job stays open, so it signals its park (the cron must not count it as running
    for ever), and its end after a requeue reaches the cron's current run after rotations."""
    async with running_worker(ts_env.client, task_queue):
        cron = await start_cron(
            ts_env, task_queue, event_budget=30, cron="0 * * * *", **POISON_ONCE
        )
        await ts_env.sleep(timedelta(hours=1, minutes=5))
        first = (await report(ts_env, cron.id)).recent_slots[0]
        assert first.job_id is not None
        await wait_for_status(ts_env, first.job_id, JobStatus.DEAD)
        await ts_env.sleep(timedelta(hours=3))
        rotated = await settle(ts_env, cron.id)  # dead slots do not count as running
        assert rotated.generation >= 1
        statuses = [r.status for r in rotated.recent_slots]
        assert len(statuses) >= 4 and set(statuses) == {JobStatus.DEAD}
        dead = ts_env.client.get_workflow_handle(first.job_id)
        await dead.signal("requeue")
        await dead.result()  # awaiting a result lets the time-skipping server skip ahead
        await eventually(
            lambda: report(ts_env, cron.id),
            # By job id: recent_slots is newest first, and a test started in an hour's last
            # five minutes has two slots by the time it picks the first (it once polled the
            # wrong one for 30 s).
            lambda now: slot_status(now, first.job_id) == JobStatus.DONE,
            what="the requeued slot's end reported to its cron",
        )
        child = await history(ts_env.client, first.job_id)
        await cron.cancel()
    assert sent_signals(child).count("slot_finished") == 2  # parked, then done


# -- dead-letter queue --------------------------------------------------------------------


async def test_a_running_dlq_gets_one_signal_per_park_and_per_release(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Before: park = activity + signal-with-start, release report = activity +
    signal-with-start (4 actions); now one signal each (2). The first park of all starts the
    DLQ through the signal-with-start activity."""
    client = ts_env.client
    async with running_worker(client, task_queue):
        first = await submit(ts_env, task_queue, delay=0, **POISON_ONCE)
        await wait_for_log(client, "parked", first.id)
        job = await submit(ts_env, task_queue, delay=0, **POISON_ONCE)
        await wait_for_log(client, "parked", job.id)
        await job.signal("requeue")  # the bare path: straight to the job
        done = await finished(ts_env, job)
        await wait_for_log(client, "requeued", job.id)
        first_events = await history(client, first.id)
        events = await history(client, job.id)
        entries = await client.get_workflow_handle(DLQ_WORKFLOW_ID).query("entries")
    assert [a.round for a in done.attempts] == [1, 2]
    # The first park found no DLQ: its failed signal fell back to the activity.
    assert count(first_events, E.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED) == 1
    assert "park_in_dlq" in activities(first_events)
    # The second: signals only, both delivered.
    assert sent_signals(events) == ["park", "job_released"]
    assert count(events, E.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED) == 2
    assert set(activities(events)) == {"run_job"}
    dlq = await history(client, DLQ_WORKFLOW_ID)
    received = signals(dlq)
    assert received.count("park") == 2  # the first one with the DLQ's start
    assert received.count("job_released") == 1
    # The DLQ alerts for each park (two parks far apart: two batches).
    assert activities(dlq) == ["notify_dead_jobs", "notify_dead_jobs"]
    assert [e["job_id"] for e in entries] == [first.id]  # the requeued one left the index


async def test_a_release_with_no_dlq_running_does_not_restart_it(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Before: the release report's signal-with-start started a fresh DLQ just to log it."""
    client = ts_env.client
    async with running_worker(client, task_queue):
        job = await submit(ts_env, task_queue, delay=0, **POISON_ONCE)
        await wait_for_log(client, "parked", job.id)
        dlq = client.get_workflow_handle(DLQ_WORKFLOW_ID)
        await dlq.terminate("test: the DLQ is gone")
        await job.signal("requeue")
        done = await finished(ts_env, job)
        events = await history(client, job.id)
        described = await dlq.describe()
    assert [a.outcome for a in done.attempts] == ["failed", "succeeded"]
    assert "report_to_dlq" not in activities(events)
    # The park found no DLQ (and fell back to the activity); so did the report, which stops.
    assert count(events, E.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED) == 2
    assert activities(events).count("park_in_dlq") == 1
    assert described.status is not None and described.status.name == "TERMINATED"


async def test_jobs_dead_is_counted_once_per_park_by_the_alert(task_queue: str) -> None:
    """The park runs no activity, so ``jobs_dead`` is counted where the alert is raised: by
    the DLQ's alert activity, once per parked entry, never by the attempt too."""
    port = free_port()
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=binaries.test_server(),
        data_converter=pydantic_data_converter,
        runtime=metrics.prometheus_runtime("127.0.0.1", port),
    )
    try:
        await register_search_attributes(env.client)
        async with running_worker(env.client, task_queue):
            jobs = [await submit(env, task_queue, delay=0, **POISON_ONCE) for _ in range(3)]
            for job in jobs:
                await wait_for_log(env.client, "parked", job.id)
            async with asyncio.timeout(30):
                while sum(1 for x in await dlq.audit_log(env.client) if x.action == "alerted") < 1:
                    await asyncio.sleep(0.2)
                while (dead := total(parse(scrape(port)), metrics.DEAD)) < 3:
                    await asyncio.sleep(0.2)
            await asyncio.sleep(1)
            samples = parse(scrape(port))
    finally:
        await env.shutdown()
    assert dead == total(samples, metrics.DEAD) == 3
    assert total(samples, metrics.DEAD, activity_type="notify_dead_jobs") == 3


async def test_update_writes_the_schedule_memo_readers_compute_the_next_run_from(
    dev_client: Client, task_queue: str
) -> None:
    """JobRunAt no longer follows the slots; a reader computes a cron's next run from the
    schedule in its memo (the starter sets it at start; ``update`` keeps it current).

    The update is sent right after the start, so it may reach the cron in its first workflow
    task: it once went unanswered there because the cron decided its state in ``run()``, after
    such a handler (our bug, fixed; tests/test_cron_first_slot.py covers it without a worker)."""
    async with running_worker(dev_client, task_queue):
        cron = await start_cron(dev_client, task_queue, cron="0 * * * *")
        await operations.update_cron(
            dev_client, cron.id, CronUpdate(cron="*/20 * * * *", timezone="Asia/Kolkata")
        )
        memo = await (await cron.describe()).memo()
        before = datetime.now(UTC)
        current = await report(dev_client, cron.id)
        after = datetime.now(UTC)
        await cron.cancel()
    assert memo[CRON_MEMO_KEY] == {"cron": "*/20 * * * *", "timezone": "Asia/Kolkata"}
    # Real time: a slot boundary may pass while the report is read (then `after` gives it).
    expected = {next_run_from_memo(memo[CRON_MEMO_KEY], now) for now in (before, after)}
    assert current.run_at in expected
    assert current.run_at is not None and current.run_at.astimezone(UTC).minute % 20 == 10


@pytest.mark.parametrize(
    "schedule",
    [
        None,
        "0 * * * *",
        {"cron": "0 * * * *"},
        {"cron": "0 0 30 2 *", "timezone": "UTC"},
        {"cron": "0 * * * *", "timezone": "Mars/Olympus"},
    ],
)
def test_a_missing_or_bad_schedule_memo_gives_no_next_run(schedule: object) -> None:
    assert next_run_from_memo(schedule, datetime(2026, 1, 1, tzinfo=UTC)) is None


def test_the_schedule_memo_gives_the_next_slot_in_its_zone() -> None:
    schedule = {"cron": "30 1 * * *", "timezone": "America/New_York"}
    after = datetime(2025, 11, 1, tzinfo=UTC)
    assert next_run_from_memo(schedule, after) == datetime(2025, 11, 1, 5, 30, tzinfo=UTC)
