"""Prometheus metrics from a real ``jobctl worker`` on the dev server: the scheduler's ``jobs_*``
counters and histograms per handler, the SDK's ``temporal_*``, and no endpoint unless asked."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from jobctl.activities import metrics
from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.starter.dev.devserver import free_port
from jobctl.workflows.models import JobStatus
from jobctl.workflows.names import handler_task_queue
from tests.helpers.poll import eventually
from tests.helpers.processes import Workers, jobs
from tests.helpers.prometheus import parse, scrape, total

pytestmark = [
    pytest.mark.devserver,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc for sockets"),
]
HANDLERS = load_handlers("tests.handlers").names()
COUNTERS = (metrics.STARTED, metrics.SUCCEEDED, metrics.FAILED_ATTEMPTS, metrics.DEAD)

# Per handler: (started, succeeded, failed attempts, dead) for the jobs scheduled below.
# log: 3 jobs succeed at once. demo.sleep: one fails once then succeeds (2 attempts), one
# poison job with max_attempts 1 fails its only attempt and dies. test.permanent: one attempt,
# a permanent error, dead.
EXPECTED = {
    "log": (3, 3, 0, 0),
    "demo.sleep": (3, 1, 2, 1),
    "test.permanent": (1, 0, 1, 1),
}
RETRY_BACKOFF = 6.0  # the flaky job's retry is due this long after its failure


def counts(text: str, queue: str) -> dict[str, tuple[int, ...]]:
    """Each handler's counters: attempts' on the handler's queue, jobs_dead where the DLQ's
    alert activity counts it (the job queue)."""
    samples = parse(text)

    def where(name: str, handler: str) -> str:
        return queue if name == metrics.DEAD else handler_task_queue(queue, handler)

    return {
        handler: tuple(
            int(total(samples, name, handler=handler, task_queue=where(name, handler)))
            for name in COUNTERS
        )
        for handler in EXPECTED
    }


def listening(pid: int) -> set[tuple[str, int]]:
    """The TCP addresses process ``pid`` listens on (IPv4 as dotted quads), from /proc."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if link.startswith("socket:["):
            inodes.add(link[len("socket:[") : -1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # 0A: LISTEN
                host, port = local.split(":")
                if len(host) == 8:
                    host = socket.inet_ntoa(bytes.fromhex(host)[::-1])
                found.add((host, int(port, 16)))
    return found


@pytest.fixture
def queue_env(cli: dict[str, str]) -> dict[str, str]:
    """The workers' environment, without whatever metrics settings the test's shell has."""
    for name in ("JOBS_METRICS_PORT", "JOBS_METRICS_HOST"):  # whatever the test's shell has
        cli.pop(name, None)
    return cli


async def schedule(client: Client, queue: str, name: str, handler: str, **spec: Any) -> str:
    job_id = f"metrics-{name}-{uuid.uuid4().hex[:8]}"
    data = {"id": job_id, "name": name, "handler": handler, "delay": 0, **spec}
    await operations.schedule(client, data, HANDLERS, task_queue=queue)
    return job_id


async def wait_settled(client: Client, job_id: str, status: JobStatus, timeout: float = 60) -> None:
    await eventually(
        lambda: operations.status(client, job_id),
        lambda report: report.status == status,
        timeout=timeout,
        interval=0.3,
        what=f"{job_id} {status}",
    )


async def test_worker_serves_job_and_sdk_metrics_per_handler(
    dev_client: Client, queue_env: dict[str, str], workers: Workers
) -> None:
    queue = queue_env["JOBS_TASK_QUEUE"]
    port = free_port()
    worker = workers.start(JOBS_METRICS_PORT=str(port))
    assert f"metrics on http://127.0.0.1:{port}/metrics" in workers.log_of(worker)
    assert listening(worker.pid) == {("127.0.0.1", port)}  # loopback unless told otherwise

    settle = [await schedule(dev_client, queue, "ok", "log") for _ in range(3)]
    settle.append(
        await schedule(
            dev_client,
            queue,
            "flaky",
            "demo.sleep",
            payload={"seconds": 0.3, "fail_times": 1},
            backoff_base=RETRY_BACKOFF,
            jitter=0,
        )
    )
    dead = [
        await schedule(
            dev_client,
            queue,
            "poison",
            "demo.sleep",
            payload={"seconds": 0, "always_fail": True},
            max_attempts=1,
        ),
        await schedule(dev_client, queue, "permanent", "test.permanent"),
    ]
    for job_id in settle:
        await wait_settled(dev_client, job_id, JobStatus.DONE)
    for job_id in dead:
        await wait_settled(dev_client, job_id, JobStatus.DEAD)

    # A dead job's status is set before its park activity runs: wait for the counts to land,
    # then look again a moment later (nothing counted twice).
    deadline = time.monotonic() + 30
    while counts(text := scrape(port), queue) != EXPECTED and time.monotonic() < deadline:
        await asyncio.sleep(0.3)
    assert counts(text, queue) == EXPECTED
    await asyncio.sleep(1.5)
    text = scrape(port)
    assert counts(text, queue) == EXPECTED
    samples = parse(text)
    families = {re.sub(r"_(bucket|sum|count)$", "", name) for name, _, _ in samples}
    assert set(metrics.NAMES) <= families

    for handler, (started, succeeded, failed, _) in EXPECTED.items():
        on = {"handler": handler, "task_queue": handler_task_queue(queue, handler)}
        on["activity_type"] = "run_job"
        # One fire-lag observation per started attempt, each within 5 s of when it was due:
        # the retry counts from its retry time (RETRY_BACKOFF after the failure), not run_at.
        lag = metrics.FIRE_LAG
        assert total(samples, f"{lag}_count", **on) == started, handler
        assert total(samples, f"{lag}_bucket", le="5000", **on) == started, handler
        # One run time per ended attempt, by outcome.
        duration = f"{metrics.DURATION}_count"
        assert total(samples, duration, outcome="succeeded", **on) == succeeded, handler
        assert total(samples, duration, outcome="failed", **on) == failed, handler
    # The flaky job's attempts slept 0.3 s each: durations are milliseconds of handler time.
    flaky = {"handler": "demo.sleep", "outcome": "succeeded"}
    assert total(samples, f"{metrics.DURATION}_bucket", le="250", **flaky) == 0
    assert 300 <= total(samples, f"{metrics.DURATION}_sum", **flaky) < 2500
    # jobs_dead is counted where the alert is raised, once per parked entry: by the DLQ's
    # alert activity, never by the attempt that ended the round too.
    assert total(samples, metrics.DEAD, activity_type="notify_dead_jobs") == 2
    assert total(samples, metrics.DEAD) == 2

    # The SDK's own metrics, under their own names, on the same endpoint: one run_job task
    # per started attempt (none was lost), and the schedule-to-start latency of those the
    # worker polled (the server hands some over eagerly, without a poll).
    executed = "temporal_activity_execution_latency_count"
    # Attempts wait on their handler's queue (activities/job_worker.py).
    queues = {handler_task_queue(queue, handler) for handler in EXPECTED}
    assert sum(total(samples, executed, task_queue=q, activity_type="run_job") for q in queues) == 7
    sdk = "temporal_activity_schedule_to_start_latency_count"
    assert sum(total(samples, sdk, task_queue=q) for q in queues) >= 1
    slots = "temporal_worker_task_slots_available"
    assert total(samples, slots, task_queue=queue, worker_type="ActivityWorker") > 0

    # A worker without JOBS_METRICS_PORT listens on nothing at all.
    assert "JOBS_METRICS_PORT" not in workers.env
    quiet = workers.start()
    assert listening(quiet.pid) == set()
    assert "metrics on" not in workers.log_of(quiet)
    assert listening(worker.pid) == {("127.0.0.1", port)}  # the same check sees the first one

    # JOBS_METRICS_HOST moves the endpoint (here to another loopback address).
    elsewhere = free_port()
    moved = workers.start(JOBS_METRICS_PORT=str(elsewhere), JOBS_METRICS_HOST="127.0.0.2")
    assert listening(moved.pid) == {("127.0.0.2", elsewhere)}
    assert "temporal_worker_start" in scrape(elsewhere, host="127.0.0.2")


def test_bad_or_taken_metrics_port_stops_the_worker_with_one_line(
    cli: dict[str, str],
) -> None:
    bad = jobs({**cli, "JOBS_METRICS_PORT": "nine"}, "worker", timeout=30)
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.strip().splitlines()[-1] == (
        "error: JOBS_METRICS_PORT: must be a port number (1-65535), not 'nine'"
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = jobs({**cli, "JOBS_METRICS_PORT": str(port)}, "worker", timeout=30)
    assert busy.returncode == 2, busy.stderr
    last = busy.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: JOBS_METRICS_PORT: cannot serve metrics on 127.0.0.1:{port}")
