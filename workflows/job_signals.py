"""What a job tells other workflows when it settles: its cron or batch parent, the jobs that
run after it (workflows/dependency_calls.py) and the dead-letter queue. Used from
``JobWorkflow`` only, inside a workflow; keeps no state (the sandbox passes it through)."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from temporalio import workflow
from temporalio.exceptions import FailureError

from jobctl.workflows import dependency_calls, names
from jobctl.workflows.job_rules import DLQ_RETRY
from jobctl.workflows.models import (
    ControlRequest,
    DeadEntry,
    JobRelease,
    JobSpec,
    JobState,
    JobStatus,
    SlotFinished,
)

Release = Literal["requeue", "discard"]


async def tell_settled(spec: JobSpec, state: JobState) -> None:
    """The job settled (done, dead, cancelled): tell its parent (see :func:`tell_parent`) and
    every job that runs after it."""
    await tell_parent(spec, state)
    await tell_watchers(spec, state, state.status)


async def tell_watchers(spec: JobSpec, state: JobState, status: JobStatus) -> None:
    """Tell every job that runs after this one how it stands now (nothing without any)."""
    if state.watchers:
        await dependency_calls.tell(state.watchers, spec.id, status)


async def tell_parent(spec: JobSpec, state: JobState) -> None:
    """A cron's slot job or a batch's member reports how it settled (done, dead, cancelled)
    to its parent: by signal, unless the cron reads it from the child's completion (memo
    ``slot_end``); a parked job is still open, so its park, and its end after one, are
    signalled anyway."""
    parent = workflow.info().parent
    if parent is None:
        return
    slot_end = workflow.memo_value(names.MEMO_SLOT_END, None)
    by_completion = slot_end == names.SLOT_END_BY_COMPLETION
    parked = state.status == JobStatus.DEAD or state.parked_at is not None or state.round > 1
    if by_completion and not parked:
        return
    report = SlotFinished(job_id=spec.id, status=state.status)
    try:
        await workflow.get_external_workflow_handle(parent.workflow_id).signal(
            names.SIGNAL_SLOT_FINISHED, report
        )
    except FailureError:  # the parent is gone (cancelled or finished): nobody to tell
        workflow.logger.info("parent %s is gone; not reporting %s", parent.workflow_id, report)


async def report_release(spec: JobSpec, state: JobState, action: Release, applied: bool) -> None:
    """Tell the DLQ what a requeue or discard did (the index and log follow the job)."""
    by = state.release_by if applied else ControlRequest()
    release = JobRelease(
        job_id=spec.id,
        action=action,
        applied=applied,
        status=state.status,
        round=state.round,
        actor=by.actor,
        note=by.note,
    )
    outcome = "applied" if applied else f"ignored (job is {state.status})"
    try:  # one signal; a DLQ that is not running has no index or log to update
        await workflow.get_external_workflow_handle(names.DLQ_WORKFLOW_ID).signal(
            names.SIGNAL_JOB_RELEASED, release
        )
    except FailureError:
        workflow.logger.info("no dead-letter queue running; %s %s not logged", action, outcome)


async def park(entry: DeadEntry) -> None:
    """Index a dead job in the DLQ: one signal to the running DLQ; when none runs (the first
    park ever, or after someone terminated it) an activity signals-with-start it."""
    try:
        dlq = workflow.get_external_workflow_handle(names.DLQ_WORKFLOW_ID)
        await dlq.signal(names.SIGNAL_PARK, entry)
    except FailureError:
        await workflow.execute_activity(
            names.PARK_IN_DLQ,
            entry,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=DLQ_RETRY,
            summary=f"park in the dead-letter queue after {entry.attempts} attempt(s)",
        )
