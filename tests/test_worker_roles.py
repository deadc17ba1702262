"""Split workers (``JOBS_WORKER_ROLE`` / ``jobctl worker --role``): a ``workflows`` worker
polls only workflow tasks, an ``activities`` worker only activity tasks, and together they
run every job as one ``all`` worker does. A bad role stops the worker before it connects."""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from jobctl.starter import operations
from jobctl.starter.operations.handlers import published_catalog
from jobctl.workflows.models import JobStatus
from tests.helpers.drills import read_records, wait_for_records
from tests.helpers.jobs import HANDLERS, job_report
from tests.helpers.poll import eventually
from tests.helpers.processes import JOBS, Workers

pytestmark = [pytest.mark.devserver, pytest.mark.timeout(120)]


def spec(job_id: str, handler: str, records: Path, **payload: Any) -> dict[str, Any]:
    payload = {"path": str(records), **payload}
    return {"id": job_id, "name": "split", "handler": handler, "payload": payload, "delay": 0}


async def test_a_workflows_and_an_activities_worker_run_a_job_between_them(
    dev_client: Client, task_queue: str, workers: Workers, tmp_path: Path
) -> None:
    records = tmp_path / "records.jsonl"
    runs_workflows = workers.start("--role", "workflows")
    assert "workflows only" in workers.log_of(runs_workflows)
    job_id = f"split-{uuid.uuid4().hex[:8]}"
    await operations.schedule(
        dev_client, spec(job_id, "test.record", records), HANDLERS, task_queue=task_queue
    )
    # The workflow runs (its attempt is scheduled) but nothing takes the attempt.
    pending = await eventually(
        lambda: job_report(dev_client, job_id),
        lambda report: report.status == JobStatus.PENDING,
        what=f"{job_id} pending",
    )
    await asyncio.sleep(2)
    assert (await job_report(dev_client, job_id)).status == JobStatus.PENDING, pending
    assert read_records(records) == []

    runs_attempts = workers.start(JOBS_WORKER_ROLE="activities")
    assert "activities only" in workers.log_of(runs_attempts)
    [ran] = wait_for_records(records, 1, "done")
    assert ran["pid"] == runs_attempts.pid
    done = await eventually(
        lambda: job_report(dev_client, job_id),
        lambda report: report.status == JobStatus.DONE,
        what=f"{job_id} done",
    )
    assert [a.worker for a in done.attempts] == [workers.identity(runs_attempts)]
    # The first attempt ran it: the workflows worker took no activity task (it would have
    # failed it as "not registered", burning an attempt the job's log does not show).
    history = await dev_client.get_workflow_handle(job_id).fetch_history()
    started = [e for e in history.events if e.HasField("activity_task_started_event_attributes")]
    assert [e.activity_task_started_event_attributes.attempt for e in started] == [1]
    assert "not registered" not in workers.log_of(runs_workflows)
    # Only the worker that runs attempts published its handlers.
    catalog = await published_catalog(dev_client)
    served_by = {w for ws in catalog.workers.values() for w in ws}
    assert workers.identity(runs_attempts) in served_by
    assert workers.identity(runs_workflows) not in served_by

    # A cancel's path (its local activity runs beside the workflow) works split too.
    long_id = f"split-long-{uuid.uuid4().hex[:8]}"
    await operations.schedule(
        dev_client,
        spec(long_id, "test.cancel_watch", records, seconds=60),
        HANDLERS,
        task_queue=task_queue,
    )
    await eventually(
        lambda: asyncio.sleep(0, read_records(records)),
        lambda rows: any(r["key"] == long_id and r["event"] == "start" for r in rows),
        what=f"{long_id} running",
    )
    await operations.cancel(dev_client, long_id)
    cancelled = await eventually(
        lambda: job_report(dev_client, long_id),
        lambda report: report.status == JobStatus.CANCELLED,
        timeout=30,
        what=f"{long_id} cancelled",
    )
    assert [a.outcome for a in cancelled.attempts] == ["cancelled"]


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["--role", "both"], {}, "--role"),
        ([], {"JOBS_WORKER_ROLE": "activity"}, "JOBS_WORKER_ROLE"),
    ],
)
async def test_a_bad_role_stops_the_worker_with_one_line_before_it_connects(
    args: list[str],
    env: dict[str, str],
    named: str,
    dev_client: Client,
    task_queue: str,
    workers: Workers,
    tmp_path: Path,
) -> None:
    # An address nothing listens on: a worker that got as far as connecting would hang there.
    run = await asyncio.to_thread(
        subprocess.run,
        [JOBS, "worker", *args],
        env={**workers.env, "TEMPORAL_ADDRESS": "127.0.0.1:9", **env},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"error: {named}: must be one of all, workflows, activities, not "
        f"{(args[1:] or list(env.values()))[0]!r}"
    ]
    # Nothing was left polling the queue (a job waits), and a good worker then runs it.
    records = tmp_path / "records.jsonl"
    job_id = f"after-bad-role-{uuid.uuid4().hex[:8]}"
    await operations.schedule(
        dev_client, spec(job_id, "test.record", records), HANDLERS, task_queue=task_queue
    )
    await asyncio.sleep(1)
    assert (await job_report(dev_client, job_id)).status == JobStatus.PENDING
    workers.start()
    wait_for_records(records, 1, "done")
