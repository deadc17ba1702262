"""A cron's first slot on the time-skipping server: the slot the starter promised (``next_run_at``,
``JobRunAt``) runs even when no worker has picked the cron up by then. A cron counts its slots
from the instant the starter computed that promise (passed in its state), or, started bare (as
``temporal workflow start`` would), from the server's start of its first run; never from its
first workflow task."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from jobctl.starter import operations
from jobctl.workflows import cronmath
from jobctl.workflows.cron_workflow import CronJobWorkflow
from jobctl.workflows.models import CronInput, CronReport, CronUpdate, JobStatus, parse_spec
from jobctl.workflows.names import MEMO_SCHEDULE
from tests.helpers.cron import report, settle, time_skipping_lead
from tests.helpers.poll import eventually
from tests.helpers.temporal import assert_replays, running_worker

GRID = timedelta(seconds=5)


def next_on_grid(moment: datetime) -> datetime:
    """The first multiple of GRID (since the epoch) strictly after ``moment``."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return epoch + ((moment - epoch) // GRID + 1) * GRID


@pytest.mark.parametrize("started_by", ["starter", "bare"])
async def test_the_promised_first_slot_runs_when_the_first_workflow_task_comes_later(
    ts_env: WorkflowEnvironment, task_queue: str, started_by: str
) -> None:
    # Created just after a grid line, so the promised slot is one grid step (5 s) away and
    # the start request has those 5 s to reach the server before that slot.
    now = await ts_env.get_current_time()
    await ts_env.sleep(next_on_grid(now) + timedelta(milliseconds=1) - now)
    now = await ts_env.get_current_time()
    spec = parse_spec(
        {
            "name": "late-worker",
            "handler": "log",
            "cron": "*/5 * * * * *",
            "overlap": "allow_all",
            **time_skipping_lead(ts_env),
        },
        now,
        new_id=f"cron-{uuid.uuid4().hex[:12]}",
    )
    if started_by == "starter":
        promised = (
            await operations.start(ts_env.client, spec, now, task_queue=task_queue)
        ).next_run_at
    else:
        await ts_env.client.start_workflow(
            CronJobWorkflow.run, CronInput(spec=spec), id=spec.id, task_queue=task_queue
        )
        promised = next_on_grid(now)
    assert promised == next_on_grid(now)
    created = (await ts_env.client.get_workflow_handle(spec.id).describe()).start_time
    assert created < promised  # the cron exists before its first slot

    # No worker yet: the cron's first workflow task waits until after the promised slot (the
    # test server's clock runs in real time while nothing skips it).
    while (late := promised + timedelta(seconds=1) - await ts_env.get_current_time()) > timedelta():
        await asyncio.sleep(late.total_seconds())

    async with running_worker(ts_env.client, task_queue):
        first = await eventually(
            lambda: report(ts_env, spec.id),
            lambda current: bool(current.recent_slots),
            what=f"{spec.id} recorded a slot",
        )
        await operations.pause(ts_env.client, spec.id)
        final: CronReport = await settle(ts_env, spec.id)
        await ts_env.client.get_workflow_handle(spec.id).cancel()

    oldest = first.recent_slots[-1]
    assert (oldest.slot, oldest.outcome) == (promised, "ran"), first.recent_slots
    assert oldest.job_id == f"{spec.id}@{cronmath.iso_utc(promised)}"
    assert "missed" not in final.counts
    [record] = [r for r in final.recent_slots if r.slot == promised]
    assert record.status == JobStatus.DONE

    # Either way the same code path: no patch marker (none since 1.0); it replays.
    history = await ts_env.client.get_workflow_handle(spec.id).fetch_history()
    patches = [
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
    ]
    assert patches == []
    await assert_replays(history)


@pytest.mark.parametrize("bare", [False, True], ids=["starter", "bare"])
async def test_an_update_in_the_crons_first_workflow_task_is_answered(
    dev_client: Client, task_queue: str, bare: bool
) -> None:
    """An update sent before any worker picked the cron up reaches it in its first workflow
    task, where handlers run before ``run``: it must find the cron's state complete (it
    failed that task with an AssertionError, and the update with "Workflow Task in failed
    state"). On the dev server: the time-skipping server left such an update hanging."""
    now = datetime.now(UTC)
    spec = parse_spec(
        {"name": "early-update", "handler": "log", "cron": "0 * * * *"},
        now,
        new_id=f"cron-{uuid.uuid4().hex[:12]}",
    )
    if bare:
        await dev_client.start_workflow(
            CronJobWorkflow.run, CronInput(spec=spec), id=spec.id, task_queue=task_queue
        )
    else:
        await operations.start(dev_client, spec, now, task_queue=task_queue)
    change = CronUpdate(cron="*/20 * * * *", timezone="Asia/Kolkata")
    update = asyncio.create_task(operations.update_cron(dev_client, spec.id, change))
    await asyncio.sleep(1)  # the update waits on the server for the cron's first task
    assert not update.done()
    handle = dev_client.get_workflow_handle(spec.id)
    async with running_worker(dev_client, task_queue):
        updated = await update
        memo = await (await handle.describe()).memo()
        current = await report(dev_client, spec.id)
        await handle.cancel()
    assert isinstance(updated, CronReport)
    assert (updated.cron, updated.timezone) == ("*/20 * * * *", "Asia/Kolkata")
    assert current.status == JobStatus.SCHEDULED and current.cron == "*/20 * * * *"
    # Listings compute the next run from this memo: the early update kept it current too.
    assert memo[MEMO_SCHEDULE] == {"cron": "*/20 * * * *", "timezone": "Asia/Kolkata"}
