"""Failure drills against real processes: kill things and check that nothing is lost."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from jobctl.starter.dev.devserver import free_port
from tests.helpers.drills import DrillRow, Tally, add_row, read_records, wait_for_records
from tests.helpers.processes import (
    JOBS,
    Workers,
    cli_env,
    jobs,
    jobs_json,
    kill_group,
    wait_for,
)
from tests.helpers.sqlite_fixtures import sqlite_dev_client, sqlite_dev_server  # noqa: F401

pytestmark = [pytest.mark.devserver, pytest.mark.drill, pytest.mark.timeout(300)]


def test_sigkill_worker_mid_job_then_a_second_worker_finishes_it(
    cli: dict[str, str], workers: Workers, tmp_path: Path
) -> None:
    records = tmp_path / "records.jsonl"
    first = workers.start()
    job_id = f"kill9-{uuid.uuid4().hex[:8]}"
    # 12 s: the kill lands ~3 s in with room to spare; the retry runs it whole again.
    payload = json.dumps({"path": str(records), "seconds": 12})
    jobs_json(
        cli,
        "schedule",
        "long job",
        "--handler",
        "test.record",
        "--payload",
        payload,
        "--in",
        "0",
        "--lease",
        "5s",
        "--id",
        job_id,
    )
    [started] = wait_for_records(records, 1, "start")
    assert started["worker"] == workers.identity(first) and started["attempt"] == 1
    time.sleep(3)  # well into the 12 s job
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    second = workers.start()

    report = wait_for(cli, job_id, "done", timeout=120)
    lost, finished = report["attempts"]
    assert (lost["attempt"], lost["outcome"], lost["error_type"]) == (1, "lost", "LeaseExpired")
    assert lost["worker"] == workers.identity(first)
    assert (finished["attempt"], finished["outcome"]) == (2, "succeeded")
    assert finished["worker"] == workers.identity(second)

    lines = read_records(records)
    starts = [(r["attempt"], r["pid"]) for r in lines if r["event"] == "start"]
    dones = [(r["attempt"], r["pid"]) for r in lines if r["event"] == "done"]
    assert starts == [(1, first.pid), (2, second.pid)]
    assert dones == [(2, second.pid)]
    assert {r["key"] for r in lines} == {job_id}  # one idempotency key across both attempts
    tally = Tally.of(lines)
    add_row(
        DrillRow(
            "kill -9 mid-job (12 s job, 5 s lease)",
            1,
            tally.lost({job_id}),
            tally.duplicated(),
            None,
            "re-run on the second worker, same key",
        )
    )


def test_worker_stops_cleanly_on_sigterm(workers: Workers) -> None:
    worker = workers.start()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0
    assert "stopped" in workers.log_of(worker)


def test_jobs_dev_keeps_every_job_across_restarts(tmp_path: Path) -> None:
    port, ui_port = free_port(), free_port()
    env = cli_env(f"localhost:{port}", "jobs")
    state = tmp_path / "state"
    command = [
        JOBS,
        "dev",
        "--state-dir",
        str(state),
        "--port",
        str(port),
        "--ui-port",
        str(ui_port),
    ]

    def start_stack() -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if "Ctrl-C stops everything" in line:
                return proc
        raise AssertionError(f"jobs dev did not come up: {''.join(seen)}")

    def stop_stack(proc: subprocess.Popen[str]) -> None:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        assert proc.stdout is not None
        proc.stdout.close()
        with socket.socket() as probe:  # the dev server went down with it
            assert probe.connect_ex(("127.0.0.1", port)) != 0

    stack = start_stack()
    try:
        job_id = f"persist-{uuid.uuid4().hex[:8]}"
        jobs_json(env, "schedule", "survives", "--handler", "log", "--in", "2h", "--id", job_id)
        stop_stack(stack)
        assert (state / "temporal.db").exists()
        stack = start_stack()
        report = jobs_json(env, "status", job_id)
        assert (report["job_id"], report["status"], report["name"]) == (
            job_id,
            "scheduled",
            "survives",
        )
        listed = jobs(env, "list", "--status", "scheduled")
        assert job_id in listed.stdout
        stop_stack(stack)
    finally:
        kill_group(stack)
