"""The embedded default: ``temporal server start-dev`` on a SQLite file, as a child process.

Used by ``jobctl dev``, the dev-server tests, the failure drills and the benchmarks, so all of
them run the same server the same way: search attributes registered at launch, SQLite in WAL
mode (about twice the start rate of the default journal on this class of machine).
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client

from jobctl.connection.client import connect
from jobctl.starter.dev.binaries import temporal_cli
from jobctl.workflows.models import SEARCH_ATTRIBUTES

PR_SET_PDEATHSIG = 1
START_TRIES = 3
RESTART_PAUSE = 0.5  # seconds between a start that failed and the next
OUTPUT_TAIL = 2000  # bytes of a failed server's output quoted in the error
READY_PROBE_TIMEOUT = 2.0  # seconds one "are you up?" probe may take (then another)
_TYPE_NAMES = {"KEYWORD": "Keyword", "DATETIME": "Datetime", "TEXT": "Text", "INT": "Int"}
# Task-queue priority and fairness (a job's ``priority``, ``fairness_key``/``fairness_weight``,
# carried on its workflow and ``run_job`` activity) need the server's priority-enabled
# matcher; with these keys false, backlogged tasks went out in arrival order here. Set
# explicitly, since server versions differ in their defaults.
# ``matching.enableFairness`` turns on fair dispatch by key and implies
# ``matching.useNewMatcher`` (priority levels); both are named so either reads plainly. The
# compose stack sets the same keys in deploy/temporal/dynamicconfig.yaml.
PRIORITY_DYNAMIC_CONFIG: dict[str, object] = {
    "matching.useNewMatcher": True,
    "matching.enableFairness": True,
}
# Visibility calls (listings, counts, page-token checks) are limited per namespace, 10 a second
# per frontend by default. One board refresh makes up to 10 (a page and a count per column),
# so beside an open board every `jobctl list` waited on the limit, and a CI run's API listings
# were refused outright (RESOURCE_EXHAUSTED). The stacks we ship allow 100 a second; a
# refusal that still comes is a 503 with Retry-After (starter.errors.TemporalBusy).
VISIBILITY_DYNAMIC_CONFIG: dict[str, object] = {"frontend.namespaceRPS.visibility": 100}
# start-dev re-reads the search attribute definitions from the database on every lookup unless
# told otherwise, and a job looks them up about eight times on its way (start, workflow tasks,
# visibility writes): 8 reads per job on the one SQLite connection every request shares, a
# fifth of its busy time under load (bench.sustained, the server's persistence metrics). A
# Temporal server reads them once a minute by default; ours are defined before the server
# serves anything (search_attribute_flags), so there is nothing to refresh.
SEARCH_ATTRIBUTE_CACHE_CONFIG: dict[str, object] = {
    "system.forceSearchAttributesCacheRefreshOnRead": False
}
# Everything `jobctl dev`, the tests and the benchmarks set on their dev server; the compose
# stack sets the same in deploy/temporal/dynamicconfig.yaml.
SERVER_DYNAMIC_CONFIG = (
    PRIORITY_DYNAMIC_CONFIG | VISIBILITY_DYNAMIC_CONFIG | SEARCH_ATTRIBUTE_CACHE_CONFIG
)


class ServerExited(RuntimeError):
    """The server process ended before it was ready."""


def free_port() -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def taken_ports(ports: dict[str, int]) -> list[tuple[str, str]]:
    """(flag, reason) for each of ``ports`` (flag -> port) something on this host already
    listens on, as a SpecError's problems: ``jobctl dev`` refuses to start rather than talk
    to another stack's server."""
    taken = []
    for flag, port in ports.items():
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                reason = f"port {port} is taken (another `jobctl dev`?); choose another with {flag}"
                taken.append((flag, reason))
    return taken


def die_with_parent() -> None:
    """Runs in the child before exec: on Linux, SIGKILL the server if its parent dies, so a
    crashed ``jobctl dev`` or test run never leaves a server holding the port and the file."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def search_attribute_flags() -> list[str]:
    flags = []
    for key in SEARCH_ATTRIBUTES:
        kind = _TYPE_NAMES[key.indexed_value_type.name.removeprefix("INDEXED_VALUE_TYPE_")]
        flags += ["--search-attribute", f"{key.name}={kind}"]
    return flags


@dataclass
class DevServer:
    """One ``temporal server start-dev`` process; restartable on the same database file."""

    db_file: Path | None
    port: int = 0  # 0: a free port, picked now (and again if the first start fails)
    ui_port: int | None = None  # None: headless
    wal: bool = True
    log_path: Path | None = None
    # Extra dynamic config on top of SERVER_DYNAMIC_CONFIG (a key here overrides it).
    dynamic_config: dict[str, object] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = None
    _output: IO[bytes] | None = None  # the server's output when log_path is None
    _picked_port: bool = False
    _started: bool = False

    def __post_init__(self) -> None:
        if self.port == 0:
            self.port, self._picked_port = free_port(), True

    @property
    def address(self) -> str:
        return f"localhost:{self.port}"

    def command(self) -> list[str]:
        cmd = [temporal_cli(), "server", "start-dev", "--port", str(self.port)]
        cmd += ["--ip", "127.0.0.1", "--log-level", "warn"]
        if self.db_file is not None:
            cmd += ["--db-filename", str(self.db_file)]
            if self.wal:
                cmd += ["--sqlite-pragma", "journal_mode=wal"]
        cmd += ["--ui-port", str(self.ui_port)] if self.ui_port else ["--headless"]
        for key, value in (SERVER_DYNAMIC_CONFIG | self.dynamic_config).items():
            cmd += ["--dynamic-config-value", f"{key}={json.dumps(value)}"]
        return cmd + search_attribute_flags()

    async def start(self, timeout: float = 90.0) -> Client:
        """Start the server and return a client once the search attributes are visible.

        A server that exits before it is ready is started again, up to START_TRIES times:
        start-dev binds ports of its own choosing beside ``port``, and servers starting
        together on one machine (the test workers') can choose the same one. A first start
        on a port this object picked also picks a new port; a restart keeps its port (its
        clients know it). The last exit's output is in the error."""
        tries = 1
        while True:
            self._spawn()
            try:
                client = await self.wait_ready(timeout)
            except ServerExited:
                if tries == START_TRIES:
                    raise
                tries += 1
                await asyncio.sleep(RESTART_PAUSE)
                if self._picked_port and not self._started:
                    self.port = free_port()
                continue
            self._started = True
            return client

    def _spawn(self) -> None:
        if self.db_file is not None:
            self.db_file.parent.mkdir(parents=True, exist_ok=True)
        self._close_output()
        if self.log_path is not None:
            self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        else:
            self._output = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        out = self._log or self._output
        self.process = subprocess.Popen(
            self.command(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )

    def output_tail(self) -> str:
        """The end of what the server wrote (when it writes to our temporary file)."""
        if self._output is None:
            return f"see {self.log_path}" if self.log_path is not None else ""
        self._output.seek(0)
        return self._output.read()[-OUTPUT_TAIL:].decode(errors="replace").strip()

    async def wait_ready(self, timeout: float) -> Client:
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise ServerExited(
                    f"temporal dev server exited with {self.process.returncode}; "
                    f"command: {' '.join(self.command())}; output: {self.output_tail()}"
                )
            try:
                # Bounded: whatever holds the port may accept and never answer, and a server
                # that exits meanwhile must be seen.
                client = await asyncio.wait_for(self._ready_client(), READY_PROBE_TIMEOUT)
                if client is not None:
                    return client
            except Exception as err:  # not up yet: any connection error means "try again"
                last_error = err
            await asyncio.sleep(0.25)
        self.stop()
        raise TimeoutError(f"dev server on {self.address} not ready in {timeout}s: {last_error}")

    async def _ready_client(self) -> Client | None:
        """A client, once the server answers and lists our search attributes."""
        client = await connect(self.address, "default")
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace="default")
        )
        wanted = {key.name for key in SEARCH_ATTRIBUTES}
        return client if wanted <= set(listed.custom_attributes) else None

    def kill(self) -> None:
        """SIGKILL, as a crashed machine would: nothing is flushed."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_output()

    def _close_output(self) -> None:
        for stream in (self._log, self._output):
            if stream is not None:
                stream.close()
        self._log = self._output = None
