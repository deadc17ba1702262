"""The pure rules of ``JobWorkflow``: its retry policy and attempt budget, the search attributes
a job starts with, what visibility lists, and how a round's attempt log is read back from the
activity's final failure. No workflow state here; the workflow, the starters and the board all
read these."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import Priority, RetryPolicy, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutType
from temporalio.exceptions import TimeoutError as ActivityTimeoutError

from jobctl.workflows.dependency_rules import WAITING
from jobctl.workflows.durations import format_duration
from jobctl.workflows.models import (
    JOB_HANDLER,
    JOB_NAME,
    JOB_RUN_AT,
    JOB_STATUS,
    AttemptRecord,
    ControlRequest,
    HeartbeatState,
    JobReport,
    JobSpec,
    JobState,
    JobStatus,
)
from jobctl.workflows.models.concurrency import PermitRequest
from jobctl.workflows.models.ratelimit import RateRequest
from jobctl.workflows.models.spec import DEFAULT_PRIORITY
from jobctl.workflows.prestart_check import pause_cutoff

# Attempts lost before their handler started (a worker or the server died while the job
# waited for run_at) cost the job nothing; Temporal's policy keeps this many in reserve.
RESERVE_ATTEMPTS = 3
# How long a dispatched attempt may wait in a busy worker for a free handler slot.
HANDLER_SLOT_WAIT = timedelta(minutes=10)
# Reaching the DLQ must not fail the job: keep trying, at most every 30 s.
DLQ_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=30))
# The cancel path's one look at the pending activity; a cancel never waits long for it.
READ_LOG_TIMEOUT = timedelta(seconds=10)
READ_LOG_RETRY = RetryPolicy(maximum_attempts=3)
# A lost attempt's record, as attempts_from_failure closes one after a heartbeat timeout.
LOST_LEASE = "lease lost: no heartbeat within the lease"
LOST_LEASE_TYPE = "LeaseExpired"


def start_search_attributes(spec: JobSpec, status: JobStatus) -> TypedSearchAttributes:
    """The search attributes a job carries from its start (set by whoever starts it)."""
    pairs: list[SearchAttributePair[Any]] = [
        SearchAttributePair(JOB_STATUS, status.value),
        SearchAttributePair(JOB_NAME, spec.name),
        SearchAttributePair(JOB_HANDLER, spec.handler),
    ]
    if spec.run_at is not None:
        pairs.append(SearchAttributePair(JOB_RUN_AT, spec.run_at))
    return TypedSearchAttributes(pairs)


def retry_policy(spec: JobSpec, budget: int) -> RetryPolicy:
    """Temporal drives the retries: the round's ``budget`` of attempts plus a few in reserve for
    attempts lost before their handler started (the activity itself refuses to run the handler
    more than ``max_attempts`` times). The activity supplies each jittered delay; these
    intervals (the same formula without jitter) apply only when an attempt is lost."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=spec.backoff_base),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=spec.backoff_max),
        maximum_attempts=budget + RESERVE_ATTEMPTS,
    )


def activity_priority(spec: JobSpec) -> Priority | None:
    """What ``run_job`` carries to the task queue's matcher: the job's priority (1 goes first)
    and its fairness key and weight. None for a job with every field at its default: such a
    job's activity is scheduled exactly as before these fields existed (replay)."""
    default_weight = spec.fairness_key is None or spec.fairness_weight == 1.0
    if spec.priority == DEFAULT_PRIORITY and spec.fairness_key is None:
        return None
    return Priority(
        priority_key=spec.priority,
        fairness_key=spec.fairness_key,
        fairness_weight=None if default_weight else spec.fairness_weight,
    )


def budget_of_policy(maximum_attempts: int) -> int | None:
    """The round's attempt budget read back from a ``retry_policy`` it made (for readers with
    no query: the board), or None when the policy is not one of ours."""
    budget = maximum_attempts - RESERVE_ATTEMPTS
    return budget if budget > 0 else None


def attempt_allowance(spec: JobSpec) -> timedelta:
    """Start-to-close of one attempt: waiting for run_at and for a free handler slot, then the
    handler's own ``timeout`` (which the activity enforces)."""
    return timedelta(seconds=spec.dispatch_lead + spec.timeout) + HANDLER_SLOT_WAIT


def attempts_from_failure(err: ActivityError, now: datetime) -> list[AttemptRecord]:
    """Recover the round's attempt log from the activity's final failure."""
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.details:
        return HeartbeatState.model_validate(cause.details[0]).attempts
    if isinstance(cause, ActivityTimeoutError) and cause.last_heartbeat_details:
        state = HeartbeatState.model_validate(cause.last_heartbeat_details[0])
        if cause.type == TimeoutType.HEARTBEAT:
            state.close_dangling(now, LOST_LEASE, LOST_LEASE_TYPE)
        else:
            kind = cause.type.name if cause.type else "unknown"
            state.close_dangling(now, f"attempt timed out ({kind})", "AttemptTimeout")
        return state.attempts
    return []


def listed_status(status: JobStatus) -> JobStatus | None:
    """What visibility's ``JobStatus`` says for a job in ``status`` (lean runs): only what a
    listing filters on. Running is still ``scheduled`` there (Temporal's pending activity says
    more); done and cancelled are not written (the execution status says them): None."""
    if status in (JobStatus.DONE, JobStatus.CANCELLED):
        return None
    if status == JobStatus.RUNNING:
        return JobStatus.SCHEDULED
    return status


def failure_message(err: ActivityError, spec: JobSpec) -> str:
    """The round's last error when its activity failed as a whole (not in its handler)."""
    cause = err.cause
    if isinstance(cause, ActivityTimeoutError) and cause.type == TimeoutType.SCHEDULE_TO_START:
        return (
            f"no worker serving handler {spec.handler!r} took the attempt within "
            f"{format_duration(spec.handler_wait)} (handler_wait)"
        )
    if isinstance(cause, ActivityTimeoutError) and cause.type is not None:
        return f"{cause.type.name.lower().replace('_', '-')} timeout"
    return str(cause or err)


def unnoted_cancellation(already_noted: bool) -> ControlRequest | None:
    """A cancellation that came without our ``cancel_requested`` signal first (e.g. ``temporal
    workflow cancel --reason ...``): its reason, if any, as the trail's note. Workflow code."""
    reason = workflow.cancellation_reason()
    return ControlRequest(note=reason) if reason and not already_noted else None


def job_report(spec: JobSpec, state: JobState) -> JobReport:
    """What the ``status`` query and every update answer."""
    return JobReport(
        job_id=spec.id,
        name=spec.name,
        handler=spec.handler,
        status=state.status,
        run_at=spec.run_at,
        paused_until=state.paused_until,
        max_attempts=spec.max_attempts,
        round=state.round,
        attempts=list(state.attempts),
        result=state.result,
        last_error=state.last_error,
        idempotency_key=spec.key,
        parked_at=state.parked_at,
        waiting_for=state.waiting_for,
        after=dict(state.dependencies) or dict.fromkeys(spec.after, WAITING),
        audit=list(state.audit),
        **spec.scheduling(),
    )


def waiting_in_worker(state: JobState, now: datetime) -> bool:
    """Dispatched, but far enough from run_at that a pause still lands before the
    attempt's check (:func:`workflows.prestart_check.pause_cutoff`)."""
    until, since = state.dispatched_until, state.dispatched_at
    if until is None:
        return False
    wait = (until - since).total_seconds() if since is not None else 0.0
    return now < until - timedelta(seconds=pause_cutoff(wait))


def release_decision(
    action: str, state: JobState, max_attempts: int, from_dlq: bool
) -> tuple[bool, str]:
    """Whether a requeue or discard is taken (the job is dead and no other is under way),
    and what the audit trail says about it."""
    via = " (via the dead-letter queue)" if from_dlq else ""
    if state.status == JobStatus.DEAD and state.release_request is None:
        if action == "requeue":
            return True, f"round {state.round + 1}: {max_attempts} fresh attempt(s){via}"
        return True, f"dead for good{via}"
    under_way = state.status == JobStatus.DEAD and state.release_request is not None
    why = f"a {state.release_request} is under way" if under_way else f"job is {state.status}"
    return False, f"ignored: {why}{via}"


def within_budget(
    attempts: list[AttemptRecord], round_: int, max_attempts: int
) -> list[AttemptRecord]:
    """The log with at most ``max_attempts`` spent attempts in round ``round_`` (the one
    running now; earlier rounds ran under their own budget): the server makes no more, so an
    excess can only be a reckoned-back lost attempt (``worker`` "unknown": its worker died
    before anything of it reached the server) counting one that is also recorded otherwise.
    Those go first, the earliest first, then the earliest others, and the attempts after the
    first one dropped are numbered again. An unchanged log comes back as it was."""
    excess = sum(r.spent for r in attempts if r.round == round_) - max_attempts
    if excess <= 0:
        return attempts
    dropped: list[int] = []
    for reckoned_first in (True, False):
        for index, record in enumerate(attempts):
            reckoned = record.worker == "unknown"
            mine = record.round == round_ and record.spent and index not in dropped
            if excess and mine and reckoned == reckoned_first:
                dropped.append(index)
                excess -= 1
    kept = [record for index, record in enumerate(attempts) if index not in dropped]
    first = min(dropped)
    number = attempts[first].attempt
    renumbered = kept[:first]
    for record in kept[first:]:
        renumbered.append(record.model_copy(update={"attempt": number}))
        number += 1
    return renumbered


def permit_request(spec: JobSpec, holder: str, run_id: str, ticket: str) -> PermitRequest:
    """A round's request to its concurrency key's semaphore (the spec has a key)."""
    assert spec.concurrency_key is not None and spec.concurrency_limit is not None
    return PermitRequest(
        key=spec.concurrency_key,
        limit=spec.concurrency_limit,
        holder=holder,
        run_id=run_id,
        ticket=ticket,
        priority=spec.priority,
    )


def rate_request(
    spec: JobSpec, holder: str, run_id: str, ticket: str, not_before: datetime | None
) -> RateRequest:
    """A round's request to its rate key's limiter (the spec has a key)."""
    assert spec.rate_key is not None and spec.rate is not None
    return RateRequest(
        key=spec.rate_key,
        rate=spec.rate,
        burst=spec.rate_burst or 1,
        holder=holder,
        run_id=run_id,
        ticket=ticket,
        priority=spec.priority,
        not_before=not_before,
    )
