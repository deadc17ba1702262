"""Sustained: a closed loop of submit-then-wait for ``--seconds``, ours vs the baseline.

    python -m bench.sustained [--seconds 60] [--loops 200] [--rounds 3] [--due 1] [--peer]
                              [--phases] [--embedded]

Each of ``--loops`` callers submits a job due in ``--due`` seconds (default 1), waits for it
to complete (by job id on both sides), and repeats.
With 20 loops every system is bound by the 1 s wait (20 loops / ~1.2 s each = ~16 jobs/s);
the default 200 keeps a backlog at the server, so the figure is throughput (on 2 cores it is
bounded by the dev server's workflow-task dispatch, not by CPU: README, "Sustained").
Both sides get a fresh dev server (SQLite file, WAL) and their own worker: a process of its
own, or with ``--embedded`` one in the bench's process on the client it schedules through
(the shape of ``jobctl dev``, whose API schedules through its worker's client; ours then starts
a job due now eagerly, operations.starting). Prints completed
jobs/s and end-to-end latency (submit to completion), writes JSON. One run of each side
varied by up to 15% from run to run here, so ours and the baseline run ``--rounds`` times in
turn and the ratio is the median of the rounds'. ``--peer`` adds
procrastinate on a local PostgreSQL (bench/peer.py, 1 s poll). ``--phases`` prints, per
side and round, the median wait before each event of a sample of its jobs (bench/phases.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench.baseline import QUEUE as BASELINE_QUEUE
from bench.baseline import BaselineJob, baseline_worker
from bench.common import (
    OURS_QUEUE,
    cpu_seconds,
    idle_share,
    machine_jiffies,
    side,
    steady_rate,
    summary,
    write_result,
)
from bench.handlers import RECORDS_ENV
from bench.phases import event_gaps, steady_sample
from bench.phases import show as show_phases
from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.worker import WorkerSettings, build_worker

DUE_IN = timedelta(seconds=1)


async def submit_and_wait(
    kind: str, client: Client, job_id: str, handlers: list[str], due_in: timedelta = DUE_IN
) -> None:
    if kind == "ours":
        now = datetime.now(UTC)
        spec = operations.validate_spec(
            {"id": job_id, "name": "loop", "handler": "bench.noop", "run_at": now + due_in},
            handlers,
            now,
        )
        await operations.start(client, spec, now)
        await client.get_workflow_handle(job_id).result()
    else:
        due = (datetime.now(UTC) + due_in).timestamp()
        await client.start_workflow(
            BaselineJob.run, args=[job_id, due], id=job_id, task_queue=BASELINE_QUEUE
        )
        # Waited for by id as ours is (a scheduler's caller has the job id, not the run id):
        # a wait by id costs the server a current-run lookup per poll, on both sides alike.
        await client.get_workflow_handle(job_id).result()


@asynccontextmanager
async def in_process_worker(kind: str, client: Client, records: Path) -> AsyncIterator[None]:
    """The side's worker in this process, on the client the loops schedule through."""
    os.environ[RECORDS_ENV] = str(records)  # as the worker processes are told
    if kind == "ours":
        settings = WorkerSettings(task_queue=OURS_QUEUE, handler_modules="bench.handlers")
        async with build_worker(client, settings).running():
            yield
    else:
        async with baseline_worker(client):
            yield


async def run_side(
    kind: str,
    seconds: float,
    loops: int,
    phases: bool = False,
    due_in: timedelta = DUE_IN,
    embedded: bool = False,
) -> dict[str, Any]:
    async with side() as (server, client, workers, records), AsyncExitStack() as stack:
        if embedded:  # its CPU is this process's: the loops' and the worker's
            await stack.enter_async_context(in_process_worker(kind, client, records))
            worker_pid = os.getpid()
        elif kind == "ours":
            worker_pid = workers.ours(server, records).pid
        else:
            worker_pid = workers.baseline(server, records).pid
        assert server.process is not None
        cpu_before = {"worker": cpu_seconds(worker_pid), "server": cpu_seconds(server.process.pid)}
        handlers = load_handlers("bench.handlers").names()
        latencies: list[float] = []
        completed: list[str] = []
        finished: list[float] = []  # monotonic completion times
        stop_at = time.monotonic() + seconds

        async def loop(lane: int) -> None:
            n = 0
            while time.monotonic() < stop_at:
                job_id, started = f"s-{lane}-{n}", time.monotonic()
                await submit_and_wait(kind, client, job_id, handlers, due_in)
                finished.append(time.monotonic())
                latencies.append(finished[-1] - started)
                completed.append(job_id)
                n += 1

        began, jiffies = time.monotonic(), machine_jiffies()
        await asyncio.gather(*(loop(lane) for lane in range(loops)))
        elapsed, idle = time.monotonic() - began, idle_share(jiffies, machine_jiffies())
        done = max(len(latencies), 1)
        cpu = {
            name: 1000 * (cpu_seconds(pid) - cpu_before[name]) / done
            for name, pid in (("worker", worker_pid), ("server", server.process.pid))
        }
        gaps = await event_gaps(client, steady_sample(completed)) if phases else {}
        if gaps:
            show_phases(kind, gaps)
        return {
            "side": kind,
            "embedded": embedded,
            "completed": len(latencies),
            "seconds": elapsed,
            "jobs_per_second": steady_rate(finished, began, stop_at),
            # Everything completed over the whole run, the drain after stop_at included.
            "overall_jobs_per_second": len(latencies) / elapsed,
            "latency": summary(latencies),
            "cpu_ms_per_job": cpu,
            # Idle share of the whole machine meanwhile: well above 0, the loop is not CPU-bound.
            "machine_idle": idle,
            "phases_p50": {name: statistics.median(values) for name, values in gaps.items()},
        }


def median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The round whose throughput is the median of the side's rounds (the lower middle one
    for an even count), so its latency and CPU figures belong to one real run."""
    ranked = sorted(rows, key=lambda row: row["jobs_per_second"])
    return ranked[(len(ranked) - 1) // 2]


def show(row: dict[str, Any], label: str) -> None:
    lat = row["latency"]
    print(
        f"{label:13}: {row['jobs_per_second']:6.1f} completed jobs/s steady "
        f"({row['completed']} in {row['seconds']:.0f}s with the drain); "
        f"end-to-end p50 {lat['p50']:.2f}s "
        f"p99 {lat['p99']:.2f}s"
        + (f"; machine idle {row['machine_idle']:.0%}" if "machine_idle" in row else ""),
        flush=True,
    )


async def main(
    seconds: float,
    loops: int,
    peer: bool,
    rounds: int,
    phases: bool,
    due_in: timedelta,
    embedded: bool = False,
) -> None:
    """``rounds`` rounds of ours and the baseline, alternating which goes first (the machine's
    drift then falls on both sides), each on a fresh server; the ratio is the median of the
    rounds' ratios. The peer, much faster and on another store, runs once."""
    os.environ["JOBS_TASK_QUEUE"] = OURS_QUEUE
    by_side: dict[str, list[dict[str, Any]]] = {"ours": [], "baseline": []}
    ratios = []
    for n in range(rounds):
        order = ("ours", "baseline") if n % 2 == 0 else ("baseline", "ours")
        for kind in order:
            by_side[kind].append(await run_side(kind, seconds, loops, phases, due_in, embedded))
            show(by_side[kind][-1], f"{kind} ({n + 1}/{rounds})")
        ratios.append(
            by_side["ours"][-1]["jobs_per_second"] / by_side["baseline"][-1]["jobs_per_second"]
        )
    rows = [median_row(by_side["ours"]), median_row(by_side["baseline"])]
    if peer:
        from bench import peer as procrastinate_peer  # needs the `peer` extra

        rows.append(
            await procrastinate_peer.sustained(
                seconds, loops, procrastinate_peer.TUNED_POLL, due_in.total_seconds()
            )
        )
        show(rows[-1], "peer")
    ratio = statistics.median(ratios)
    print(f"ours/baseline per round: {', '.join(f'{r:.2f}' for r in ratios)}; median {ratio:.2f}")
    path = write_result(
        "sustained",
        {
            "seconds": seconds,
            "loops": loops,
            "due_in": due_in.total_seconds(),
            "embedded": embedded,
            "rounds": by_side,
            "ratios": ratios,
            "rows": rows,
            "ratio": ratio,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--loops", type=int, default=200)
    parser.add_argument("--peer", action="store_true", help="add procrastinate + PostgreSQL")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of ours and the baseline")
    parser.add_argument(
        "--phases", action="store_true", help="where a job's time went (bench/phases.py)"
    )
    parser.add_argument("--due", type=float, default=1.0, help="seconds from submit to run_at")
    parser.add_argument(
        "--embedded", action="store_true", help="each side's worker in the bench's process"
    )
    args = parser.parse_args()
    asyncio.run(
        main(
            args.seconds,
            args.loops,
            args.peer,
            args.rounds,
            args.phases,
            timedelta(seconds=args.due),
            args.embedded,
        )
    )
