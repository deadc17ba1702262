"""Refresh cost of the job board (``GET /board``) with 10,000 jobs on the server.

    python -m bench.board [--jobs 10000] [--refreshes 30]

One fresh dev server (SQLite file, WAL), one ``jobctl worker`` and a ``jobctl api`` process with
``JOBS_BOARD_TTL=0`` (every request builds its own snapshot; by default requests within a
second share one). On the server: ``--jobs`` one-shots due in an hour, plus a mix in every
other state: 300 done, 200 dead, 60 running (a long sleep), 40 retrying (a backoff of an hour,
so 100 jobs in flight, more than the 50 the board describes) and 20 paused.

Then ``--refreshes`` sequential refreshes, 0.2 s apart: latency p50/p99 as the browser sees it,
the snapshot's own build time, response bytes (JSON, and gzip on the wire), the Temporal RPCs
one refresh makes (counted by the board at each call site: ``cost.rpcs``), and the CPU the API
process and the server spent per refresh (the server's idle CPU over as long subtracted). For
contrast, one listing of every job workflow (what a naive board would do on each tick).
Prints a summary and writes JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from datetime import UTC, datetime
from typing import Any

import httpx
from temporalio.client import Client

from bench.common import (
    OURS_QUEUE,
    cpu_seconds,
    gather_limited,
    side,
    start_api,
    summary,
    write_result,
)
from jobctl.activities.registry import load_handlers
from jobctl.starter import operations

CALLERS = 50
MIX = {"done": 300, "dead": 200, "running": 60, "retrying": 40, "paused": 20}


def spec(kind: str, i: int) -> dict[str, Any]:
    base: dict[str, Any] = {"id": f"{kind}-{i}", "name": f"{kind} {i % 10}"}
    if kind == "scheduled":
        return {**base, "handler": "bench.noop", "delay": "1h", "payload": {"i": i}}
    if kind == "paused":
        return {**base, "handler": "bench.noop", "delay": "2h"}
    if kind == "done":
        return {**base, "handler": "bench.noop", "delay": 0}
    if kind == "dead":
        payload = {"seconds": 0, "always_fail": True}
        return {**base, "handler": "demo.sleep", "payload": payload, "delay": 0, "max_attempts": 1}
    if kind == "running":
        return {**base, "handler": "demo.sleep", "payload": {"seconds": 3600}, "delay": 0}
    assert kind == "retrying"
    return {
        **base,
        "handler": "demo.sleep",
        "payload": {"seconds": 0, "always_fail": True},
        "delay": 0,
        "max_attempts": 5,
        "backoff_base": 3600,
        "backoff_max": 7200,
    }


async def populate(client: Client, jobs: int) -> float:
    handlers = load_handlers("bench.handlers").names()
    started = time.perf_counter()
    await gather_limited(
        CALLERS,
        (
            operations.schedule(client, spec(kind, i), handlers, datetime.now(UTC))
            for kind, count in [("scheduled", jobs), *MIX.items()]
            for i in range(count)
        ),
    )
    elapsed = time.perf_counter() - started
    await gather_limited(
        CALLERS, (operations.pause(client, f"paused-{i}") for i in range(MIX["paused"]))
    )
    return elapsed


async def settle(client: Client, timeout: float = 600) -> dict[str, int]:
    """Wait until the mix has reached its states (visibility is eventually consistent)."""
    wanted = {
        'JobStatus = "done"': MIX["done"],
        'JobStatus = "dead"': MIX["dead"],
        'JobStatus = "paused"': MIX["paused"],
        'JobStatus = "running"': MIX["running"] + MIX["retrying"],
    }
    deadline = time.monotonic() + timeout
    while True:
        counts = {q: (await client.count_workflows(q)).count for q in wanted}
        if all(counts[q] >= n for q, n in wanted.items()):
            return counts
        if time.monotonic() > deadline:
            raise TimeoutError(f"the mix never settled: {counts}")
        await asyncio.sleep(2)


async def list_everything(client: Client) -> tuple[int, int, float]:
    """What a naive board would do per tick: page through every job workflow."""
    started = time.perf_counter()
    rows = pages = 0
    it = client.list_workflows('WorkflowType IN ("JobWorkflow", "CronJobWorkflow")', page_size=1000)
    while True:
        await it.fetch_next_page(page_size=1000)
        pages += 1
        rows += len(it.current_page or [])
        if not it.next_page_token:
            break
    return rows, pages, (time.perf_counter() - started) * 1000


async def measure(jobs: int, refreshes: int) -> dict[str, Any]:
    async with side() as (server, client, workers, records):
        workers.ours(server, records)
        print(f"scheduling {jobs} jobs due in an hour + {sum(MIX.values())} in other states ...")
        rate = (jobs + sum(MIX.values())) / await populate(client, jobs)
        print(f"  {rate:.0f} jobs/s; waiting for the mix to settle ...", flush=True)
        settled = await settle(client)
        await asyncio.sleep(3)  # let the heartbeats and visibility catch up
        api, url = await start_api(server, JOBS_BOARD_TTL="0")
        assert server.process is not None
        try:
            async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                for _ in range(3):  # warm up: connection, imports, the API's client
                    (await http.get("/board")).raise_for_status()
                server_idle0 = cpu_seconds(server.process.pid)
                idle_started = time.monotonic()
                await asyncio.sleep(refreshes * 0.25)
                server_idle = (cpu_seconds(server.process.pid) - server_idle0) / (
                    time.monotonic() - idle_started
                )
                latencies, built, rpcs, described, raw, wire = [], [], [], [], [], []
                api_cpu0, server_cpu0 = cpu_seconds(api.pid), cpu_seconds(server.process.pid)
                window = time.monotonic()
                last: dict[str, Any] = {}
                for _ in range(refreshes):
                    started = time.perf_counter()
                    answer = await http.get("/board", headers={"Accept-Encoding": "gzip"})
                    latencies.append((time.perf_counter() - started) * 1000)
                    answer.raise_for_status()
                    last = answer.json()
                    assert not last["cost"]["cached"]
                    built.append(last["cost"]["ms"])
                    rpcs.append(last["cost"]["rpcs"])
                    described.append(last["cost"]["described"])
                    raw.append(len(answer.content))
                    wire.append(answer.num_bytes_downloaded)
                    await asyncio.sleep(0.2)
                window = time.monotonic() - window
                api_cpu = (cpu_seconds(api.pid) - api_cpu0) / refreshes * 1000
                server_cpu = (
                    (cpu_seconds(server.process.pid) - server_cpu0 - server_idle * window)
                    / refreshes
                    * 1000
                )
            rows, pages, full_ms = await list_everything(client)
        finally:
            api.terminate()
            api.wait()
    columns = {
        name: {"count": col["count"], "exact": col["exact"], "cards": len(col["cards"])}
        for name, col in last["columns"].items()
    }
    return {
        "jobs": jobs,
        "mix": MIX,
        "schedule_rate": rate,
        "settled_counts": settled,
        "refreshes": refreshes,
        "latency_ms": summary(latencies),
        "snapshot_build_ms": summary(built),
        "rpcs_per_refresh": summary([float(r) for r in rpcs]),
        "describes_per_refresh": summary([float(d) for d in described]),
        "json_bytes": summary([float(b) for b in raw]),
        "wire_bytes_gzip": summary([float(b) for b in wire]),
        "api_cpu_ms_per_refresh": api_cpu,
        "server_cpu_ms_per_refresh": server_cpu,
        "in_flight": last["in_flight"],
        "columns": columns,
        "list_everything": {"rows": rows, "rpcs": pages, "ms": full_ms},
    }


def report(result: dict[str, Any]) -> None:
    lat, built = result["latency_ms"], result["snapshot_build_ms"]
    print(f"board refresh with {result['jobs']:,} jobs (+{sum(MIX.values())} in other states):")
    print(f"  latency      p50 {lat['p50']:.1f} ms  p99 {lat['p99']:.1f} ms  (n={lat['n']})")
    print(f"  build        p50 {built['p50']:.1f} ms  p99 {built['p99']:.1f} ms (inside the API)")
    print(
        f"  RPCs         {result['rpcs_per_refresh']['p50']:.0f} per refresh "
        f"({result['describes_per_refresh']['p50']:.0f} describes; "
        f"{result['in_flight']} jobs in flight)"
    )
    print(
        f"  bytes        {result['json_bytes']['p50']:,.0f} JSON, "
        f"{result['wire_bytes_gzip']['p50']:,.0f} gzip on the wire"
    )
    print(
        f"  CPU          API {result['api_cpu_ms_per_refresh']:.1f} ms, "
        f"server ~{result['server_cpu_ms_per_refresh']:.1f} ms per refresh"
    )
    for name, col in result["columns"].items():
        shown = ("" if col["exact"] else ">=") + f"{col['count']:,}"
        print(f"    {name:9} {shown:>8}  {col['cards']} cards")
    full = result["list_everything"]
    print(
        f"  listing every job instead: {full['rows']:,} rows, {full['rpcs']} RPCs, "
        f"{full['ms']:.0f} ms"
    )


async def main(jobs: int, refreshes: int) -> None:
    os.environ["JOBS_TASK_QUEUE"] = OURS_QUEUE
    result = await measure(jobs, refreshes)
    report(result)
    print(f"(written to {write_result('board', result)})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--refreshes", type=int, default=30)
    args = parser.parse_args()
    asyncio.run(main(args.jobs, args.refreshes))
