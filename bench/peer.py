"""The peer: herd and sustained on procrastinate (a PostgreSQL SKIP LOCKED job queue).

    python -m bench.peer [--jobs 1000] [--ahead 60] [--seconds 60] [--loops 20] [--poll 5]
    python -m bench.peer worker    # the worker subprocess (PEER_CONNINFO, PEER_POLL, BENCH_RECORDS)

Each benchmark gets its own PostgreSQL 15 (fresh initdb in a temp dir, stopped and removed
afterwards), procrastinate's schema and one worker subprocess. The task is a no-op that notes
its start like ``bench.handlers`` does, so rows have the same keys as bench/herd.py and
bench/sustained.py rows, with side="peer".

Procrastinate wakes its worker by NOTIFY when a job is *inserted*; a job deferred with
``schedule_at`` is only picked up by the next fetch after it is due, which happens on the next
insert notification or every ``fetch_job_polling_interval`` (``--poll``, default procrastinate's
own 5 s). That interval bounds the fire lag of scheduled jobs, and each fetch restarts it, so
the herd's polls fall ``poll`` apart from the last defer: when ``ahead`` is a multiple of
``poll`` the first poll after the due time comes about ``schedule_seconds`` after it. In the
sustained loop, callers whose jobs finish in the same fetch defer together and wait together
for a poll, so with few callers latency sits near ``poll`` (5 s) rather than 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import procrastinate
import psycopg
from procrastinate.worker import FETCH_JOB_POLLING_INTERVAL

from bench.common import (
    ROOT,
    cpu_seconds,
    gather_limited,
    herd_fields,
    steady_rate,
    summary,
    wait_for_starts,
)
from bench.handlers import RECORDS_ENV, note_start
from jobctl.starter.dev.devserver import die_with_parent, free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_USER = "nobody"  # initdb and postgres refuse to run as root; used only when we are root
CONNINFO_ENV = "PEER_CONNINFO"
POLL_ENV = "PEER_POLL"
CALLERS = 50  # concurrent deferring callers, as in bench/herd.py
# Like our worker's JOBS_MAX_CONCURRENT_JOBS default (100). Procrastinate runs async tasks as
# asyncio tasks on one event loop, so 100 no-op jobs at once cost little.
CONCURRENCY = 100
# The worker's pool (psycopg_pool defaults to 4): every finished job writes its status, so a
# few more connections keep those writes from queueing behind each other. LISTEN uses its own.
WORKER_POOL = 10
# What herd.py and sustained.py --peer use: the peer gets tuned too (its 5 s default poll
# would put every scheduled job up to 5 s late).
TUNED_POLL = 1.0
WATCH_INTERVAL = 0.05  # seconds between the sustained loop's shared status queries

# The task has an explicit name, so running this file as __main__ (``python -m bench.peer``)
# is harmless: drop procrastinate's warning about an app defined in __main__.
logging.getLogger("procrastinate.blueprints").addFilter(
    lambda record: getattr(record, "action", None) != "app_defined_in___main__"
)
app = procrastinate.App(connector=procrastinate.PsycopgConnector())


@app.task(name="bench.peer.noop")
async def noop(key: str, scheduled: float) -> None:
    note_start(key, scheduled)


# -- PostgreSQL ----------------------------------------------------------------------------


def _as_user() -> dict[str, Any]:
    """Popen arguments that drop root to PG_USER (nothing when not root)."""
    if os.geteuid() != 0:
        return {}
    entry = pwd.getpwnam(PG_USER)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _start_postgres(tmp: Path, port: int) -> subprocess.Popen[bytes]:
    user = _as_user()
    if user:
        os.chown(tmp, user["user"], user["group"])
    data = tmp / "data"
    initdb: list[str | Path] = [
        PG_BIN / "initdb",
        f"--pgdata={data}",
        "--username=postgres",
        "--auth=trust",
    ]
    # --no-sync only skips syncing initdb's own files; the server keeps fsync on.
    initdb += ["--no-locale", "--encoding=UTF8", "--no-sync"]
    subprocess.run(initdb, check=True, capture_output=True, **user)
    # Durability stays at the defaults (fsync, synchronous_commit, full_page_writes on), as a
    # production queue runs; shared_buffers' 128 MB default holds a few thousand job rows.
    # max_connections=200 leaves room for the worker's pool and listener plus 50 callers.
    settings = {
        "listen_addresses": "127.0.0.1",
        "port": str(port),
        "unix_socket_directories": "",
        "max_connections": "200",
    }
    flags = [arg for name, value in settings.items() for arg in ("-c", f"{name}={value}")]
    with open(tmp / "postgres.log", "wb") as log:
        return subprocess.Popen(
            [PG_BIN / "postgres", "-D", data, *flags],
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
            **user,
        )


def _stop(proc: subprocess.Popen[bytes], sig: int, grace: float) -> None:
    """Send ``sig``, wait up to ``grace`` seconds, then SIGKILL."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@asynccontextmanager
async def postgres(timeout: float = 60.0) -> AsyncIterator[str]:
    """A fresh PostgreSQL 15 on 127.0.0.1 (free port, user ``postgres``, trust auth), yielding
    its conninfo once it accepts connections (waits up to ``timeout``, default 60 s). Always
    stopped (fast shutdown, SIGKILL after 30 s) and its temp dir removed."""
    tmp = Path(tempfile.mkdtemp(prefix="jobs-bench-pg-"))
    proc: subprocess.Popen[bytes] | None = None
    try:
        port = free_port()
        proc = _start_postgres(tmp, port)
        conninfo = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
        deadline = time.monotonic() + timeout
        while True:
            try:
                await (await psycopg.AsyncConnection.connect(conninfo, connect_timeout=5)).close()
                break
            except psycopg.OperationalError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log = (tmp / "postgres.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"postgres did not start:\n{log}") from None
                await asyncio.sleep(0.1)
        yield conninfo
    finally:
        if proc is not None:
            _stop(proc, signal.SIGINT, 30)  # SIGINT is the "fast" shutdown: pg_ctl stop -m fast
        shutil.rmtree(tmp, ignore_errors=True)


def postgres_cpu_seconds(postmaster: int) -> float:
    """CPU of the postmaster, its reaped children and its live ones (backends, bgwriter...)."""
    fields = Path(f"/proc/{postmaster}/stat").read_text().rsplit(")", 1)[1].split()
    total = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                total += cpu_seconds(int(stat.parent.name))
        except (OSError, ValueError):
            pass  # exited meanwhile: its CPU is in the postmaster's reaped-children time now
    return total


# -- one side: database, schema, worker ----------------------------------------------------


@asynccontextmanager
async def peer_side(poll: float) -> AsyncIterator[tuple[subprocess.Popen[bytes], Path, int]]:
    """PostgreSQL with procrastinate's schema, ``app`` open on it (a pool of up to CALLERS
    connections) and a ready worker polling every ``poll`` seconds. Yields the worker, the
    records file and the postmaster pid; everything is stopped afterwards."""
    with tempfile.TemporaryDirectory(prefix="jobs-bench-peer-") as tmp:
        records, log = Path(tmp) / "records.jsonl", Path(tmp) / "worker.log"
        async with postgres() as conninfo:
            connector = procrastinate.PsycopgConnector(conninfo=conninfo, max_size=CALLERS)
            with app.replace_connector(connector):
                async with app.open_async():
                    await app.schema_manager.apply_schema_async()
                    row = await connector.execute_query_one_async("SELECT pg_backend_pid() pid")
                    stat = Path(f"/proc/{row['pid']}/stat").read_text()
                    postmaster = int(stat.rsplit(")", 1)[1].split()[1])
                    with open(log, "wb") as out:
                        worker = subprocess.Popen(
                            [sys.executable, "-m", "bench.peer", "worker"],
                            env={
                                **os.environ,
                                CONNINFO_ENV: conninfo,
                                POLL_ENV: str(poll),
                                RECORDS_ENV: str(records),
                                "PYTHONPATH": str(ROOT),
                            },
                            stdout=out,
                            stderr=subprocess.STDOUT,
                            preexec_fn=die_with_parent,
                        )
                    try:
                        # ready once it registered itself; it LISTENs right after
                        while not await connector.execute_query_all_async(
                            "SELECT 1 FROM procrastinate_workers"
                        ):
                            if worker.poll() is not None:
                                raise RuntimeError(f"peer worker exited:\n{log.read_text()}")
                            await asyncio.sleep(0.1)
                        yield worker, records, postmaster
                    finally:
                        _stop(worker, signal.SIGTERM, 30)


# -- the benchmarks ------------------------------------------------------------------------


async def herd(
    count: int, ahead: float, poll: float = FETCH_JOB_POLLING_INTERVAL
) -> dict[str, Any]:
    """``count`` jobs due at one instant ``ahead`` seconds from now, deferred one per call by
    CALLERS concurrent callers (as bench/herd.py does; procrastinate's ``batch_defer_async``
    would be one INSERT). The worker polls every ``poll`` seconds (default 5)."""
    async with peer_side(poll) as (_, records, _):
        due = time.time() + ahead
        deferrer = noop.configure(schedule_at=datetime.fromtimestamp(due, UTC))
        started = time.monotonic()
        await gather_limited(
            CALLERS, (deferrer.defer_async(key=f"h-{i}", scheduled=due) for i in range(count))
        )
        scheduling = time.monotonic() - started
        starts = await wait_for_starts(records, count, timeout=ahead + 900)
        return {
            "side": "peer",
            "jobs": count,
            "schedule_seconds": scheduling,
            **herd_fields(records, starts, due),
        }


class Watcher:
    """Waits for jobs to finish: one status query for all waited-on jobs every WATCH_INTERVAL
    seconds, instead of one query per waiting caller."""

    def __init__(self) -> None:
        self.waiting: dict[int, asyncio.Future[None]] = {}

    async def wait(self, job_id: int) -> None:
        self.waiting[job_id] = asyncio.get_running_loop().create_future()
        await self.waiting[job_id]

    async def run(self) -> None:
        while True:
            await asyncio.sleep(WATCH_INTERVAL)
            if not self.waiting:
                continue
            rows = await app.connector.execute_query_all_async(
                "SELECT id, status::text FROM procrastinate_jobs"
                " WHERE id = ANY(%(ids)s) AND status NOT IN ('todo', 'doing')",
                ids=list(self.waiting),
            )
            for row in rows:
                done = self.waiting.pop(row["id"])
                if row["status"] == "succeeded":
                    done.set_result(None)
                else:
                    done.set_exception(RuntimeError(f"job {row['id']} {row['status']}"))


async def sustained(
    seconds: float, loops: int, poll: float = FETCH_JOB_POLLING_INTERVAL, due_in: float = 1.0
) -> dict[str, Any]:
    """``loops`` callers each defer a job due in ``due_in`` seconds (default 1) and wait for it
    to succeed, repeating for ``seconds``; the worker polls every ``poll`` seconds (default 5)."""
    async with peer_side(poll) as (worker, _, postmaster):
        cpu_before = {"worker": cpu_seconds(worker.pid), "server": postgres_cpu_seconds(postmaster)}
        watcher = Watcher()
        watching = asyncio.create_task(watcher.run())
        latencies: list[float] = []
        finished: list[float] = []  # monotonic completion times
        stop_at = time.monotonic() + seconds

        async def loop(lane: int) -> None:
            n = 0
            while time.monotonic() < stop_at:
                started = time.monotonic()
                due = time.time() + due_in
                job_id = await noop.configure(
                    schedule_at=datetime.fromtimestamp(due, UTC)
                ).defer_async(key=f"s-{lane}-{n}", scheduled=due)
                await watcher.wait(job_id)
                finished.append(time.monotonic())
                latencies.append(finished[-1] - started)
                n += 1

        began = time.monotonic()
        try:
            await asyncio.gather(*(loop(lane) for lane in range(loops)))
        finally:
            watching.cancel()
        elapsed = time.monotonic() - began
        done = max(len(latencies), 1)
        cpu_after = {"worker": cpu_seconds(worker.pid), "server": postgres_cpu_seconds(postmaster)}
        return {
            "side": "peer",
            "completed": len(latencies),
            "seconds": elapsed,
            "jobs_per_second": steady_rate(finished, began, stop_at),
            "overall_jobs_per_second": len(latencies) / elapsed,
            "latency": summary(latencies),
            "cpu_ms_per_job": {k: 1000 * (cpu_after[k] - cpu_before[k]) / done for k in cpu_after},
        }


async def serve() -> None:
    """The worker subprocess: procrastinate's worker on $PEER_CONNINFO, CONCURRENCY jobs."""
    connector = procrastinate.PsycopgConnector(
        conninfo=os.environ[CONNINFO_ENV], max_size=WORKER_POOL
    )
    with app.replace_connector(connector):
        async with app.open_async():
            await app.run_worker_async(
                concurrency=CONCURRENCY,
                fetch_job_polling_interval=float(os.environ[POLL_ENV]),
            )


async def main(jobs: int, ahead: float, seconds: float, loops: int, poll: float) -> None:
    row = await herd(jobs, ahead, poll)
    lag = row["lag"] or {}
    print(
        f"peer      {jobs:6} jobs: fire lag p50 {lag.get('p50', 0):7.2f}s "
        f"p95 {lag.get('p95', 0):7.2f}s p99 {lag.get('p99', 0):7.2f}s "
        f"max {lag.get('max', 0):7.2f}s drain {row['drain_seconds'] or 0:7.2f}s "
        f"(scheduled in {row['schedule_seconds']:.1f}s, early {row['early']})",
        flush=True,
    )
    row = await sustained(seconds, loops, poll)
    lat, cpu = row["latency"], row["cpu_ms_per_job"]
    print(
        f"peer     : {row['jobs_per_second']:6.1f} completed jobs/s "
        f"({row['completed']} in {row['seconds']:.0f}s); end-to-end p50 {lat['p50']:.2f}s "
        f"p99 {lat['p99']:.2f}s; cpu/job worker {cpu['worker']:.2f}ms server {cpu['server']:.2f}ms",
        flush=True,
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["worker"]:
        asyncio.run(serve())
        sys.exit()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--ahead", type=float, default=60)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--loops", type=int, default=20)
    parser.add_argument("--poll", type=float, default=FETCH_JOB_POLLING_INTERVAL)
    args = parser.parse_args()
    asyncio.run(main(args.jobs, args.ahead, args.seconds, args.loops, args.poll))
