"""Real processes for end-to-end tests and drills: ``jobs`` CLI calls and worker subprocesses."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from jobctl.connection.client import connect_options
from jobctl.starter import operations
from jobctl.starter.dev.binaries import temporal_cli
from jobctl.starter.dev.devserver import die_with_parent, free_port
from tests.helpers.cli import jobs_here_blocking
from tests.helpers.poll import eventually

ROOT = Path(__file__).resolve().parents[2]
JOBS = str(Path(sys.executable).parent / "jobctl")


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """Kill a process started with ``start_new_session`` and everything it started, if it
    still runs; close its piped output."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def cli_env(address: str, task_queue: str, **extra: str) -> dict[str, str]:
    """Environment for CLI and worker subprocesses pointed at a test server and queue."""
    return {
        **os.environ,
        "TEMPORAL_ADDRESS": address,
        "JOBS_TASK_QUEUE": task_queue,
        "JOBS_HANDLER_MODULES": "tests.handlers",
        "PYTHONPATH": str(ROOT),
        # http.post refuses loopback by default; tests' endpoints live on 127.0.0.1.
        "JOBS_HTTP_ALLOWED_HOSTS": "127.0.0.1,localhost",
        **extra,
    }


def jobs(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the installed ``jobs`` console script and capture its output."""
    return subprocess.run(
        [JOBS, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def temporal(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The real `temporal` binary, with no project code anywhere near it."""
    return subprocess.run(
        [temporal_cli(), *args, "--address", address],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
    )


def temporal_signal(
    address: str, workflow_id: str, signal: str, argument: object
) -> subprocess.CompletedProcess[str]:
    """``temporal workflow signal`` with one JSON argument, as an operator would send it."""
    return temporal(
        address,
        "workflow",
        "signal",
        "--workflow-id",
        workflow_id,
        "--name",
        signal,
        "--input",
        json.dumps(argument),
    )


def jobs_json(env: dict[str, str], *args: str) -> Any:
    """``jobs *args --json``, parsed. In this process (click's runner): the answer is the
    point, and a `jobctl` process costs ~0.8 s of CPU (a third of the suite's went there)."""
    result = jobs_here_blocking(env, *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


Answer = dict[str, Any]
# In-process status reads while waiting: a `jobctl` process costs ~0.9 s of CPU, a read ~ms.
POLL_INTERVAL = 0.3


async def wait_until_async(
    cli: dict[str, str],
    job_id: str,
    until: Callable[[Answer], object],
    *,
    timeout: float = 60,
    what: str = "",
) -> Answer:
    """``jobctl status JOB --json`` once ``until(answer)`` holds: the waiting is done in process
    (the same read, with a client built from ``cli`` as the CLI builds its own), then the CLI
    is asked once (in this process) and its answer returned, so callers assert on the CLI's
    own output. Should
    the CLI not (yet, or any longer) show it, the wait goes on within ``timeout``."""
    what = what or f"{job_id} as awaited"
    deadline = time.monotonic() + timeout
    client = await Client.connect(**connect_options(environ=cli))

    async def read() -> Answer:
        report = await operations.status(client, job_id)
        answer: Answer = report.model_dump(mode="json")
        return answer

    while True:
        left = round(max(deadline - time.monotonic(), POLL_INTERVAL), 1)
        await eventually(read, until, timeout=left, interval=POLL_INTERVAL, what=what)
        shown: Answer = await asyncio.to_thread(jobs_json, cli, "status", job_id)
        if until(shown):
            return shown
        if time.monotonic() >= deadline:
            raise AssertionError(f"`jobctl status` never showed {what}; it last showed {shown!r}")
        await asyncio.sleep(POLL_INTERVAL)


def wait_until(
    cli: dict[str, str],
    job_id: str,
    until: Callable[[Answer], object],
    *,
    timeout: float = 60,
    what: str = "",
) -> Answer:
    """:func:`wait_until_async` for synchronous code; from inside a running event loop (a sync
    helper called by an async test) it runs on its own loop in a thread."""

    def run() -> Answer:
        return asyncio.run(wait_until_async(cli, job_id, until, timeout=timeout, what=what))

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run()
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result()


def _has(status: str) -> Callable[[Answer], bool]:
    return lambda answer: answer["status"] == status


def wait_for(cli: dict[str, str], job_id: str, status: str, timeout: float = 60) -> Answer:
    """``jobctl status --json`` once the job reports ``status`` (see :func:`wait_until_async`)."""
    return wait_until(cli, job_id, _has(status), timeout=timeout, what=f"{job_id} {status}")


async def wait_for_async(
    cli: dict[str, str], job_id: str, status: str, timeout: float = 60
) -> Answer:
    """:func:`wait_for` for async tests: the event loop keeps running while it waits."""
    return await wait_until_async(
        cli, job_id, _has(status), timeout=timeout, what=f"{job_id} {status}"
    )


@dataclass
class Workers:
    """Worker subprocesses (``jobctl worker``); whatever is still running is killed at the end."""

    env: dict[str, str]
    log_dir: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, *args: str, **extra: str) -> subprocess.Popen[bytes]:
        """``jobctl worker *args`` with ``extra`` environment; returns once it polls."""
        log = self.log_dir / f"worker-{len(self.procs)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [JOBS, "worker", *args],
                env={**self.env, **extra},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        self.procs.append(proc)
        self.wait_for_log(proc, "polling task queue")
        return proc

    def log_of(self, proc: subprocess.Popen[bytes]) -> str:
        return (self.log_dir / f"worker-{self.procs.index(proc)}.log").read_text()

    def wait_for_log(self, proc: subprocess.Popen[bytes], text: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log_of(proc):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"worker never logged {text!r}:\n{self.log_of(proc)}")
            time.sleep(0.1)

    def identity(self, proc: subprocess.Popen[bytes]) -> str:
        """The worker identity as Temporal and the attempt records show it (pid@host)."""
        return f"{proc.pid}@{socket.gethostname()}"

    def stop_all(self) -> None:
        for proc in self.procs:
            kill_group(proc)


@dataclass
class Api:
    """A ``jobctl api`` subprocess on a free port."""

    env: dict[str, str]
    host: str = "127.0.0.1"
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> Api:
        self.port = self.port or free_port()
        self.proc = subprocess.Popen(
            [JOBS, "api", "--host", self.host, "--port", str(self.port)],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # up once it answers anything at all
            assert self.proc.poll() is None, "jobs api exited"
            try:
                httpx.get(f"{self.url}/healthz", timeout=2)
                return self
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError("jobs api never answered")

    def stop(self) -> None:
        if self.proc is not None:
            kill_group(self.proc)
