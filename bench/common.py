"""Shared benchmark plumbing: a fresh dev server per run, percentiles, JSON results."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import httpx
from temporalio.client import Client

from jobctl.starter.dev.devserver import DevServer, die_with_parent, free_port

RESULTS = Path(__file__).resolve().parent / "results"
WORKER_LOGS_ENV = "BENCH_WORKER_LOGS"  # a folder: keep each worker's output there


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (pct in 0-100) of a non-empty sample."""
    ordered = sorted(values)
    rank = max(1, round(pct / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values),
        "mean": statistics.fmean(values),
    }


def steady_rate(finished: list[float], began: float, stop_at: float) -> float:
    """Completions per second between the end of the ramp (the first quarter of the run,
    while the first jobs of all loops are still in flight) and ``stop_at``. The drain after
    ``stop_at`` is left out: it runs at whatever rate the slowest loops' tails allow, which
    moved a side's whole-run figure by up to 15 % here."""
    steady_from = began + (stop_at - began) / 4
    inside = sum(1 for at in finished if steady_from <= at <= stop_at)
    return inside / (stop_at - steady_from)


@asynccontextmanager
async def fresh_server(wal: bool = True) -> AsyncIterator[tuple[DevServer, Client]]:
    """A dev server on a new SQLite file, stopped afterwards."""
    with tempfile.TemporaryDirectory(prefix="jobs-bench-") as tmp:
        server = DevServer(db_file=Path(tmp) / "temporal.db", wal=wal)
        client = await server.start()
        try:
            yield server, client
        finally:
            server.stop()


def write_result(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = RESULTS / f"{name}-{stamp}.json"
    meta = {"benchmark": name, "at": stamp, "machine": platform.node(), "cpus": os.cpu_count()}
    path.write_text(json.dumps({**meta, **data}, indent=2, default=str))
    return path


# -- processes -----------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
OURS_QUEUE = "bench-jobs"


@dataclass
class Workers:
    """Worker subprocesses for one side of a comparison; stopped on exit."""

    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def ours(self, server: DevServer, records: Path, **env: str) -> subprocess.Popen[bytes]:
        return self._start(
            [str(Path(sys.executable).parent / "jobctl"), "worker"],
            server,
            records,
            {"JOBS_TASK_QUEUE": OURS_QUEUE, "JOBS_HANDLER_MODULES": "bench.handlers", **env},
        )

    def baseline(self, server: DevServer, records: Path) -> subprocess.Popen[bytes]:
        return self._start([sys.executable, "-m", "bench.baseline", "worker"], server, records, {})

    def _start(
        self, cmd: list[str], server: DevServer, records: Path, env: dict[str, str]
    ) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            cmd,
            env={
                **os.environ,
                "TEMPORAL_ADDRESS": server.address,
                "BENCH_RECORDS": str(records),
                "PYTHONPATH": str(ROOT),
                **env,
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
        assert proc.stdout is not None
        kept = worker_log(len(self.procs))
        for raw in proc.stdout:  # ready once it says it polls
            kept.write(raw)
            if b"polling" in raw:
                break
        else:
            raise RuntimeError(f"worker {cmd} exited early")
        threading.Thread(target=drain, args=(proc.stdout, kept), daemon=True).start()
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()


BUSY_LOOP = "while True: pass"


@contextmanager
def background_load(processes: int) -> Iterator[None]:
    """``processes`` busy loops (one core each) beside the block: a machine that is doing
    something else, as a scheduler's usually is. Stopped on exit, by PID."""
    busy = [
        subprocess.Popen([sys.executable, "-c", BUSY_LOOP], preexec_fn=die_with_parent)
        for _ in range(processes)
    ]
    try:
        yield
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()


def worker_log(index: int) -> BinaryIO:
    """Where a worker's output goes: a file under $BENCH_WORKER_LOGS (kept after the run, for
    tracing), else nowhere."""
    folder = os.environ.get(WORKER_LOGS_ENV)
    if not folder:
        return open(os.devnull, "wb")
    Path(folder).mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    return open(Path(folder) / f"worker-{stamp}-{os.getpid()}-{index}.log", "wb")


def drain(pipe: BinaryIO, kept: BinaryIO) -> None:
    """Copy a worker's output until it closes (an undrained pipe would block the worker)."""
    with kept:
        for raw in pipe:
            kept.write(raw)


@asynccontextmanager
async def side(
    wal: bool = True, server_type: type[DevServer] = DevServer, **server_options: Any
) -> AsyncIterator[tuple[DevServer, Client, Workers, Path]]:
    """A fresh dev server (SQLite file; ``server_type`` for one with more options), a records
    file and a worker group, all cleaned up."""
    with tempfile.TemporaryDirectory(prefix="jobs-bench-") as tmp:
        server = server_type(db_file=Path(tmp) / "temporal.db", wal=wal, **server_options)
        client = await server.start()
        workers = Workers()
        try:
            yield server, client, workers, Path(tmp) / "records.jsonl"
        except BaseException:
            # Its output goes with the temporary directory: say why a server died mid-run.
            if server.process is not None and server.process.poll() is not None:
                exited = f"dev server exited with {server.process.returncode}"
                print(f"{exited}; its output ends: {server.output_tail()}", file=sys.stderr)
            raise
        finally:
            workers.stop()
            server.stop()


def start_records(records: Path) -> list[dict[str, Any]]:
    """Every handler start noted in a records file, in order (none before the first)."""
    if not records.exists():
        return []
    return [json.loads(line) for line in records.read_text().splitlines()]


def read_starts(records: Path) -> dict[str, tuple[float, float]]:
    """key -> (scheduled, first start) from a records file."""
    starts: dict[str, tuple[float, float]] = {}
    for row in start_records(records):
        starts.setdefault(row["key"], (row["scheduled"], row["started"]))
    return starts


def herd_fields(
    records: Path, starts: dict[str, tuple[float, float]], due: float
) -> dict[str, Any]:
    """What a herd's row says of its handler starts (``starts`` from :func:`read_starts`, due
    at epoch ``due``): fire lags, drain, early starts, how many keys' handlers started more
    than once, and how many keys' handlers ran on a second or later Temporal attempt (one lost
    before its handler and retried, or a failed one: a herd on time needs none)."""
    lags = sorted(start - scheduled for scheduled, start in starts.values())
    rows = start_records(records)
    handled = Counter(row["key"] for row in rows)
    return {
        "started": len(starts),
        "lag": summary(lags) if lags else None,
        "drain_seconds": max(start for _, start in starts.values()) - due if starts else None,
        "early": sum(1 for lag in lags if lag < 0),
        "started_twice": sum(1 for n in handled.values() if n > 1),
        "retried": len({row["key"] for row in rows if (row.get("attempt") or 1) > 1}),
        "lags": [round(lag, 4) for lag in lags],  # for the report's CDF
    }


async def wait_for_starts(
    records: Path, count: int, timeout: float
) -> dict[str, tuple[float, float]]:
    deadline = time.monotonic() + timeout
    while len(starts := read_starts(records)) < count and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    return starts


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def machine_jiffies() -> tuple[int, int]:
    """The machine's CPU time so far (all cores, clock ticks): (total, idle including I/O
    wait), from the first line of /proc/stat. Two readings give the idle share between them."""
    ticks = [int(field) for field in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(ticks), ticks[3] + ticks[4]


def idle_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of the machine's CPU time that was idle between two ``machine_jiffies``."""
    total = after[0] - before[0]
    return (after[1] - before[1]) / total if total else 0.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def gather_limited(limit: int, jobs: Iterable[Awaitable[Any]]) -> list[Any]:
    """Await ``jobs`` with at most ``limit`` in flight."""
    gate = asyncio.Semaphore(limit)

    async def one(job: Awaitable[Any]) -> Any:
        async with gate:
            return await job

    return await asyncio.gather(*(one(job) for job in jobs))


async def start_api(server: DevServer, **env: str) -> tuple[subprocess.Popen[bytes], str]:
    """A ``jobctl api`` process on a free port for ``server`` (our bench queue and handlers,
    plus ``env``), once its /healthz answers."""
    port = free_port()
    environment = {
        **os.environ,
        "TEMPORAL_ADDRESS": server.address,
        "JOBS_TASK_QUEUE": OURS_QUEUE,
        "JOBS_HANDLER_MODULES": "bench.handlers",
        "PYTHONPATH": str(ROOT),
        **env,
    }
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "jobctl"), "api", "--port", str(port)],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        preexec_fn=die_with_parent,
    )
    url = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient() as http:
        for _ in range(300):
            try:
                if (await http.get(f"{url}/healthz")).status_code == 200:
                    return proc, url
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError("jobs api did not come up")
