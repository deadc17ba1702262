"""Schedule rate: ``POST /jobs`` through the HTTP API vs the Python client directly.

    python -m bench.api_rate [--jobs 1000] [--concurrency 20] [--repeats 3]

Both schedule the same one-shot jobs (due in an hour, so nothing runs) against one fresh dev
server (SQLite, WAL); the API is a separate ``jobs api`` process, as in production. Repeats
alternate the two so neither always runs on a warmer server. Prints the median jobs/s of each
and their ratio, and writes JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from activities.registry import load_handlers
from bench.common import fresh_server, write_result
from starter import operations
from starter.devserver import free_port


def job(prefix: str, i: int) -> dict[str, object]:
    return {
        "id": f"{prefix}-{i}",
        "name": "rate",
        "handler": "log",
        "delay": "1h",
        "payload": {"i": i},
    }


async def timed(count: int, concurrency: int, submit: Callable[[int], Awaitable[None]]) -> float:
    """Jobs per second for ``count`` submissions, ``concurrency`` at a time."""
    queue = iter(range(count))

    async def lane() -> None:
        for i in queue:
            await submit(i)

    started = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return count / (time.perf_counter() - started)


async def main(jobs: int, concurrency: int, repeats: int) -> None:
    async with fresh_server() as (server, client):
        port = free_port()
        env = {**os.environ, "TEMPORAL_ADDRESS": server.address}
        api = subprocess.Popen(
            [str(Path(sys.executable).parent / "jobs"), "api", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        handlers = load_handlers().names()
        try:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}",
                timeout=60,
                limits=httpx.Limits(max_connections=concurrency),
            ) as http:
                while True:
                    try:
                        if (await http.get("/healthz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    await asyncio.sleep(0.2)
                rates: dict[str, list[float]] = {"api": [], "client": []}
                for repeat in range(repeats):
                    order = ["api", "client"] if repeat % 2 == 0 else ["client", "api"]
                    for kind in order:
                        prefix = f"{kind}-{uuid.uuid4().hex[:6]}"

                        async def via_api(i: int, prefix: str = prefix) -> None:
                            answer = await http.post("/jobs", json=job(prefix, i))
                            assert answer.status_code == 201, answer.text

                        async def via_client(i: int, prefix: str = prefix) -> None:
                            await operations.schedule(client, job(prefix, i), handlers)

                        rate = await timed(
                            jobs, concurrency, via_api if kind == "api" else via_client
                        )
                        rates[kind].append(rate)
                        print(f"  run {repeat + 1} {kind:6}: {rate:6.1f} jobs/s", flush=True)
        finally:
            api.terminate()
            api.wait()
    medians = {kind: statistics.median(values) for kind, values in rates.items()}
    ratio = medians["api"] / medians["client"]
    print(
        f"POST /jobs median {medians['api']:.1f} jobs/s; Python client median "
        f"{medians['client']:.1f} jobs/s; API/client = {ratio:.2f} "
        f"({jobs} jobs x {repeats} repeats, concurrency {concurrency})"
    )
    path = write_result(
        "api_rate",
        {
            "jobs": jobs,
            "concurrency": concurrency,
            "rates": rates,
            "medians": medians,
            "ratio_api_to_client": ratio,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.jobs, args.concurrency, args.repeats))
