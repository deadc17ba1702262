"""Jobs on the time-skipping server: submit one, await its result, wait for a status."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.workflows.models import JobReport, JobStatus
from tests.helpers.poll import eventually

HANDLERS = load_handlers("tests.handlers").names()


async def submit(
    env: WorkflowEnvironment, task_queue: str, **spec: Any
) -> WorkflowHandle[Any, JobReport]:
    """Schedule on the time-skipping server. No dispatch lead by default: an attempt waiting in
    the worker for its run_at waits in real time, which the test server cannot skip (the
    pre-dispatch path is tested on the dev server, tests/test_dispatch.py)."""
    now = await env.get_current_time()
    spec = {"name": "t", "dispatch_lead": 0, **spec}
    scheduled = await operations.schedule(
        env.client, spec, HANDLERS, now=now, task_queue=task_queue
    )
    return env.client.get_workflow_handle(scheduled.job_id, result_type=JobReport)


async def finished(env: WorkflowEnvironment, handle: WorkflowHandle[Any, JobReport]) -> JobReport:
    """The job's result, letting the server skip time while we wait (as execute_workflow does)."""
    async with env.time_skipping_unlocked():  # type: ignore[attr-defined]
        return await handle.result()


async def job_report(client: Client, job_id: str) -> JobReport:
    """The job's status report (a job, not a cron: the assertion says so)."""
    report = await operations.status(client, job_id)
    assert isinstance(report, JobReport)
    return report


async def wait_for_status(
    env: WorkflowEnvironment, job_id: str, wanted: JobStatus, timeout: float = 30
) -> JobReport:
    """Poll ``status`` (real time) until it reports ``wanted``."""
    # Real time: unlocking time skipping with nothing scheduled would jump to the workflow's
    # 10-year default timeout on the test server.
    return await eventually(
        lambda: job_report(env.client, job_id),
        lambda report: report.status == wanted,
        timeout=timeout,
        what=f"{job_id} {wanted}",
    )
