"""Drill (issue 18): 50 jobs on one concurrency key with limit 3, two ``jobctl worker`` processes,
one SIGKILLed while it runs a handler of the key. From the handlers' own start and done records
(a killed handler's run ends at the kill): never more than 3 running at once, none lost, the
killed job's attempt re-run (under the permit it kept) after its lease, and nothing else run
twice but a handler that returned on the doomed worker in the moment before the kill (its
completion died with the worker: at-least-once)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from tests.helpers.drills import DrillRow, Tally, add_row, read_records, wait_for_records
from tests.helpers.poll import eventually_sync
from tests.helpers.processes import Workers

pytestmark = [pytest.mark.devserver, pytest.mark.drill, pytest.mark.timeout(300)]

HANDLERS = load_handlers("tests.handlers").names()
JOBS, LIMIT, LEASE = 50, 3, 3


def running_at_once(records: list[dict[str, Any]], killed_pid: int, killed_at: float) -> int:
    """The most handlers running at one moment: each start until its done record, or until
    the kill for a start on the killed worker that never finished."""
    ends = {(r["key"], r["attempt"], r["pid"]): r["at"] for r in records if r["event"] == "done"}
    edges: list[tuple[float, int]] = []
    for r in records:
        if r["event"] != "start":
            continue
        end = ends.get((r["key"], r["attempt"], r["pid"]))
        if end is None:
            assert r["pid"] == killed_pid, f"a start without its end: {r}"
            end = killed_at
        edges += [(r["at"], 1), (end, -1)]
    running = peak = 0
    for _, step in sorted(edges):  # at equal times an end (-1) sorts before a start
        running += step
        peak = max(peak, running)
    return peak


def running_on(records: list[dict[str, Any]], pid: int) -> list[str]:
    done = {(r["key"], r["attempt"]) for r in records if r["event"] == "done"}
    return [
        r["key"]
        for r in records
        if r["event"] == "start" and r["pid"] == pid and (r["key"], r["attempt"]) not in done
    ]


async def test_drill_concurrency_limit_holds_through_a_worker_sigkill(
    dev_client: Client, task_queue: str, workers: Workers, tmp_path: Path
) -> None:
    records = tmp_path / "records.jsonl"
    doomed, survivor = workers.start(), workers.start()
    key = f"drill-{uuid.uuid4().hex[:8]}"
    ids = [f"limited-{uuid.uuid4().hex[:6]}-{i}" for i in range(JOBS)]
    for job_id in ids:
        spec = {
            "id": job_id,
            "name": "drill",
            "handler": "test.record",
            "payload": {"path": str(records), "seconds": 1.0},
            "delay": 0,
            "lease": LEASE,
            "backoff_base": 1,
            "concurrency_key": key,
            "concurrency_limit": LIMIT,
        }
        await operations.schedule(dev_client, spec, HANDLERS, task_queue=task_queue)
    # Kill the doomed worker while one of its handlers runs.
    eventually_sync(
        lambda: running_on(read_records(records), doomed.pid),
        timeout=120,
        interval=0.05,
        what="a handler running on the doomed worker",
    )
    os.killpg(doomed.pid, signal.SIGKILL)
    doomed.wait()
    killed_at = time.time()
    wait_for_records(records, JOBS, "done", timeout=240)
    await asyncio.sleep(1)  # anything still to land would show up as a duplicate
    final = read_records(records)

    tally = Tally.of(final)
    cut = {r["key"] for r in final if r["event"] == "start" and r["pid"] == doomed.pid}
    cut -= {r["key"] for r in final if r["event"] == "done" and r["pid"] == doomed.pid}
    peak = running_at_once(final, doomed.pid, killed_at)
    twice = {k for k, n in tally.starts.items() if n > 1}
    add_row(
        DrillRow(
            "concurrency limit 3 through a worker SIGKILL",
            JOBS,
            tally.lost(set(ids)),
            len(twice),
            None,
            f"most running at once {peak}; {len(cut)} handler(s) cut by the kill, "
            f"{len(twice - cut)} ended just before it and ran again",
        )
    )
    assert cut  # the kill cut a running handler: the drill bites
    assert peak == LIMIT  # the limit was reached and never passed
    assert tally.lost(set(ids)) == 0
    assert all(tally.dones[job_id] == 1 for job_id in cut)
    assert {r["pid"] for r in final if r["event"] == "done" and r["key"] in cut} == {survivor.pid}
    for job_id in twice - cut:
        assert_finished_at_the_kill(final, job_id, doomed.pid, survivor.pid, killed_at)


def assert_finished_at_the_kill(
    records: list[dict[str, Any]], job_id: str, doomed: int, survivor: int, killed_at: float
) -> None:
    """A job that ran twice without being cut: its handler returned on the doomed worker
    within a lease before the kill, and the survivor ran it again after the kill."""
    runs = sorted((r for r in records if r["key"] == job_id), key=lambda r: r["at"])
    shape = [(r["event"], r["pid"]) for r in runs]
    assert shape == [("start", doomed), ("done", doomed), ("start", survivor), ("done", survivor)]
    assert killed_at - LEASE <= runs[1]["at"] <= killed_at, runs
    assert runs[2]["at"] > killed_at, runs
