"""Starts first (activities/slot_gate.py, ``JobActivities._after_queued_starts``): an attempt
whose handler has ended reports only once no attempt waits for a handler slot, for at most
REPORT_HOLD, so a herd's reports do not run between its starts."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

from temporalio.client import Client

from jobctl.activities.registry import load_handlers
from jobctl.activities.run_job import REPORT_HOLD
from jobctl.activities.slot_gate import SlotGate
from jobctl.starter import operations
from jobctl.worker import WorkerSettings, build_worker
from jobctl.workflows.models import JobStatus
from tests.helpers.jobs import job_report
from tests.helpers.poll import eventually

HANDLERS = load_handlers("tests.handlers").names()


async def test_with_no_one_waiting_there_is_no_hold() -> None:
    gate = SlotGate(1)
    began = time.monotonic()
    await gate.no_one_waiting(5.0)
    assert time.monotonic() - began < 0.05


async def test_the_hold_ends_when_the_last_waiter_gets_its_slot() -> None:
    gate = SlotGate(1)
    await gate.acquire()
    waiter = asyncio.create_task(gate.acquire())
    await asyncio.sleep(0)
    assert gate.waiting() == 1
    hold = asyncio.create_task(gate.no_one_waiting(5.0))
    await asyncio.sleep(0.05)
    assert not hold.done()  # someone still waits for a slot
    gate.release()
    await asyncio.wait_for(asyncio.gather(waiter, hold), 1.0)


async def test_a_waiter_that_gives_up_ends_the_hold_too() -> None:
    gate = SlotGate(1)
    await gate.acquire()
    waiter = asyncio.create_task(gate.acquire())
    await asyncio.sleep(0)
    hold = asyncio.create_task(gate.no_one_waiting(5.0))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.wait_for(hold, 1.0)
    assert gate.waiting() == 0


async def test_the_hold_is_bounded() -> None:
    gate = SlotGate(1)
    await gate.acquire()
    waiter = asyncio.create_task(gate.acquire())
    await asyncio.sleep(0)
    began = time.monotonic()
    await gate.no_one_waiting(0.2)
    assert 0.19 <= time.monotonic() - began < 1.0 and gate.waiting() == 1
    waiter.cancel()


async def test_a_finished_attempt_reports_after_the_queued_ones_start(
    dev_client: Client, tmp_path: Path
) -> None:
    """Three jobs due together on a worker with one handler slot, each handler 0.6 s: the
    first two, ending while another waits for the slot, report after the third has started
    (without the hold, the first closed before the third started), and none later than
    REPORT_HOLD after its handler ended."""
    queue = f"first-{uuid.uuid4().hex[:8]}"
    settings = WorkerSettings(task_queue=queue, max_concurrent_jobs=1)
    job_worker = build_worker(dev_client, settings, load_handlers("tests.handlers"))
    lines = tmp_path / "lines.jsonl"
    ids = [f"first-{n}-{uuid.uuid4().hex[:6]}" for n in range(3)]
    try:
        async with job_worker.running():
            # Scheduled together, each handler 0.6 s: the third reaches the worker while the
            # first runs (0.3 s, scheduled one by one, was too short on a loaded CI machine).
            await asyncio.gather(
                *(
                    operations.schedule(
                        dev_client, spec_of(job_id, lines), HANDLERS, task_queue=queue
                    )
                    for job_id in ids
                )
            )
            for job_id in ids:
                await eventually(partial(finished, dev_client, job_id), timeout=30)
            closed = {j: await close_time(dev_client, j) for j in ids}
    finally:
        job_worker.close()
    events = [json.loads(line) for line in lines.read_text().splitlines()]
    starts = sorted((e["at"], e["key"]) for e in events if e["event"] == "start")
    ends = {e["key"]: e["at"] for e in events if e["event"] == "done"}
    (_, first), (_, second), (last_start, _) = starts
    for key in (first, second):
        assert closed[key] >= last_start - 0.05, (key, closed, starts)
        assert closed[key] - ends[key] <= REPORT_HOLD + 1.0, (key, closed, ends)


def spec_of(job_id: str, lines: Path) -> dict[str, Any]:
    spec: dict[str, Any] = {"id": job_id, "name": "first", "delay": 0}
    spec |= {"handler": "test.record", "idempotency_key": job_id}
    spec["payload"] = {"path": str(lines), "seconds": 0.6}
    return spec


async def finished(client: Client, job_id: str) -> bool:
    return (await job_report(client, job_id)).status == JobStatus.DONE


async def close_time(client: Client, job_id: str) -> float:
    desc = await client.get_workflow_handle(job_id).describe()
    assert desc.close_time is not None
    return desc.close_time.timestamp()
