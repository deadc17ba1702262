"""Capacity: the CPU a job costs the dev server (and the worker beside it), and what it implies.

    python -m bench.capacity [--jobs 600] [--ahead 80] [--lead 60] [--check 60]

One fresh dev server (SQLite, WAL) and one ``jobctl worker``. ``--jobs`` one-shots due together,
``--ahead`` seconds out, each with ``dispatch_lead`` ``--lead`` (and a lease that covers the
wait, so no heartbeat), wake spread thinly over [run_at - lead, run_at - 15 s]: nothing queues,
so each phase's CPU is the work itself. CPU is read from /proc for the server and the worker
process, idle use subtracted, in three phases:

* start: scheduling the jobs (``start_workflow`` with ``start_delay``);
* wake: from the last start to run_at (each job's first workflow task and its hand-over);
* run: from run_at until every job is closed (handler, completion, close).

Printed: ms of CPU per job by phase and process, and what that implies on this machine
(``os.cpu_count()`` cores shared by the server and the worker, as in every bench here):

* sustained jobs/s = cores / (all phases, server + worker);
* wake rate = cores / (wake phase, server + worker), and ``JOBS_WAKE_RATE`` at a third of
  it: a herd's checks and start records follow its wakes at up to twice the wake rate;
* the largest herd a notice of n seconds carries on time = n x cores / (start + wake), since
  a herd's starts and wakes must both happen before run_at (its runs come after).

``--check N`` then runs ``bench.herd``'s herd of the predicted size for N seconds of notice
and prints its fire lag beside the prediction. Writes JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from temporalio.client import Client

from bench import herd
from bench.common import (
    OURS_QUEUE,
    cpu_seconds,
    gather_limited,
    side,
    wait_for_starts,
    write_result,
)
from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.starter.operations.wakeplan import MIN_DISPATCH_LEAD
from jobctl.workflows import names

IDLE_SECONDS = 5.0
PROCESSES = ("server", "worker")


@dataclass
class Meter:
    """CPU seconds of the server and worker processes, with their idle rate subtracted."""

    pids: dict[str, int]
    idle: dict[str, float]  # CPU seconds per wall second when nothing happens

    def read(self) -> tuple[float, dict[str, float]]:
        return time.monotonic(), {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def phase(
        self,
        before: tuple[float, dict[str, float]],
        after: tuple[float, dict[str, float]],
        jobs: int,
    ) -> dict[str, float]:
        """ms of CPU per job in one phase, per process, idle use subtracted."""
        wall = after[0] - before[0]
        return {
            name: max(0.0, after[1][name] - before[1][name] - self.idle[name] * wall) * 1000 / jobs
            for name in self.pids
        }


async def idle_rates(pids: dict[str, int]) -> dict[str, float]:
    first = {name: cpu_seconds(pid) for name, pid in pids.items()}
    await asyncio.sleep(IDLE_SECONDS)
    return {name: (cpu_seconds(pid) - first[name]) / IDLE_SECONDS for name, pid in pids.items()}


async def wait_closed(client: Client, timeout: float) -> None:
    """Until no job is running (one visibility count every second)."""
    query = f"WorkflowType = '{names.JOB_WORKFLOW}' AND ExecutionStatus = 'Running'"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (await client.count_workflows(query)).count == 0:
            return
        await asyncio.sleep(1.0)
    raise TimeoutError("jobs still running")


async def measure(jobs: int, ahead: float, lead: float) -> dict[str, Any]:
    async with side() as (server, client, workers, records):
        worker = workers.ours(server, records, JOBS_PREFETCH=str(jobs + 500))
        assert server.process is not None
        pids = {"server": server.process.pid, "worker": worker.pid}
        meter = Meter(pids, await idle_rates(pids))
        handlers = load_handlers("bench.handlers").names()
        due = time.time() + ahead
        run_at = datetime.fromtimestamp(due, UTC)
        fields = {"run_at": run_at, "dispatch_lead": lead, "lease": 2 * lead + 30}

        async def one(i: int) -> None:
            now = datetime.now(UTC)
            spec = {"id": f"c-{i}", "name": "capacity", "handler": "bench.noop", **fields}
            await operations.start(client, operations.validate_spec(spec, handlers, now), now)

        t0 = meter.read()
        await gather_limited(herd.CALLERS, (one(i) for i in range(jobs)))
        t1 = meter.read()
        scheduled_by = time.time()
        await asyncio.sleep(max(0.0, due - time.time()))
        t2 = meter.read()
        starts = await wait_for_starts(records, jobs, timeout=600)
        await wait_closed(client, 600)
        t3 = meter.read()
        lags = [start - scheduled for scheduled, start in starts.values()]
        return {
            "jobs": jobs,
            "ahead": ahead,
            "lead": lead,
            "scheduled_within": scheduled_by - (due - ahead),
            "idle_cpu": meter.idle,
            "ms_per_job": {
                "start": meter.phase(t0, t1, jobs),
                "wake": meter.phase(t1, t2, jobs),
                "run": meter.phase(t2, t3, jobs),
            },
            "late_over_1s": sum(1 for lag in lags if lag > 1.0),
        }


def implied(ms: dict[str, dict[str, float]], cores: int) -> dict[str, float]:
    """What the per-job CPU implies on ``cores`` shared by the server and the worker."""

    def both(*phases: str) -> float:
        return sum(ms[phase][name] for phase in phases for name in PROCESSES) / 1000

    def server(*phases: str) -> float:
        return sum(ms[phase]["server"] for phase in phases) / 1000

    return {
        "server_ms_per_job": 1000 * server("start", "wake", "run"),
        "worker_ms_per_job": sum(ms[p]["worker"] for p in ("start", "wake", "run")),
        "sustained_jobs_per_second": cores / both("start", "wake", "run"),
        "server_only_jobs_per_second": cores / server("start", "wake", "run"),
        "wake_rate": cores / both("wake"),
        "herd_per_notice_second": cores / both("start", "wake"),
    }


def largest_herd(notice: float, per_second: float) -> int:
    """The largest herd that ``notice`` seconds carry on time: its starts and wakes must fit
    before run_at, the wakes not later than the lead rule's floor (15 s) before it."""
    return int(max(0.0, notice) * per_second)


async def main(jobs: int, ahead: float, lead: float, check: float | None) -> None:
    os.environ["JOBS_TASK_QUEUE"] = OURS_QUEUE
    cores = os.cpu_count() or 1
    row = await measure(jobs, ahead, lead)
    ms = row["ms_per_job"]
    for phase in ("start", "wake", "run"):
        cells = "  ".join(f"{name} {ms[phase][name]:6.1f}" for name in PROCESSES)
        print(f"{phase:5}: ms of CPU per job: {cells}", flush=True)
    caps = implied(ms, cores)
    print(
        f"per job: server {caps['server_ms_per_job']:.1f} ms, "
        f"worker {caps['worker_ms_per_job']:.1f} ms; on {cores} cores: "
        f"sustained {caps['sustained_jobs_per_second']:.0f} jobs/s "
        f"(server alone {caps['server_only_jobs_per_second']:.0f}); wake rate "
        f"{caps['wake_rate']:.0f}/s (JOBS_WAKE_RATE={caps['wake_rate'] / 3:.0f}: the checks "
        "and start records follow at up to twice the wake rate)"
    )
    for notice in (30, 60, 120, 300):
        herd_size = largest_herd(notice, caps["herd_per_notice_second"])
        print(f"largest herd on time with {notice:3}s notice: {herd_size:6,}")
    result: dict[str, Any] = {"measured": row, "cores": cores, "implied": caps}
    if check is not None:
        size = largest_herd(check, caps["herd_per_notice_second"])
        got = await herd.run_side("ours", size, check)
        lag = got["lag"] or {}
        print(
            f"check: predicted {size:,} jobs on time with {check:.0f}s notice; herd fire lag "
            f"p50 {lag.get('p50', 0):.2f}s p99 {lag.get('p99', 0):.2f}s "
            f"max {lag.get('max', 0):.2f}s"
        )
        result["check"] = {
            "notice": check,
            "jobs": size,
            **{k: v for k, v in got.items() if k != "lags"},
        }
    print(f"wrote {write_result('capacity', result)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--ahead", type=float, default=80)
    parser.add_argument("--lead", type=float, default=60)
    parser.add_argument("--check", type=float, default=None, help="notice (s) of a herd to check")
    args = parser.parse_args()
    assert args.lead > MIN_DISPATCH_LEAD, "the lead must exceed the 15 s floor"
    asyncio.run(main(args.jobs, args.ahead, args.lead, args.check))
