"""A cron's waits that need no timer (patch ``cron-lean-waits``), on the dev server in real
time: a slot's job starts up to 10 s before the slot's time when no slot runs (and then waits
in its worker like any pre-dispatched job), and under ``skip`` a slot that comes due while
another runs is decided when that one ends. A frequent cron thus costs no timer at all: before,
each slot cost one (the cron slept until the slot, then started its job)."""

from __future__ import annotations

import asyncio
import functools
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHistory

from jobctl.starter import operations
from jobctl.starter.errors import InvalidTransition
from jobctl.workflows import cronmath, names
from jobctl.workflows.models import CONTROL_CUTOFF, CronReport, CronUpdate, JobReport, JobStatus
from tests.helpers.cron import report, settle, slots_longer_than_the_interval, start_cron
from tests.helpers.poll import eventually
from tests.helpers.temporal import assert_replays, end_singletons, running_worker

E = EventType
AHEAD = CONTROL_CUTOFF  # cron_rules.start_ahead with the default dispatch_lead (30 s)


async def snapshot(client: Client, cron_id: str) -> tuple[CronReport, datetime]:
    """The cron's report and when it came back."""
    return await report(client, cron_id), datetime.now(UTC)


def timers(history: WorkflowHistory) -> int:
    return sum(1 for e in history.events if e.event_type == E.EVENT_TYPE_TIMER_STARTED)


def ran(final: CronReport) -> list[tuple[datetime, str]]:
    return sorted((r.slot, r.job_id) for r in final.recent_slots if r.outcome == "ran" and r.job_id)


async def started_at(client: Client, job_id: str) -> datetime:
    history = await client.get_workflow_handle(job_id).fetch_history()
    return history.events[0].event_time.ToDatetime(tzinfo=UTC)


async def run_cron(client: Client, task_queue: str, seconds: float, **spec: Any) -> CronReport:
    """Start a cron, let it run, pause it, and return its report once its slots settled."""
    cron = await start_cron(client, task_queue, **spec)
    await asyncio.sleep(seconds)
    return await stop(client, cron.id)


async def stop(client: Client, cron_id: str) -> CronReport:
    """Pause (a job started ahead still runs), settle, then cancel: a cancelled cron would
    not hear its last slot end."""
    await operations.pause(client, cron_id)
    final = await settle(client, cron_id)
    handle = client.get_workflow_handle(cron_id)
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    return final


@pytest.mark.devserver
async def test_a_frequent_crons_slots_start_ahead_and_cost_no_timer(
    dev_client: Client, task_queue: str
) -> None:
    async with running_worker(dev_client, task_queue):
        cron = await start_cron(dev_client, task_queue, cron="*/3 * * * * *")

        # While a slot's job waits for its time, the cron shows that slot as its next one.
        waiting, seen_at = await eventually(
            lambda: snapshot(dev_client, cron.id),
            lambda seen: seen[0].counts.get("ran", 0) >= 2 and bool(ahead_slots(*seen)),
            what="a slot started ahead",
            interval=0.2,
        )
        await asyncio.sleep(6)
        final = await stop(dev_client, cron.id)
        history = await cron.fetch_history()
        slots = ran(final)
        starts = [await started_at(dev_client, job_id) for _, job_id in slots]
        reports = [
            await dev_client.get_workflow_handle(job_id, result_type=JobReport).result()
            for _, job_id in slots
        ]
    await end_singletons(dev_client)
    assert len(slots) >= 4
    assert timers(history) == 0, "every slot started when its predecessor ended"
    # Each job (the first aside: the cron's first slot was due within its first seconds)
    # started before its slot, by at most the 10 s window, and ran its handler at the slot.
    early = [slot - start for (slot, _), start in zip(slots, starts, strict=True)]
    assert all(timedelta(0) < lead <= AHEAD + timedelta(seconds=1) for lead in early[1:]), early
    for (slot, _), job in zip(slots, reports, strict=True):
        assert job.status == JobStatus.DONE and job.run_at == slot
        assert all(a.started_at >= slot for a in job.attempts), (slot, job.attempts)
    # The started slot is the one shown next, not the slot after it.
    assert waiting.run_at == min(ahead_slots(waiting, seen_at))
    await assert_replays(history)


def ahead_slots(current: CronReport, seen_at: datetime) -> list[datetime]:
    """The slots of running jobs (their ids end in the slot) clearly ahead of ``seen_at``."""
    soon = seen_at + timedelta(seconds=0.5)
    return [slot for slot in running(current) if slot > soon]


@pytest.mark.devserver
async def test_skip_decides_the_slots_due_during_a_run_at_its_end_without_a_timer(
    dev_client: Client, task_queue: str
) -> None:
    """Each slot's job runs 3.5 s on a cron every 2 s: the slot due during a run is skipped
    (recorded at that run's end), the next one after the end runs, and no run overlaps."""
    async with running_worker(dev_client, task_queue):
        final = await run_cron(dev_client, task_queue, 9, **slots_longer_than_the_interval(3.5))
        history = await dev_client.get_workflow_handle(final.job_id).fetch_history()
        spans = []
        for slot, job_id in ran(final):
            job = await dev_client.get_workflow_handle(job_id, result_type=JobReport).result()
            end = max(a.ended_at for a in job.attempts if a.ended_at is not None)
            spans.append((slot, end))
    await end_singletons(dev_client)
    skipped = [r.slot for r in final.recent_slots if r.outcome == "skipped"]
    assert len(spans) >= 2 and skipped
    assert timers(history) == 0
    for slot in skipped:  # skipped: some run was under way at the slot's time
        assert any(start < slot <= end for start, end in spans), (slot, spans)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end - timedelta(seconds=0.5), spans  # ran: none was (clock margin)
    await assert_replays(history)


@pytest.mark.devserver
async def test_an_update_during_a_wait_for_the_running_slot_leaves_the_cron_working(
    dev_client: Client, task_queue: str
) -> None:
    """The cron waits for its running slot's end (skip); an update moves the next slot far
    away meanwhile. When the slot ends the cron must wait for the new slot, not spin: it once
    would have ended each workflow task at once, again and again (a deadlock, failing every
    task)."""
    async with running_worker(dev_client, task_queue):
        cron = await start_cron(dev_client, task_queue, **slots_longer_than_the_interval(4))
        busy, _ = await eventually(  # a slot's handler runs past the next slot's time
            lambda: snapshot(dev_client, cron.id),
            lambda seen: any(s < seen[1] - timedelta(seconds=2.5) for s in running(seen[0])),
            what="a slot running past the next one's time",
            interval=0.2,
        )
        await operations.update_cron(dev_client, cron.id, CronUpdate(cron="0 0 1 1 *"))
        ended = await eventually(
            lambda: report(dev_client, cron.id),
            lambda current: not current.running,
            what="the running slot's end",
            timeout=30,
        )
        await asyncio.sleep(1)  # a few workflow tasks after that end
        later = await report(dev_client, cron.id)
        await cron.cancel()
        history = await cron.fetch_history()
    await end_singletons(dev_client)
    failed = [e for e in history.events if e.event_type == E.EVENT_TYPE_WORKFLOW_TASK_FAILED]
    assert failed == []
    assert busy.running and ended.run_at == later.run_at
    assert later.run_at is not None and (later.run_at.month, later.run_at.day) == (1, 1)
    assert later.counts.get("skipped", 0) >= 1  # the slot due during the run, at its end
    await assert_replays(history)


def running(current: CronReport) -> list[datetime]:
    return [datetime.fromisoformat(job_id.rsplit("@", 1)[1]) for job_id in current.running]


@pytest.mark.devserver
async def test_a_slot_started_ahead_runs_through_a_pause_and_its_own_job_still_cancels(
    dev_client: Client, task_queue: str
) -> None:
    """The README's promise: a pause of the cron reaches the slots not yet started; the one
    whose job already waits for its time runs; and that job, within its last 10 s, refuses
    pause but still cancels. Two crons: one's waiting slot is left alone, the other's is
    cancelled."""
    async with running_worker(dev_client, task_queue):
        crons = [await start_cron(dev_client, task_queue, cron="*/3 * * * * *") for _ in "ab"]
        waiting = {}
        for cron in crons:
            current, seen_at = await eventually(
                functools.partial(snapshot, dev_client, cron.id),
                lambda seen: bool(ahead_slots(*seen)),
                what="a slot started ahead",
                interval=0.1,
            )
            await operations.pause(dev_client, cron.id)
            waiting[cron.id] = f"{cron.id}@{cronmath.iso_utc(min(ahead_slots(current, seen_at)))}"
        kept, cancelled = (waiting[cron.id] for cron in crons)
        with pytest.raises(InvalidTransition, match="cannot pause"):
            await operations.pause(dev_client, cancelled)
        await operations.cancel(dev_client, cancelled)
        finals = [await settle(dev_client, cron.id) for cron in crons]
        ends = {job_id: await operations.status(dev_client, job_id) for job_id in (kept, cancelled)}
        for cron in crons:
            await cron.cancel()
    await end_singletons(dev_client)
    assert ends[kept].status == JobStatus.DONE
    assert ends[cancelled].status == JobStatus.CANCELLED
    for final, job_id in zip(finals, (kept, cancelled), strict=True):
        last_ran = max(r.slot for r in final.recent_slots if r.outcome == "ran")
        assert job_id.endswith(cronmath.iso_utc(last_ran)), "no slot ran after the paused one"
        assert final.status == JobStatus.PAUSED and final.running == []


@pytest.mark.devserver
async def test_a_cancelled_crons_status_reads_the_slot_it_left_running_from_its_job(
    dev_client: Client, task_queue: str
) -> None:
    """Cancel stops further slots while a started one finishes. The cron closes at once and
    cannot hear that slot end, so its status reads the slot from the slot's own job: after the
    job is done, the cron shows no slot running and that slot done."""
    async with running_worker(dev_client, task_queue):
        cron = await start_cron(dev_client, task_queue, cron="*/3 * * * * *")
        current, seen_at = await eventually(
            functools.partial(snapshot, dev_client, cron.id),
            lambda seen: bool(ahead_slots(*seen)),
            what="a slot started ahead",
            interval=0.1,
        )
        left = f"{cron.id}@{cronmath.iso_utc(min(ahead_slots(current, seen_at)))}"
        await operations.cancel(dev_client, cron.id)
        await eventually(
            lambda: operations.status(dev_client, left),
            lambda job: job.status == JobStatus.DONE,
            timeout=30,
            what=f"{left} done",
        )
        closed = await dev_client.get_workflow_handle(cron.id).query(
            names.QUERY_STATUS, result_type=CronReport
        )  # the closed cron's own last word
        final = await operations.status(dev_client, cron.id)
    await end_singletons(dev_client)
    assert left in closed.running  # what the cron could not know
    assert isinstance(final, CronReport)
    assert final.status == JobStatus.CANCELLED
    assert final.running == []
    assert [r.status for r in final.recent_slots if r.job_id == left] == [JobStatus.DONE]
