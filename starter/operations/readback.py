"""Reading a job back: its handle and description, and its status report.

The report's status is the one rule's (:mod:`workflows.jobstatus`) from what describe says
(:mod:`starter.jobviews` reads it), whether or not a worker answers the ``status`` query.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
)
from temporalio.service import RPCError

from jobctl.starter import jobviews
from jobctl.starter.errors import JobNotFound, TemporalUnavailable
from jobctl.starter.operations.handler_watch import live_workers
from jobctl.starter.operations.rpc import QUERY_TIMEOUT, temporal_errors
from jobctl.starter.operations.validation import check_not_reserved
from jobctl.workflows import names
from jobctl.workflows.jobstatus import SETTLED, JobView, public_status
from jobctl.workflows.models import (
    JOB_HANDLER,
    JOB_NAME,
    JOB_RUN_AT,
    JOB_STATUS,
    CronReport,
    JobReport,
    JobSpec,
    JobStatus,
)

Report = JobView | JobReport | CronReport
# A closed cron's slot jobs read at once, at most (its running slots: one, or a few).
SLOT_LOOKUPS = 10
# History length once the first workflow task completed: started, task scheduled/started/completed.
FIRST_TASK_DONE = 4


async def describe(
    client: Client, job_id: str
) -> tuple[WorkflowHandle[Any, Any], WorkflowExecutionDescription]:
    """The job's handle and description; anything but a job or cron workflow is no job."""
    check_not_reserved(job_id)
    handle = client.get_workflow_handle(job_id)
    async with temporal_errors(job_id):
        desc = await handle.describe()
    if desc.workflow_type not in (names.JOB_WORKFLOW, names.CRON_WORKFLOW):
        raise JobNotFound(f"no job with id {job_id!r} (a {desc.workflow_type} workflow)")
    return handle, desc


async def status(client: Client, job_id: str) -> Report:
    """The job's state: the workflow's ``status`` query, with the status computed by the one
    rule (:mod:`workflows.jobstatus`) from what describe says.

    Works without a worker and before a delayed job's first task: then the report is built
    from the start event and the search attributes instead of the query.
    """
    handle, desc = await describe(client, job_id)
    beat = await jobviews.heartbeat(client, desc)
    async with temporal_errors(job_id):
        facts = await jobviews.described_facts(client, desc, beat)
    if desc.workflow_type == names.CRON_WORKFLOW:
        async with temporal_errors(job_id):
            cron: CronReport = await handle.query(
                names.QUERY_STATUS, result_type=CronReport, rpc_timeout=QUERY_TIMEOUT
            )
        verdict = public_status(facts, datetime.now(UTC))
        cron = cron.model_copy(update={"status": verdict.status})
        if facts.execution != "running" and cron.running:
            cron = await _slots_left_running(client, cron)
        return cron
    report = await _queried_report(handle, desc)
    if report is None:
        report = await _report_from_start(client, handle, desc)
    view = jobviews.job_view(report, facts, desc, beat, datetime.now(UTC))
    return await _why_pending(client, desc, view)


async def _why_pending(
    client: Client, desc: WorkflowExecutionDescription, view: JobView
) -> JobView:
    """A due job whose attempt no worker has taken says why when no live worker serves its
    handler on its task queue (the attempt waits on the handler's queue for one)."""
    activity = jobviews.run_job_activity(desc)
    waiting = PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
    if view.status != JobStatus.PENDING or activity is None or activity.state != waiting:
        return view
    workers = await live_workers(client, desc.task_queue, view.handler)
    if workers is None or workers:
        return view
    detail = f"waiting for a worker with handler {view.handler!r} on task queue {desc.task_queue!r}"
    return view.model_copy(update={"status_detail": detail})


async def _slots_left_running(client: Client, cron: CronReport) -> CronReport:
    """A closed cron's report with the slots it left running read from their own jobs.

    A cron cancelled while a slot's job runs (or waits for its time) closes at once and the
    job runs on, so the cron's last report cannot know how that slot ended: its job can. A
    slot whose job has closed leaves ``running``; every record of it shows the job's status."""

    async def job_status(job_id: str) -> JobStatus | None:
        try:
            return (await status(client, job_id)).status
        except JobNotFound:  # gone (retention): not running, and nothing newer to show
            return None

    found = await jobviews.gathered([job_status(j) for j in cron.running], SLOT_LOOKUPS)
    of_job = dict(zip(cron.running, found, strict=True))
    recent = [
        r.model_copy(update={"status": of_job[r.job_id]})
        if r.job_id in of_job and of_job[r.job_id] is not None
        else r
        for r in cron.recent_slots
    ]
    running = [j for j in cron.running if of_job[j] is not None and of_job[j] not in SETTLED]
    return cron.model_copy(update={"recent_slots": recent, "running": running})


async def _queried_report(
    handle: WorkflowHandle[Any, Any], desc: WorkflowExecutionDescription
) -> JobReport | None:
    """The job's ``status`` query; None before its first workflow task completes (a delayed
    job sleeping on start_delay cannot answer: its start event already says everything) or
    with no worker answering."""
    if desc.raw_description.workflow_execution_info.history_length < FIRST_TASK_DONE:
        return None
    try:
        async with temporal_errors(handle.id):
            report: JobReport = await handle.query(
                names.QUERY_STATUS, result_type=JobReport, rpc_timeout=QUERY_TIMEOUT
            )
    except (WorkflowQueryFailedError, WorkflowQueryRejectedError, RPCError, TemporalUnavailable):
        return None
    return report


async def _report_from_start(
    client: Client, handle: WorkflowHandle[Any, Any], desc: WorkflowExecutionDescription
) -> JobReport:
    attrs = desc.typed_search_attributes
    status = JobStatus(attrs.get(JOB_STATUS) or JobStatus.SCHEDULED)
    async with temporal_errors(handle.id):
        async for event in handle.fetch_history_events():
            payloads = event.workflow_execution_started_event_attributes.input.payloads
            try:
                [spec] = await client.data_converter.decode(payloads, [JobSpec])
            except Exception:  # a hand-made start with an input that is no job spec
                name = attrs.get(JOB_NAME) or handle.id
                return JobReport(
                    job_id=handle.id,
                    name=name,
                    handler=attrs.get(JOB_HANDLER) or "",
                    status=status,
                    run_at=attrs.get(JOB_RUN_AT),
                    max_attempts=1,
                    idempotency_key=handle.id,
                )
            break
        else:
            raise JobNotFound(f"job {handle.id!r} has no history")
    return JobReport(
        job_id=spec.id,
        name=spec.name,
        handler=spec.handler,
        status=status,
        run_at=spec.run_at,
        max_attempts=spec.max_attempts,
        idempotency_key=spec.key,
        **spec.scheduling(),
    )
