"""Herd: N one-shot jobs due in the same second, scheduled ``--ahead`` seconds before.

    python -m bench.herd [--jobs 1000 5000] [--ahead 60 [300]] [--peer] [--sides ours ...]
                         [--load N]

For each size, ours (``jobctl worker``, defaults but a prefetch that fits the herd) and the
baseline (timer + activity, SDK-default worker) each get a fresh dev server (SQLite file, WAL)
and the same herd. Fire lag is the handler's start minus run_at; drain is when the last handler
started. ``--peer`` adds procrastinate on a local PostgreSQL (bench/peer.py, 1 s poll);
``--sides`` runs only the sides named (e.g. ``--sides ours`` to compare two checkouts);
``--ahead`` is the notice for every size, or one per size (``--jobs 1000 2000 5000 --ahead 60
60 300``); ``--load N`` runs N busy processes (a core each) beside every side's whole run,
the same for each side.
Prints a table and writes JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from datetime import UTC, datetime
from typing import Any

from bench.baseline import QUEUE as BASELINE_QUEUE
from bench.baseline import BaselineJob
from bench.common import (
    OURS_QUEUE,
    background_load,
    gather_limited,
    herd_fields,
    side,
    wait_for_starts,
    write_result,
)
from jobctl.activities.registry import load_handlers
from jobctl.starter import operations

CALLERS = 50


async def run_side(kind: str, count: int, ahead: float) -> dict[str, Any]:
    async with side() as (server, client, workers, records):
        if kind == "ours":
            workers.ours(server, records, JOBS_PREFETCH=str(count + 500))
        else:
            workers.baseline(server, records)
        due = time.time() + ahead
        run_at = datetime.fromtimestamp(due, UTC)
        started = time.monotonic()
        if kind == "ours":
            handlers = load_handlers("bench.handlers").names()

            async def one(i: int) -> None:
                # The clock as each start is sent: it anchors the job's wake (its lead).
                now = datetime.now(UTC)
                spec = {"id": f"h-{i}", "name": "herd", "handler": "bench.noop", "run_at": run_at}
                await operations.start(client, operations.validate_spec(spec, handlers, now), now)

            await gather_limited(CALLERS, (one(i) for i in range(count)))
        else:
            await gather_limited(
                CALLERS,
                (
                    client.start_workflow(
                        BaselineJob.run,
                        args=[f"h-{i}", due],
                        id=f"h-{i}",
                        task_queue=BASELINE_QUEUE,
                    )
                    for i in range(count)
                ),
            )
        scheduling = time.monotonic() - started
        starts = await wait_for_starts(records, count, timeout=ahead + 900)
        return {
            "side": kind,
            "jobs": count,
            "schedule_seconds": scheduling,
            **herd_fields(records, starts, due),
        }


SIDES = ("ours", "baseline", "peer")


def notice_per_size(sizes: list[int], aheads: list[float]) -> list[float]:
    """``--ahead``: one notice for every size, or one per size, in order."""
    if len(aheads) == 1:
        return aheads * len(sizes)
    if len(aheads) != len(sizes):
        raise SystemExit(f"--ahead takes one value or one per size ({len(sizes)})")
    return aheads


async def main(sizes: list[int], aheads: list[float], sides: list[str], load: int) -> None:
    os.environ["JOBS_TASK_QUEUE"] = OURS_QUEUE  # where operations.start puts our jobs
    rows = []
    for count, ahead in zip(sizes, aheads, strict=True):
        for kind in sides:
            with background_load(load):
                if kind == "peer":
                    from bench import peer as procrastinate_peer  # needs the `peer` extra

                    poll = procrastinate_peer.TUNED_POLL
                    row = await procrastinate_peer.herd(count, ahead, poll)
                else:
                    row = await run_side(kind, count, ahead)
            rows.append({**row, "ahead": ahead, "load": load})
            lag = row["lag"] or {}
            print(
                f"{kind:9} {count:6} jobs, {ahead:g}s notice, load {load}: "
                f"fire lag p50 {lag.get('p50', 0):7.2f}s "
                f"p95 {lag.get('p95', 0):7.2f}s p99 {lag.get('p99', 0):7.2f}s "
                f"max {lag.get('max', 0):7.2f}s drain {row['drain_seconds'] or 0:7.2f}s "
                f"(scheduled in {row['schedule_seconds']:.1f}s, early {row['early']}, "
                f"started twice {row['started_twice']}, retried {row['retried']})",
                flush=True,
            )
    path = write_result("herd", {"ahead": aheads, "load": load, "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument(
        "--ahead", type=float, nargs="+", default=[60], help="notice: one, or one per size"
    )
    parser.add_argument("--peer", action="store_true", help="add procrastinate + PostgreSQL")
    parser.add_argument("--sides", nargs="+", choices=SIDES, help="only these sides")
    parser.add_argument(
        "--load", type=int, default=0, help="busy processes beside every side's whole run"
    )
    args = parser.parse_args()
    chosen = args.sides or [kind for kind in SIDES if args.peer or kind != "peer"]
    asyncio.run(main(args.jobs, notice_per_size(args.jobs, args.ahead), chosen, args.load))
