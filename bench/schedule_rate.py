"""Schedule rate: jobs/s through our client, through the HTTP API, and raw ``start_workflow``,
one by one and in bulk.

    python -m bench.schedule_rate [--jobs 5000] [--callers 50] [--repeats 2] [--kinds ...]

Every run gets a fresh dev server (SQLite file, WAL) with its worker running, and schedules
``--jobs`` jobs due in an hour. One by one, from ``--callers`` concurrent callers: ours with
``operations.schedule`` (validation, handler check, start with search attributes), ours
through ``POST /jobs`` (a separate ``jobctl api`` process), and the baseline's raw
``start_workflow``. In bulk, batches of ``operations.MAX_BATCH`` (1,000) specs one after the
other: ``operations.schedule_many`` (``bulk-client``) and ``POST /jobs/batch`` (``bulk-api``).
The order rotates between repeats. Prints medians and ratios, writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from datetime import UTC, datetime, timedelta

import httpx

from bench.baseline import QUEUE as BASELINE_QUEUE
from bench.baseline import BaselineJob
from bench.common import OURS_QUEUE, gather_limited, side, start_api, write_result
from jobctl.activities.registry import load_handlers
from jobctl.starter import operations

KINDS = ("client", "api", "raw", "bulk-client", "bulk-api")


def spec(i: int) -> dict[str, object]:
    return {
        "id": f"r-{i}",
        "name": "rate",
        "handler": "bench.noop",
        "delay": "1h",
        "payload": {"i": i},
    }


def batches(jobs: int) -> list[list[dict[str, object]]]:
    size = operations.MAX_BATCH
    return [
        [spec(i) for i in range(start, min(start + size, jobs))] for start in range(0, jobs, size)
    ]


async def one_run(kind: str, jobs: int, callers: int) -> float:
    async with side() as (server, client, workers, records):
        if kind == "raw":
            workers.baseline(server, records)
        else:
            workers.ours(server, records)
        handlers = load_handlers("bench.handlers").names()
        if kind in ("api", "bulk-api"):
            api, url = await start_api(server)
        try:
            started = time.perf_counter()
            if kind == "client":
                await gather_limited(
                    callers, (operations.schedule(client, spec(i), handlers) for i in range(jobs))
                )
            elif kind == "bulk-client":
                for batch in batches(jobs):
                    results = await operations.schedule_many(client, batch, handlers)
                    assert all(result.ok for result in results), results
            elif kind == "bulk-api":
                async with httpx.AsyncClient(base_url=url, timeout=300) as http:
                    for batch in batches(jobs):
                        answer = await http.post("/jobs/batch", json={"jobs": batch})
                        assert answer.status_code == 200, answer.text
                        assert all(item["ok"] for item in answer.json()["results"]), answer.text
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
            if kind in ("api", "bulk-api"):
                api.terminate()
                api.wait()


async def main(jobs: int, callers: int, repeats: int, kinds: list[str]) -> None:
    os.environ["JOBS_TASK_QUEUE"] = OURS_QUEUE
    rates: dict[str, list[float]] = {kind: [] for kind in kinds}
    for repeat in range(repeats):
        shift = repeat % len(kinds)
        order = kinds[shift:] + kinds[:shift]
        for kind in order:
            rate = await one_run(kind, jobs, callers)
            rates[kind].append(rate)
            print(f"  run {repeat + 1} {kind:6}: {rate:7.1f} jobs/s", flush=True)
    medians = {kind: statistics.median(values) for kind, values in rates.items()}
    pairs = [
        ("client", "raw"),
        ("api", "raw"),
        ("bulk-client", "client"),
        ("bulk-api", "api"),
        ("bulk-api", "raw"),
    ]
    ratios = {
        f"{a}/{b}": medians[a] / medians[b] for a, b in pairs if a in medians and b in medians
    }
    print(f"schedule rate, {jobs} jobs, {callers} callers (median of {repeats}):")
    for kind in kinds:
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
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    args = parser.parse_args()
    asyncio.run(main(args.jobs, args.callers, args.repeats, args.kinds))
