"""The one-line status ``JobWorkflow`` publishes as its current details (Markdown, the Web UI's
status): ``**dead** · 1 of 1 attempt(s) failed · parked ...``. Pure: computed from the job's
state and the instant given (the workflow passes ``workflow.now()``), so replay rebuilds the
same text; the status itself comes from the one rule in :mod:`workflows.jobstatus`."""

from __future__ import annotations

from datetime import datetime

import jobctl.workflows.jobstatus as js
from jobctl.workflows.models import JobSpec, JobState, JobStatus
from jobctl.workflows.uitext import ERROR_BYTES, audit_details, code, moment_text


def when(moment: datetime | None, spec: JobSpec) -> str:
    """An instant in the job's own zone, or ``-``."""
    return "-" if moment is None else moment_text(moment, spec.timezone)


def shown_status(
    spec: JobSpec, state: JobState, now: datetime, cancelling: bool, headline: str | None
) -> JobStatus:
    """The public status the facts this workflow has add up to (``headline`` ``discarded``:
    the run is about to end failed as a discarded job)."""
    execution: js.Execution = "running"
    failure = None
    if headline == JobStatus.DISCARDED or state.status == JobStatus.DISCARDED:
        execution, failure = "failed", js.DISCARDED_FAILURE
    elif state.status in (JobStatus.DONE, JobStatus.CANCELLED):
        execution = "completed" if state.status == JobStatus.DONE else "canceled"
    activity = None
    if state.status == JobStatus.RUNNING:
        waiting = state.dispatched_until is not None
        activity = js.AttemptFacts(state="started", handler_since=None if waiting else now)
    facts = js.Facts(
        execution=execution,
        attribute=state.status.value,
        run_at=None if state.triggered else spec.run_at,
        activity=activity,
        cancel_requested=cancelling and execution == "running",
        failure_type=failure,
    )
    return js.public_status(facts, now).status


def status_parts(spec: JobSpec, state: JobState, status: JobStatus, now: datetime) -> list[str]:
    """What follows the status word: when, which attempt, what to do next."""
    budget = spec.max_attempts
    match status:
        case JobStatus.SCHEDULED if state.dispatched_until is not None:
            return [f"with a worker, starts {when(state.dispatched_until, spec)}"]
        case JobStatus.PENDING if state.waiting_for is not None:
            return [state.waiting_for, f"up to {budget} attempt(s)"]
        case JobStatus.SCHEDULED | JobStatus.PENDING:
            return [f"next run {when(spec.run_at, spec)}", f"up to {budget} attempt(s)"]
        case JobStatus.PAUSED:
            if state.paused_until is not None:
                until = f"until {when(state.paused_until, spec)}"
            else:
                until = f"until resumed (`jobctl resume {spec.id}`)"
            return [until, f"due {when(spec.run_at, spec)}"]
        case JobStatus.RUNNING:
            parts = []
            if state.triggered and spec.run_at and spec.run_at > now:
                parts.append("triggered: runs now")
            parts.append(js.current_attempt(state.attempts, state.round, budget).label)
            return [*parts, "retries show on the pending activity"]
        case JobStatus.DONE:
            last = js.last_attempt(state.attempts, budget)
            return [f"succeeded on {last.label}" if last else "done", f"finished {when(now, spec)}"]
        case JobStatus.DEAD:
            spent = sum(1 for a in state.attempts if a.round == state.round and a.spent)
            parked = f"parked {when(state.parked_at, spec)}; " if state.parked_at else ""
            return [
                f"{spent} of {budget} attempt(s) failed",
                f"{parked}requeue or discard it in the dead-letter queue",
            ]
        case _:  # cancelling, cancelled, discarded
            return [f"{when(now, spec)}, after {len(state.attempts)} attempt(s)"]


def current_details(
    spec: JobSpec,
    state: JobState,
    now: datetime,
    cancelling: bool,
    headline: str | None = None,
) -> str:
    """The whole text: status, its parts, the round, the last error and the audit trail."""
    status = shown_status(spec, state, now, cancelling, headline)
    parts = [f"**{status.value}**", *status_parts(spec, state, status, now)]
    if state.round > 1:
        parts.append(f"round {state.round}")
    if state.last_error:
        parts.append(f"last error: {code(state.last_error, ERROR_BYTES)}")
    trail = audit_details(state.audit, spec.timezone)
    return " · ".join(parts) + (f"\n\n{trail}" if trail else "")
