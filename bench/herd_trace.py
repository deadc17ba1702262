"""Where a late herd's time goes: the stages of every job, from Temporal's own histories.

    python -m bench.herd_trace [--jobs 2000] [--ahead 60] [--load 1]

A herd as ``bench.herd`` runs it (ours only: a fresh dev server, ``jobctl worker`` with a
prefetch that fits the herd, ``--load`` busy processes beside it). Once every handler has
started, each job's history is read and its time split into stages, all relative to run_at:

- ``wake``: the first workflow task scheduled (the start_delay ends: run_at minus the lead);
- ``wake_taken``: that task handed to the worker (started) minus scheduled: the task queue;
- ``wake_done``: the task completed minus started: the worker's activation, including waits
  for the GIL and for a free workflow slot;
- ``dispatched``: run_job scheduled (the command of the completed task);
- ``polled``: run_job started (handed to the worker) minus scheduled;
- ``handler``: the handler's start (the records file) minus run_at: the fire lag.

Prints the percentiles of each stage over the herd and the histories of the latest jobs;
writes JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from datetime import UTC, datetime
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from bench.common import (
    OURS_QUEUE,
    background_load,
    gather_limited,
    read_starts,
    side,
    wait_for_starts,
    write_result,
)
from jobctl.activities.registry import load_handlers
from jobctl.starter import operations

CALLERS = 50
SHOWN = 8  # latest jobs whose whole history is printed


async def stages(client: Client, job_id: str, due: float) -> dict[str, Any]:
    """The job's milestones (seconds relative to run_at) and every event's."""
    events: list[tuple[str, float]] = []
    attempt = 0  # Temporal's, of the attempt that completed run_job
    async for event in client.get_workflow_handle(job_id).fetch_history_events():
        at = event.event_time.ToDatetime(UTC).timestamp() - due
        events.append((EventType.Name(event.event_type).removeprefix("EVENT_TYPE_"), at))
        if event.HasField("activity_task_started_event_attributes"):
            attempt = event.activity_task_started_event_attributes.attempt

    def first(name: str) -> float | None:
        return next((at for kind, at in events if kind == name), None)

    found = {
        "wake": first("WORKFLOW_TASK_SCHEDULED"),
        "wake_started": first("WORKFLOW_TASK_STARTED"),
        "wake_completed": first("WORKFLOW_TASK_COMPLETED"),
        "dispatched": first("ACTIVITY_TASK_SCHEDULED"),
        "polled": first("ACTIVITY_TASK_STARTED"),
        "task_failures": sum(1 for kind, _ in events if kind == "WORKFLOW_TASK_FAILED"),
        "task_timeouts": sum(1 for kind, _ in events if kind == "WORKFLOW_TASK_TIMED_OUT"),
        "attempt": attempt,
    }
    return {"job_id": job_id, **found, "events": events}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def spans(rows: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Each stage's duration (seconds) per job, where both ends are known."""
    out: dict[str, list[float]] = {
        "wake (vs run_at)": [],
        "wake queued": [],
        "wake activation": [],
        "run_job queued": [],
        "polled -> handler": [],
        "fire lag": [],
    }
    for r in rows:
        pairs = [
            ("wake (vs run_at)", 0.0, r["wake"]),
            ("wake queued", r["wake"], r["wake_started"]),
            ("wake activation", r["wake_started"], r["wake_completed"]),
            ("run_job queued", r["dispatched"], r["polled"]),
            ("polled -> handler", r["polled"], r["lag"]),
            ("fire lag", 0.0, r["lag"]),
        ]
        for name, start, end in pairs:
            if start is not None and end is not None:
                out[name].append(end - start)
    return out


async def run(count: int, ahead: float, load: int) -> dict[str, Any]:
    # The load runs beside the whole side, as in bench.herd (server and worker start under it).
    with background_load(load):
        async with side() as (server, client, workers, records):
            workers.ours(server, records, JOBS_PREFETCH=str(count + 500))
            handlers = load_handlers("bench.handlers").names()
            due = time.time() + ahead
            run_at = datetime.fromtimestamp(due, UTC)

            async def one(i: int) -> None:
                now = datetime.now(UTC)
                spec = {"id": f"h-{i}", "name": "herd", "handler": "bench.noop", "run_at": run_at}
                await operations.start(client, operations.validate_spec(spec, handlers, now), now)

            await gather_limited(CALLERS, (one(i) for i in range(count)))
            await wait_for_starts(records, count, timeout=ahead + 900)
            starts = read_starts(records)
            rows = await gather_limited(
                CALLERS, (stages(client, f"h-{i}", due) for i in range(count))
            )
    for row in rows:
        row["lag"] = starts[row["job_id"]][1] - due
    return {"jobs": count, "ahead": ahead, "load": load, "rows": rows}


def report(result: dict[str, Any]) -> None:
    rows = result["rows"]
    print(f"{result['jobs']} jobs, {result['ahead']:g}s notice, load {result['load']}")
    print(f"{'stage':20} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8} {'mean':>8}")
    for name, values in spans(rows).items():
        print(
            f"{name:20} {pct(values, 0.5):8.2f} {pct(values, 0.9):8.2f} {pct(values, 0.99):8.2f} "
            f"{max(values, default=float('nan')):8.2f} {statistics.fmean(values or [0]):8.2f}"
        )
    failures = sum(r["task_failures"] for r in rows)
    timeouts = sum(r["task_timeouts"] for r in rows)
    retried = sum(1 for r in rows if r.get("attempt", 1) > 1)
    print(f"workflow task failures {failures}, timeouts {timeouts}; run_job retried {retried}")
    for row in sorted(rows, key=lambda r: r["lag"])[-SHOWN:]:
        trail = ", ".join(f"{kind.lower()} {at:+.2f}" for kind, at in row["events"])
        print(f"{row['job_id']} lag {row['lag']:.2f}s: {trail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--ahead", type=float, default=60)
    parser.add_argument("--load", type=int, default=1)
    args = parser.parse_args()
    os.environ["JOBS_TASK_QUEUE"] = OURS_QUEUE  # where operations.start puts our jobs
    result = asyncio.run(run(args.jobs, args.ahead, args.load))
    report(result)
    print(f"wrote {write_result('herd-trace', result)}")


if __name__ == "__main__":
    main()
