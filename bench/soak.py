"""Soak: a steady open-loop load through the HTTP API; does any process's memory grow per job?

    python -m bench.soak [--rate 12] [--minutes 15] [--warmup 0.25] [--cron "*/5 * * * * *"]
                         [--metrics] [--worker-env NAME=VALUE ...]

A fresh dev server (SQLite file, WAL), one worker process and one ``jobs api`` process. Every
1/``--rate`` seconds a ``POST /jobs`` schedules a one-shot due 2-20 s ahead (whatever the
previous requests are doing: an open loop), for ``--minutes``; a cron (every 5 s by default)
runs beside them. Every SAMPLE_EVERY seconds it reads the RSS of the worker, the API and the
dev server. After the warm-up (the first ``--warmup`` share of the run: the worker's
workflow cache, the server's caches and the allocators fill then) it fits each process's
RSS against the jobs sent so far (least squares) and reports the slope in MiB per 10,000
jobs with its r². A process that keeps something per job without bound shows a steady slope
with r² near 1; a flat one, a slope near 0 (r² then means little).

Then it waits for the last jobs (up to DRAIN_MAX after the last run_at) and reads the
handlers' start records: jobs lost (never started), started more than once, started before
their run_at, the fire lag (overall and per quarter of the run: a lag that grows quarter by
quarter is a backlog, which holds memory in every process, so its slopes are no leak), and
the cron's slots that ran. ``--metrics`` runs the worker with its Prometheus endpoint on, as
the compose stack does; ``--worker-env`` sets a variable in the worker's environment (an
allocator setting, say). Writes JSON to bench/results.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from bench.common import OURS_QUEUE, rss_mib, side, start_api, start_records, summary, write_result
from jobctl.starter.dev.devserver import free_port

SAMPLE_EVERY = 10.0  # seconds between RSS readings
DUE_MIN, DUE_MAX = 2.0, 20.0  # a job is due this many seconds after it is sent
DRAIN_MAX = 300.0  # after the last run_at: the longest the bench waits for jobs to start
CALLERS = 64  # the most requests in flight at once (the API's connections)
PER = 10_000  # slopes are per this many jobs


def fit(xs: list[float], ys: list[float]) -> dict[str, float]:
    """Least squares of ``ys`` on ``xs``: slope, intercept and r² (0 for a flat line)."""
    slope, intercept = statistics.linear_regression(xs, ys)
    flat = len(set(ys)) < 2
    r2 = 0.0 if flat else statistics.correlation(xs, ys) ** 2
    return {"slope": slope, "intercept": intercept, "r2": r2}


def slopes(samples: list[dict[str, float]], warmup: float) -> dict[str, dict[str, float]]:
    """Per process: the RSS slope in MiB per PER jobs sent, over the samples after the first
    ``warmup`` share of the run."""
    last = samples[-1]["t"]
    kept = [row for row in samples if row["t"] >= warmup * last]
    if len({row["sent"] for row in kept}) < 2:
        raise SystemExit("too short a run to fit a slope: give it a few minutes")
    xs = [row["sent"] for row in kept]
    out = {}
    for name in ("worker", "api", "server"):
        line = fit(xs, [row[name] for row in kept])
        out[name] = {
            "mib_per_10k_jobs": line["slope"] * PER,
            "r2": line["r2"],
            "rss_first": kept[0][name],
            "rss_last": kept[-1][name],
            "samples": len(kept),
        }
    return out


class Load:
    """The open loop: ``rate`` POST /jobs a second, each its own request."""

    def __init__(self, http: httpx.AsyncClient, rate: float) -> None:
        self.http = http
        self.rate = rate
        self.sent: dict[str, float] = {}  # job id -> run_at (epoch)
        self.refused: Counter[str] = Counter()  # status or error -> count
        self.gate = asyncio.Semaphore(CALLERS)
        self.tasks: set[asyncio.Task[None]] = set()

    async def post(self, job_id: str, run_at: datetime) -> None:
        spec = {"id": job_id, "name": "soak", "handler": "bench.noop", "run_at": run_at.isoformat()}
        async with self.gate:
            try:
                answer = await self.http.post("/jobs", json=spec)
            except httpx.HTTPError as err:
                self.refused[type(err).__name__] += 1
                return
        if answer.status_code == 201:
            self.sent[job_id] = run_at.timestamp()
        else:
            self.refused[str(answer.status_code)] += 1

    async def run(self, seconds: float) -> None:
        began, n = time.monotonic(), 0
        while time.monotonic() - began < seconds:
            run_at = datetime.now(UTC) + timedelta(seconds=random.uniform(DUE_MIN, DUE_MAX))
            task = asyncio.create_task(self.post(f"soak-{n}", run_at))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            n += 1
            await asyncio.sleep(max(began + n / self.rate - time.monotonic(), 0.0))
        await asyncio.gather(*list(self.tasks))


async def sample(
    pids: dict[str, int], load: Load, began: float, rows: list[dict[str, float]]
) -> None:
    """An RSS reading of every process each SAMPLE_EVERY seconds, with the jobs sent so far."""
    while True:
        row = {"t": time.monotonic() - began, "sent": float(len(load.sent))}
        rows.append(row | {name: rss_mib(pid) for name, pid in pids.items()})
        await asyncio.sleep(SAMPLE_EVERY)


def accounting(records: Path, sent: dict[str, float], cron_id: str) -> dict[str, Any]:
    """What the handlers' start records say of the one-shots sent and of the cron's slots."""
    rows = start_records(records)
    starts = Counter(row["key"] for row in rows)
    first: dict[str, float] = {}
    for row in rows:
        first.setdefault(row["key"], row["started"])
    lags = [first[key] - due for key, due in sent.items() if key in first]
    cron_slots = sorted({row["key"] for row in rows if row["key"].startswith(f"{cron_id}@")})
    order = list(sent)  # in the order sent
    quarters = [order[i * len(order) // 4 : (i + 1) * len(order) // 4] for i in range(4)]
    by_quarter = [[first[k] - sent[k] for k in keys if k in first] for keys in quarters]
    return {
        "jobs": len(sent),
        "lost": sum(1 for key in sent if key not in first),
        "ran_twice": sum(1 for key in sent if starts[key] > 1),
        "early": sum(1 for lag in lags if lag < 0),
        # How early the earliest start came (seconds before run_at; 0: none early).
        "most_early": max([0.0, *(-lag for lag in lags)]),
        "lag": summary(lags) if lags else None,
        "lag_by_quarter": [summary(q) if q else None for q in by_quarter],
        "cron_slots_run": len(cron_slots),
        "cron_ran_twice": sum(1 for key in cron_slots if starts[key] > 1),
    }


async def drained(records: Path, sent: dict[str, float]) -> None:
    """Return once every job sent has started, or DRAIN_MAX after the last one was due."""
    give_up = max(sent.values(), default=time.time()) + DRAIN_MAX
    while time.time() < give_up:
        started = {row["key"] for row in start_records(records)}
        if started.issuperset(sent):
            return
        await asyncio.sleep(5.0)


async def run(
    rate: float, minutes: float, warmup: float, cron: str, metrics: bool, worker_env: list[str]
) -> dict[str, Any]:
    async with side() as (server, _client, workers, records):
        env = dict(item.split("=", 1) for item in worker_env)
        if metrics:
            env["JOBS_METRICS_PORT"] = str(free_port())
        worker = workers.ours(server, records, **env)
        api, url = await start_api(server)
        assert server.process is not None
        pids = {"worker": worker.pid, "api": api.pid, "server": server.process.pid}
        limits = httpx.Limits(max_connections=CALLERS)
        try:
            async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:
                cron_spec = {"id": "soak-cron", "name": "soak-cron", "handler": "bench.noop"}
                answer = await http.post("/jobs", json=cron_spec | {"cron": cron})
                assert answer.status_code == 201, answer.text
                load = Load(http, rate)
                rows: list[dict[str, float]] = []
                began = time.monotonic()
                sampler = asyncio.create_task(sample(pids, load, began, rows))
                await load.run(minutes * 60)
                sampler.cancel()
                await drained(records, load.sent)
        finally:
            api.terminate()
            api.wait()
        return {
            "rate": rate,
            "minutes": minutes,
            "warmup": warmup,
            "cron": cron,
            "metrics": metrics,
            "worker_env": worker_env,
            "refused": dict(load.refused),
            "slopes": slopes(rows, warmup),
            "accounting": accounting(records, load.sent, "soak-cron"),
            "samples": rows,
        }


def show(result: dict[str, Any]) -> None:
    for name, line in result["slopes"].items():
        print(
            f"{name:7}: {line['mib_per_10k_jobs']:+7.2f} MiB per 10k jobs (r² {line['r2']:.2f}); "
            f"RSS {line['rss_first']:.0f} -> {line['rss_last']:.0f} MiB after the warm-up"
        )
    books = result["accounting"]
    lag = books["lag"]
    print(
        f"jobs {books['jobs']}: lost {books['lost']}, ran twice {books['ran_twice']}, early "
        f"{books['early']} (at most {books['most_early']:.3f}s); lag p50 {lag['p50']:.3f}s "
        f"p99 {lag['p99']:.3f}s; cron slots run "
        f"{books['cron_slots_run']} (twice: {books['cron_ran_twice']}); refused "
        f"{result['refused'] or 'none'}"
        if lag
        else f"jobs {books['jobs']}: none started"
    )
    p99s = [f"{q['p99']:.2f}s" if q else "-" for q in books["lag_by_quarter"]]
    print(f"lag p99 by quarter of the run: {', '.join(p99s)}")


async def main(
    rate: float, minutes: float, warmup: float, cron: str, metrics: bool, worker_env: list[str]
) -> None:
    os.environ["JOBS_TASK_QUEUE"] = OURS_QUEUE
    result = await run(rate, minutes, warmup, cron, metrics, worker_env)
    show(result)
    print(f"wrote {write_result('soak', result)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=float, default=12.0, help="jobs sent per second")
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument(
        "--warmup", type=float, default=0.25, help="share of the run left out of the fit"
    )
    parser.add_argument("--cron", default="*/5 * * * * *", help="the cron beside the jobs")
    parser.add_argument(
        "--metrics", action="store_true", help="the worker serves Prometheus metrics"
    )
    parser.add_argument(
        "--worker-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable for the worker (repeatable), e.g. MALLOC_ARENA_MAX=2",
    )
    args = parser.parse_args()
    asyncio.run(
        main(args.rate, args.minutes, args.warmup, args.cron, args.metrics, args.worker_env)
    )
