"""Hold: how much a sleeping job costs the server, ours vs the baseline.

    python -m bench.hold [--jobs 10000] [--seconds 120] [--full] [--sides ours baseline]

Each side gets a fresh dev server (SQLite file, WAL) and its worker, then starts up to
``--jobs`` jobs due in a day within ``--seconds`` (``--full``: 100,000 jobs within 10
minutes). It reports, per 1,000 sleeping jobs, the growth of the SQLite file over the empty
server's (each measured with the server stopped, so the WAL is checkpointed into the file) and
of the server's RSS; the worker's
CPU while the jobs sleep; and ``describe`` latency on random held jobs. Writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench.baseline import QUEUE as BASELINE_QUEUE
from bench.baseline import BaselineJob
from bench.common import OURS_QUEUE, cpu_seconds, rss_mib, side, summary, write_result
from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.starter.dev.devserver import DevServer

CALLERS = 64
SETTLE_SECONDS = 30
IDLE_SECONDS = 30
DESCRIBES = 300


def sqlite_bytes(db_file: Path) -> int:
    return sum(
        path.stat().st_size
        for path in (db_file, Path(f"{db_file}-wal"), Path(f"{db_file}-shm"))
        if path.exists()
    )


async def start_jobs(kind: str, client: Client, limit: int, seconds: float) -> int:
    """Start jobs from CALLERS concurrent callers until ``limit`` or ``seconds``; the count."""
    handlers = load_handlers("bench.handlers").names()
    stop_at = time.monotonic() + seconds
    next_index = 0
    due = datetime.now(UTC) + timedelta(days=1)

    async def caller() -> int:
        nonlocal next_index
        started = 0
        while next_index < limit and time.monotonic() < stop_at:
            i, next_index = next_index, next_index + 1
            if kind == "ours":
                data = {"id": f"k-{i}", "name": "hold", "handler": "bench.noop", "run_at": due}
                now = datetime.now(UTC)
                await operations.start(client, operations.validate_spec(data, handlers, now), now)
            else:
                await client.start_workflow(
                    BaselineJob.run,
                    args=[f"k-{i}", due.timestamp()],
                    id=f"k-{i}",
                    task_queue=BASELINE_QUEUE,
                )
            started += 1
        return started

    return sum(await asyncio.gather(*(caller() for _ in range(CALLERS))))


async def settled_bytes(server: DevServer) -> int:
    """SQLite bytes once the server closed its database (WAL checkpointed), then restarts."""
    server.stop(grace=60)
    size = sqlite_bytes(server.db_file) if server.db_file else 0
    await server.start()
    return size


async def run_side(kind: str, limit: int, seconds: float) -> dict[str, Any]:
    async with side() as (server, client, workers, records):
        worker = (
            workers.ours(server, records) if kind == "ours" else workers.baseline(server, records)
        )
        assert server.db_file is not None
        await asyncio.sleep(SETTLE_SECONDS)
        empty_bytes = await settled_bytes(server)
        assert server.process is not None
        empty_rss = rss_mib(server.process.pid)
        began = time.monotonic()
        held = await start_jobs(kind, client, limit, seconds)
        start_seconds = time.monotonic() - began
        await asyncio.sleep(SETTLE_SECONDS)  # timers armed, workflow tasks done
        cpu_before = cpu_seconds(worker.pid)
        await asyncio.sleep(IDLE_SECONDS)
        worker_cpu = (cpu_seconds(worker.pid) - cpu_before) / IDLE_SECONDS
        full_rss = rss_mib(server.process.pid)
        latencies = []
        for i in random.sample(range(held), min(DESCRIBES, held)):
            began_describe = time.perf_counter()
            await client.get_workflow_handle(f"k-{i}").describe()
            latencies.append(1000 * (time.perf_counter() - began_describe))
        full_bytes = await settled_bytes(server)
        per_thousand = 1000 / held
        return {
            "side": kind,
            "held": held,
            "start_seconds": start_seconds,
            "starts_per_second": held / start_seconds,
            "sqlite_mib_per_1000": (full_bytes - empty_bytes) / 2**20 * per_thousand,
            "server_rss_mib_per_1000": (full_rss - empty_rss) * per_thousand,
            "sqlite_mib_total": full_bytes / 2**20,
            "server_rss_mib_total": full_rss,
            "worker_cpu_percent_idle": 100 * worker_cpu,
            "worker_rss_mib": rss_mib(worker.pid),
            "describe_ms": summary(latencies),
        }


async def main(limit: int, seconds: float, sides: list[str]) -> None:
    os.environ["JOBS_TASK_QUEUE"] = OURS_QUEUE
    rows = []
    for kind in sides:
        row = await run_side(kind, limit, seconds)
        rows.append(row)
        print(
            f"{kind:9}: {row['held']:6} held ({row['starts_per_second']:.0f} starts/s); per "
            f"1,000: SQLite {row['sqlite_mib_per_1000']:.2f} MiB, server RSS "
            f"{row['server_rss_mib_per_1000']:.2f} MiB; worker CPU idle "
            f"{row['worker_cpu_percent_idle']:.2f}%; describe p50 {row['describe_ms']['p50']:.1f} "
            f"ms p99 {row['describe_ms']['p99']:.1f} ms",
            flush=True,
        )
    ratios = {
        key: rows[0][key] / rows[1][key] if len(rows) == 2 and rows[1][key] else None
        for key in ("sqlite_mib_per_1000", "server_rss_mib_per_1000")
    }
    print("ours/baseline: " + "  ".join(f"{k} = {v:.2f}" for k, v in ratios.items() if v))
    path = write_result(
        "hold", {"limit": limit, "seconds": seconds, "rows": rows, "ratios": ratios}
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--full", action="store_true", help="100,000 jobs within 10 minutes")
    parser.add_argument(
        "--sides", nargs="+", choices=["ours", "baseline"], default=["ours", "baseline"]
    )
    args = parser.parse_args()
    if args.full:
        args.jobs, args.seconds = 100_000, 600
    asyncio.run(main(args.jobs, args.seconds, args.sides))
