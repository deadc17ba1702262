"""Schedule rate: jobs/s through our client, through the HTTP API, and raw ``start_workflow``.

    python -m bench.schedule_rate [--jobs 5000] [--callers 50] [--repeats 2]

Every run gets a fresh dev server (SQLite file, WAL) with its worker running, and schedules
``--jobs`` jobs due in an hour from ``--callers`` concurrent callers: ours with
``operations.schedule`` (validation, handler check, start with search attributes), ours
through ``POST /jobs`` (a separate ``jobs api`` process), and the baseline's raw
``start_workflow``. The order rotates between repeats. Prints medians and ratios, writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from datetime import UTC, datetime, timedelta

import httpx

from activities.registry import load_handlers
from bench.baseline import QUEUE as BASELINE_QUEUE
from bench.baseline import BaselineJob
from bench.common import OURS_QUEUE, gather_limited, side, start_api, write_result
from starter import operations

KINDS = ("client", "api", "raw")


def spec(i: int) -> dict[str, object]:
    return {
        "id": f"r-{i}",
        "name": "rate",
        "handler": "bench.noop",
        "delay": "1h",
        "payload": {"i": i},
    }


async def one_run(kind: str, jobs: int, callers: int) -> float:
    async with side() as (server, client, workers, records):
        if kind == "raw":
            workers.baseline(server, records)
        else:
            workers.ours(server, records)
        handlers = load_handlers("bench.handlers").names()
        if kind == "api":
            api, url = await start_api(server)
        try:
            started = time.perf_counter()
            if kind == "client":
                await gather_limited(
                    callers, (operations.schedule(client, spec(i), handlers) for i in range(jobs))
                )
            elif kind == "api":
                limits = httpx.Limits(max_connections=callers)
                async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:

                    async def post(i: int) -> None:
                        answer = await http.post("/jobs", json=spec(i))
                        assert answer.status_code == 201, answer.text

                    await gather_limited(callers, (post(i) for i in range(jobs)))
            else:
                due = (datetime.now(UTC) + timedelta(hours=1)).timestamp()
                await gather_limited(
                    callers,
                    (
                        client.start_workflow(
                            BaselineJob.run,
                            args=[f"r-{i}", due],
                            id=f"r-{i}",
                            task_queue=BASELINE_QUEUE,
                        )
                        for i in range(jobs)
                    ),
                )
            return jobs / (time.perf_counter() - started)
        finally:
            if kind == "api":
                api.terminate()
                api.wait()


async def main(jobs: int, callers: int, repeats: int) -> None:
    os.environ["JOBS_TASK_QUEUE"] = OURS_QUEUE
    rates: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for repeat in range(repeats):
        order = KINDS[repeat % 3 :] + KINDS[: repeat % 3]
        for kind in order:
            rate = await one_run(kind, jobs, callers)
            rates[kind].append(rate)
            print(f"  run {repeat + 1} {kind:6}: {rate:7.1f} jobs/s", flush=True)
    medians = {kind: statistics.median(values) for kind, values in rates.items()}
    ratios = {
        "client/raw": medians["client"] / medians["raw"],
        "api/raw": medians["api"] / medians["raw"],
    }
    print(f"schedule rate, {jobs} jobs, {callers} callers (median of {repeats}):")
    for kind in KINDS:
        print(f"  {kind:6} {medians[kind]:7.1f} jobs/s")
    print("  " + "  ".join(f"{name} = {value:.2f}" for name, value in ratios.items()))
    path = write_result(
        "schedule_rate",
        {"jobs": jobs, "callers": callers, "rates": rates, "medians": medians, "ratios": ratios},
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--callers", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(main(args.jobs, args.callers, args.repeats))
