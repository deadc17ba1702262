"""The starter scripts (``python -m jobctl.starter.schedule_oneshot`` and friends) against the dev
server: each runs as its own process, the way the README shows it, and does its one thing."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client

from jobctl.starter import operations
from jobctl.starter.dev.devserver import DevServer
from jobctl.workflows.models import CronReport, JobStatus
from tests.helpers.poll import eventually
from tests.helpers.processes import ROOT, Workers, cli_env
from tests.helpers.temporal import end_singletons

pytestmark = pytest.mark.devserver


@pytest.fixture(scope="module")
async def queue(
    dev_server: DevServer, dev_client: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    """A task queue with one worker polling it (it publishes the handler names)."""
    name = f"scripts-{uuid.uuid4().hex[:8]}"
    workers = Workers(cli_env(dev_server.address, name), tmp_path_factory.mktemp("workers"))
    workers.start()
    yield name
    workers.stop_all()
    await end_singletons(dev_client)


def script(dev_server: DevServer, queue: str, module: str, *args: str) -> str:
    """Run ``python -m jobctl.starter.<module> *args``; its output (it must exit 0)."""
    done = subprocess.run(
        [sys.executable, "-m", f"starter.{module}", *args],
        env=cli_env(dev_server.address, queue),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def new_id(kind: str) -> str:
    return f"script-{kind}-{uuid.uuid4().hex[:8]}"


async def test_schedule_oneshot(dev_server: DevServer, dev_client: Client, queue: str) -> None:
    job_id = new_id("oneshot")
    out = script(
        dev_server, queue, "schedule_oneshot", "--id", job_id, "--in", "1h", "--task-queue", queue
    )
    assert out.startswith(f"{job_id}: scheduled")
    report = await operations.status(dev_client, job_id)
    assert report.status == JobStatus.SCHEDULED
    desc = await dev_client.get_workflow_handle(job_id).describe()
    assert desc.task_queue == queue  # the script's --task-queue, not a default
    await operations.cancel(dev_client, job_id)


async def test_schedule_cron(dev_server: DevServer, dev_client: Client, queue: str) -> None:
    cron_id = new_id("cron")
    args = ["--id", cron_id, "--cron", "0 9 * * MON-FRI", "--tz", "Europe/Paris"]
    out = script(dev_server, queue, "schedule_cron", *args, "--task-queue", queue)
    assert out.count(f"{cron_id}: a slot at") == 3
    report = await operations.status(dev_client, cron_id)
    assert isinstance(report, CronReport)
    assert report.status == JobStatus.SCHEDULED
    assert (report.cron, report.timezone) == ("0 9 * * MON-FRI", "Europe/Paris")
    await operations.cancel(dev_client, cron_id)


async def test_requeue_dead(dev_server: DevServer, dev_client: Client, queue: str) -> None:
    job_id = new_id("dead")
    # Fails its first attempt and has no other: dead. Attempts count across requeues, so
    # the requeued round's attempt (the second) succeeds.
    spec = {
        "id": job_id,
        "name": "dies once",
        "handler": "demo.sleep",
        "payload": {"seconds": 0, "fail_times": 1},
        "max_attempts": 1,
        "delay": "0s",
    }
    await operations.schedule(dev_client, spec, task_queue=queue)

    async def status() -> JobStatus:
        return (await operations.status(dev_client, job_id)).status

    await eventually(status, lambda s: s == JobStatus.DEAD, timeout=60, what="dead")
    out = script(dev_server, queue, "requeue_dead", job_id, "--note", "from the script test")
    assert out.startswith(f"{job_id}: requeued")
    await eventually(status, lambda s: s == JobStatus.DONE, timeout=60, what="done after requeue")
