"""Failure drill for batches (issue 44): a batch of 500 short jobs with an ``on_complete``
callback, on a dev server with its SQLite file; the worker is SIGKILLed mid-batch and the dev
server is SIGKILLed and restarted on the same file mid-batch. The callback's handler runs
exactly once (counted from the record file the handlers append to), with the right counts.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.starter.dev.devserver import DevServer
from jobctl.starter.operations import batches
from tests.helpers.drills import DrillRow, Tally, add_row, read_records
from tests.helpers.processes import Workers, cli_env

# Alone (after the parallel pass): 500 members and two kills beside four other test files
# took 156 s and loaded every timing test around it; by itself it takes ~77 s.
pytestmark = [pytest.mark.devserver, pytest.mark.drill, pytest.mark.alone, pytest.mark.timeout(240)]

HANDLERS = load_handlers("tests.handlers").names()
COUNT = 500


async def wait_until(check: Any, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


def dones(records: Path) -> int:
    return len(Tally.of(read_records(records)).dones)


def callbacks(records: Path) -> list[dict[str, Any]]:
    return [r for r in read_records(records) if r["event"] == "callback"]


async def test_drill_batch_callback_exactly_once_through_worker_and_server_kills(
    tmp_path: Path,
) -> None:
    queue = f"batch-drill-{uuid.uuid4().hex[:6]}"
    records = tmp_path / "records.jsonl"
    server = DevServer(db_file=tmp_path / "temporal.db")
    client = await server.start()
    workers = Workers(cli_env(server.address, queue), tmp_path)
    bid = f"drill-{uuid.uuid4().hex[:6]}"
    member = {
        "name": "m",
        "handler": "test.record",
        "delay": 0,
        "payload": {"path": str(records), "seconds": 0.05},
    }
    batch = {
        "id": bid,
        "on_complete": {"name": "cb", "handler": "test.echo", "payload": {"path": str(records)}},
    }
    t0 = time.monotonic()
    try:
        doomed = workers.start()
        # A small event budget: the batch continues-as-new several times during the drill.
        await batches.schedule_batch(
            client, batch, [member] * COUNT, HANDLERS, task_queue=queue, event_budget=800
        )
        await wait_until(lambda: dones(records) >= COUNT // 5, "a fifth of the members done")
        os.killpg(doomed.pid, signal.SIGKILL)
        doomed.wait()
        killed_worker_at = dones(records)
        workers.start()
        await wait_until(lambda: dones(records) >= COUNT // 2, "half the members done")
        server.kill()
        killed_server_at = dones(records)
        await asyncio.sleep(3)
        client = await server.start()
        await wait_until(lambda: callbacks(records), "the callback", timeout=150)
        await asyncio.sleep(5)  # a second callback run would show up now
        final = callbacks(records)
        report = await batches.batch_status(client, bid)
    finally:
        workers.stop_all()
        server.stop()
    elapsed = time.monotonic() - t0

    tally = Tally.of(read_records(records))
    ids = {f"{bid}.{i}" for i in range(COUNT)}
    add_row(
        DrillRow(
            "batch 500: worker + server SIGKILL",
            COUNT,
            tally.lost(ids),
            tally.duplicated(),
            None,
            f"callbacks {len(final)}; killed worker at {killed_worker_at}, server at "
            f"{killed_server_at} done; {report.generation} continue-as-new; {elapsed:.0f}s",
        )
    )
    assert len(final) == 1, final  # exactly once
    summary = final[0]["batch"]
    assert summary["counts"]["done"] == COUNT and summary["total"] == COUNT
    assert summary["succeeded"] is True and summary["dead"] == [] and summary["cancelled"] == []
    assert report.status == "done" and report.counts["done"] == COUNT
    assert report.callbacks["on_complete"].state == "started"
    assert report.generation >= 1  # the counts crossed continue-as-new
    assert tally.lost(ids) == 0


async def test_drill_a_chain_of_three_runs_in_order_through_a_worker_kill(tmp_path: Path) -> None:
    """A -> B -> C (``after``), each a 3 s handler; the worker is SIGKILLed while B runs. B runs
    again on the next worker (its lease), and C starts only after B's run that finished."""
    queue = f"chain-drill-{uuid.uuid4().hex[:6]}"
    records = tmp_path / "records.jsonl"
    server = DevServer(db_file=tmp_path / "temporal.db")
    client = await server.start()
    workers = Workers(cli_env(server.address, queue), tmp_path)
    tag = uuid.uuid4().hex[:6]
    a, b, c = f"chain-{tag}-a", f"chain-{tag}-b", f"chain-{tag}-c"
    step = {
        "name": "step",
        "handler": "test.record",
        "delay": 0,
        "lease": 3,
        "payload": {"path": str(records), "seconds": 3},
    }
    chain = [{**step, "id": a}, {**step, "id": b, "after": [a]}, {**step, "id": c, "after": [b]}]
    started = time.monotonic()
    try:
        doomed = workers.start()
        results = await operations.schedule_many(client, chain, HANDLERS, task_queue=queue)
        assert all(result.ok for result in results), [r.problems() for r in results]

        def began(key: str) -> bool:
            return any(r["key"] == key and r["event"] == "start" for r in read_records(records))

        await wait_until(lambda: began(b), "B started")
        os.killpg(doomed.pid, signal.SIGKILL)
        doomed.wait()
        workers.start()
        await wait_until(lambda: Tally.of(read_records(records)).dones[c] == 1, "C done")
        reports = [await operations.status(client, job_id) for job_id in (a, b, c)]
    finally:
        workers.stop_all()
        server.stop()
    lines = read_records(records)
    tally = Tally.of(lines)

    def at(key: str, event: str) -> list[float]:
        return [r["at"] for r in lines if r["key"] == key and r["event"] == event]

    add_row(
        DrillRow(
            "chain of 3 (after) through a worker SIGKILL",
            3,
            tally.lost({a, b, c}),
            sum(1 for key in (a, c) if tally.starts[key] > 1),
            None,
            f"B started {tally.starts[b]} times (the kill cut one); "
            f"{time.monotonic() - started:.0f}s",
        )
    )
    assert [r.status for r in reports] == ["done"] * 3
    assert tally.dones == {a: 1, b: 1, c: 1} and tally.starts[a] == tally.starts[c] == 1
    assert tally.starts[b] == 2  # the run the kill cut, and the one that finished
    assert min(at(b, "start")) >= at(a, "done")[0]
    assert at(c, "start")[0] >= at(b, "done")[0]
