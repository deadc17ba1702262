"""Temporal's state of a job, read into the facts :mod:`workflows.jobstatus` judges.

Shared by ``jobctl status`` / ``GET /jobs/{id}``, ``jobctl list`` / ``GET /jobs`` and the board,
so they all show the status one rule computed. No decisions live here: only reading.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHistoryEventFilterType,
)

from jobctl.workflows import names
from jobctl.workflows.cron_rules import next_run_from_memo
from jobctl.workflows.job_rules import budget_of_policy
from jobctl.workflows.jobstatus import (
    AttemptFacts,
    Facts,
    JobView,
    current_attempt,
    execution_of,
    public_status,
    ran_at,
)
from jobctl.workflows.models import JOB_RUN_AT, JOB_STATUS, HeartbeatState, JobReport, JobStatus

# Statuses whose jobs are still open: visibility cannot tell them apart, describe does.
IN_FLIGHT = (JobStatus.PENDING, JobStatus.RUNNING, JobStatus.RETRYING)
T = TypeVar("T")

_STATES: dict[int, Literal["scheduled", "started", "cancel_requested"]] = {
    PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED: "scheduled",
    PendingActivityState.PENDING_ACTIVITY_STATE_STARTED: "started",
    PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED: "cancel_requested",
}


def kind_of(workflow_type: str | None) -> Literal["job", "cron"]:
    return "cron" if workflow_type == names.CRON_WORKFLOW else "job"


def run_job_activity(desc: WorkflowExecutionDescription) -> PendingActivityInfo | None:
    """The pending ``run_job`` activity (not the DLQ's bookkeeping activities)."""
    for activity in desc.raw_description.pending_activities:
        if activity.activity_type.name == names.RUN_JOB:
            return activity
    return None


def round_budget(activity: PendingActivityInfo) -> int | None:
    """The attempt budget the round's ``run_job`` was scheduled with (see
    workflows/job_workflow.py ``budget_of_policy``)."""
    return budget_of_policy(activity.maximum_attempts)


def cancel_requested(desc: WorkflowExecutionDescription) -> bool:
    """Has the server accepted a cancel of this job (it settles as ``cancelled`` soon)?"""
    raw = desc.raw_description
    return raw.workflow_extended_info.cancel_requested or any(
        a.state == PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED
        for a in raw.pending_activities
    )


async def heartbeat(client: Client, desc: WorkflowExecutionDescription) -> HeartbeatState | None:
    """The ``run_job`` attempt's heartbeat details, decoded like every payload (they may be
    encrypted); None when there are none or this process cannot decode them."""
    activity = run_job_activity(desc)
    if activity is None or not activity.heartbeat_details.payloads:
        return None
    try:
        [state] = await client.data_converter.decode(
            list(activity.heartbeat_details.payloads[:1]), [HeartbeatState]
        )
    except Exception:  # e.g. a payload sealed with a key this process lacks
        return None
    return state if isinstance(state, HeartbeatState) else None


def attempt_facts(activity: PendingActivityInfo, beat: HeartbeatState | None) -> AttemptFacts:
    next_at = (
        activity.next_attempt_schedule_time.ToDatetime(UTC)
        if activity.HasField("next_attempt_schedule_time")
        else None
    )
    failure = activity.last_failure.message if activity.HasField("last_failure") else None
    last = beat.attempts[-1] if beat is not None and beat.attempts else None
    since = last.started_at if last is not None and last.outcome == "running" else None
    return AttemptFacts(
        state=_STATES.get(activity.state, "scheduled"),
        attempt=activity.attempt,
        next_attempt_at=next_at,
        last_failure=failure or None,
        handler_since=since,
    )


async def described_facts(
    client: Client, desc: WorkflowExecutionDescription, beat: HeartbeatState | None
) -> Facts:
    """Everything describe says (plus, for a run that failed, its close event's failure)."""
    activity = run_job_activity(desc)
    failure_type = failure_message = None
    if desc.status in (WorkflowExecutionStatus.FAILED, WorkflowExecutionStatus.TIMED_OUT):
        failure_type, failure_message = await _close_failure(client, desc)
    return Facts(
        execution=execution_of(desc.status),
        attribute=desc.typed_search_attributes.get(JOB_STATUS),
        kind=kind_of(desc.workflow_type),
        run_at=desc.typed_search_attributes.get(JOB_RUN_AT),
        activity=attempt_facts(activity, beat) if activity is not None else None,
        cancel_requested=cancel_requested(desc),
        failure_type=failure_type,
        failure_message=failure_message,
    )


async def _close_failure(
    client: Client, desc: WorkflowExecutionDescription
) -> tuple[str | None, str | None]:
    handle = client.get_workflow_handle(desc.id, run_id=desc.run_id)
    close_only = WorkflowHistoryEventFilterType.CLOSE_EVENT
    async for event in handle.fetch_history_events(event_filter_type=close_only):
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            failure = event.workflow_execution_failed_event_attributes.failure
            kind = failure.application_failure_info.type or None
            return kind, failure.message or None
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
            return None, "the run timed out"
    return None, None


async def next_run(wf: WorkflowExecution, now: datetime) -> datetime | None:
    """A row's run time: its JobRunAt, except an open cron's, which follows its schedule (in
    the memo its starter set: a cron no longer writes JobRunAt every slot). The memo is
    decoded locally: no RPC."""
    run_at = wf.typed_search_attributes.get(JOB_RUN_AT)
    if kind_of(wf.workflow_type) != "cron" or wf.status != WorkflowExecutionStatus.RUNNING:
        return run_at
    memo = await wf.memo()
    return next_run_from_memo(memo.get(names.MEMO_SCHEDULE), now) or run_at


def visible_facts(wf: WorkflowExecution) -> Facts:
    """What a visibility row alone says (enough for a closed run)."""
    attrs = wf.typed_search_attributes
    return Facts(
        execution=execution_of(wf.status),
        attribute=attrs.get(JOB_STATUS),
        kind=kind_of(wf.workflow_type),
        run_at=attrs.get(JOB_RUN_AT),
    )


def job_view(
    report: JobReport,
    facts: Facts,
    desc: WorkflowExecutionDescription,
    beat: HeartbeatState | None,
    now: datetime,
) -> JobView:
    """The workflow's report with the computed status, the live attempt and the numbering."""
    facts = replace(facts, report=report.status)
    verdict = public_status(facts, now)
    attempts = list(report.attempts)
    activity = run_job_activity(desc)
    update: dict[str, Any] = {"status": verdict.status, "status_detail": verdict.detail}
    if beat is not None and activity is not None:
        known = {a.attempt for a in attempts}
        attempts += [a for a in beat.attempts if a.attempt not in known]
        update["attempts"] = attempts
    if activity is not None and facts.activity is not None and facts.activity.state != "scheduled":
        if activity.HasField("last_heartbeat_time"):
            update["last_heartbeat_at"] = activity.last_heartbeat_time.ToDatetime(UTC)
        update["worker"] = activity.last_worker_identity or None
    if verdict.next_attempt_at is not None:
        update["next_attempt_at"] = verdict.next_attempt_at
    if verdict.last_error:
        update["last_error"] = verdict.last_error
    if verdict.status in (*IN_FLIGHT, JobStatus.CANCELLING) and activity is not None:
        count = current_attempt(attempts, report.round, report.max_attempts)
        update["attempt"] = count.number
        update["attempt_label"] = count.label
    if verdict.status == JobStatus.CANCELLING:
        update["cancel_within"] = _handler_cancel_within(activity, beat)
    if facts.execution != "running":
        update["ran_at"] = ran_at(attempts)
    return JobView.model_validate({**report.model_dump(), **update})


def _handler_cancel_within(
    activity: PendingActivityInfo | None, beat: HeartbeatState | None
) -> float | None:
    """While a handler runs, the most a cancel takes to reach it (its worker says, in the
    heartbeat details); None if no handler is running."""
    started = (
        PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
        PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED,
    )
    if activity is None or activity.state not in started or beat is None or not beat.attempts:
        return None
    return beat.cancel_within if beat.attempts[-1].outcome == "running" else None


async def gathered(calls: list[Awaitable[T]], concurrency: int) -> list[T]:
    """Await ``calls`` at most ``concurrency`` at a time, in order."""
    gate = asyncio.Semaphore(concurrency)

    async def one(call: Awaitable[T]) -> T:
        async with gate:
            return await call

    return await asyncio.gather(*(one(c) for c in calls))
