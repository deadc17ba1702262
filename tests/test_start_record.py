"""A handler starts only once its attempt's start is on record with the server
(activities/start_record.py): while the server cannot be reached the attempt waits for it.

The server is frozen (SIGSTOP) just before run_at, after the attempt's go check and while the
worker still counts it alive, so the attempt reaches its start record with the server silent.
It used to give up on the record after min(lease / 3, 10 s) and run the handler anyway; a
server SIGKILLed at that moment then ran the job a second time after restarting (seen in a
clean-clone run of the restart drill: two jobs done twice)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jobctl.starter import operations
from jobctl.starter.dev.devserver import DevServer
from tests.helpers.drills import Tally, read_records
from tests.helpers.jobs import HANDLERS
from tests.helpers.poll import eventually
from tests.helpers.processes import Workers, cli_env

pytestmark = pytest.mark.devserver

AHEAD = 14.0  # past the go check (3-9 s before run_at) and a worker's start-up
FROZEN = 15.0  # longer than the old give-up (10 s with the default 60 s lease)


@pytest.mark.timeout(180)
async def test_a_handler_waits_for_its_start_record_while_the_server_is_frozen(
    tmp_path: Path,
) -> None:
    server = DevServer(db_file=tmp_path / "temporal.db")
    client = await server.start()
    assert server.process is not None
    queue = f"start-{uuid.uuid4().hex[:6]}"
    records = tmp_path / "records.jsonl"
    workers = Workers(cli_env(server.address, queue), tmp_path)
    resumed_at = frozen_at = 0.0
    try:
        workers.start()
        run_at = time.time() + AHEAD
        spec = {
            "id": "frozen",
            "name": "frozen",
            "handler": "test.record",
            "payload": {"path": str(records)},
            "run_at": datetime.fromtimestamp(run_at, UTC).isoformat(),
        }
        await operations.schedule(client, spec, HANDLERS, task_queue=queue)
        await asyncio.sleep(run_at - 0.3 - time.time())
        os.kill(server.process.pid, signal.SIGSTOP)
        frozen_at = time.time()
        await asyncio.sleep(run_at + FROZEN - time.time())
        # Read before the signal: the server answers nothing until it runs again, and this
        # process may lose the CPU between the two (once the handler started 1 ms before a
        # reading taken after the signal).
        resumed_at = time.time()
        os.kill(server.process.pid, signal.SIGCONT)
        rows = await eventually(
            lambda: asyncio.sleep(0, read_records(records)),
            lambda rows: Tally.of(rows).dones["frozen"] >= 1,
            timeout=90,
            what="the job done after the server came back",
        )
        await asyncio.sleep(2)  # a second run would show up now
        rows = read_records(records)
    finally:
        if server.process is not None and server.process.poll() is None:
            os.kill(server.process.pid, signal.SIGCONT)
        workers.stop_all()
        server.stop()
    starts = [row["at"] for row in rows if row["event"] == "start"]
    assert frozen_at < run_at  # the freeze began before the handler was due
    assert len(starts) == 1, rows  # ran once
    assert starts[0] >= resumed_at, (starts[0] - frozen_at, resumed_at - frozen_at)
