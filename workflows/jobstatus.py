"""A job's public status and its attempt numbering: one rule, one home.

Pure (no I/O, no clock: ``now`` is a parameter), so the CLI, the HTTP API, the board and the
job workflow's Web UI details all call the same code with the facts they have:

* Temporal's own state: the execution status, the ``JobStatus`` search attribute, the
  pending ``run_job`` activity (state, attempt, next attempt time, last failure, whether its
  handler is running) and whether a cancel was requested;
* ``run_at`` and ``now``.

The rule (README, "Job status"):

=====================================  ==================================================
execution Completed                    done
execution Canceled / Terminated        cancelled (detail ``terminated`` for the latter)
Running, the workflow's report says    that (it settled between describe and the query)
done, cancelled or discarded
Failed, JobStatus discarded or dead,   discarded
or failure type ``JobDiscarded``
any other Failed / TimedOut            dead (the run ended: it cannot be requeued)
Running, cancel requested              cancelling
Running, JobStatus paused / dead       paused / dead
Running, a cron                        scheduled
Running, no pending attempt            scheduled if run_at is ahead, else pending
attempt started                        scheduled while it only waits in its worker for
                                       run_at, else running
attempt scheduled                      retrying while a retry (attempt > 1) waits for its
                                       backoff, else pending
=====================================  ==================================================

Attempts are numbered from 1 and count across requeues (attempt 5 is the fifth time the
handler ran for this job, whatever the round); the budget (``max_attempts``) is per round.
:func:`attempt_label` is the one home of the "attempt n of m" text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Literal

from jobctl.workflows.models import AttemptRecord, JobReport, JobStatus

Execution = Literal[
    "running", "completed", "failed", "canceled", "terminated", "timed_out", "continued_as_new"
]
ActivityState = Literal["scheduled", "started", "cancel_requested"]
DISCARDED_FAILURE = "JobDiscarded"
SETTLED = (JobStatus.DONE, JobStatus.CANCELLED, JobStatus.DISCARDED)


def execution_of(status: Enum | None) -> Execution:
    """Temporal's execution status (the client's ``WorkflowExecutionStatus``) in the rule's
    words; None, as describe may give it, is running."""
    name = status.name.lower() if status is not None else "running"
    return name  # type: ignore[return-value]  # the enum's names are Execution's values


@dataclass(frozen=True)
class AttemptFacts:
    """The pending ``run_job`` activity, as describe shows it."""

    state: ActivityState
    attempt: int = 1  # Temporal's attempt counter of this activity (1-based)
    next_attempt_at: datetime | None = None
    last_failure: str | None = None
    # When its heartbeat's running attempt record says the handler started; a pre-dispatched
    # attempt records its start a few seconds before run_at, so this may be ahead of now.
    handler_since: datetime | None = None


@dataclass(frozen=True)
class Facts:
    """What is known about one job. ``attribute`` is the ``JobStatus`` search attribute."""

    execution: Execution
    attribute: str | None = None
    kind: Literal["job", "cron"] = "job"
    run_at: datetime | None = None
    activity: AttemptFacts | None = None
    cancel_requested: bool = False
    failure_type: str | None = None  # a closed run's failure (when known)
    failure_message: str | None = None
    # The workflow's own state when a query answered: newer than describe when the two
    # cross (a run that settled between the describe and the query).
    report: JobStatus | None = None


@dataclass(frozen=True)
class Verdict:
    status: JobStatus
    detail: str | None = None
    next_attempt_at: datetime | None = None
    last_error: str | None = None


def public_status(facts: Facts, now: datetime) -> Verdict:
    """The job's status in the public vocabulary (see the module docstring)."""
    if facts.execution != "running":
        return _closed(facts)
    if facts.report in SETTLED:  # the workflow ended; its run closes with that same task
        return Verdict(facts.report)
    if facts.cancel_requested:
        return Verdict(JobStatus.CANCELLING, last_error=_failure(facts))
    if facts.attribute == JobStatus.PAUSED:
        return Verdict(JobStatus.PAUSED)
    if facts.attribute == JobStatus.DEAD:
        return Verdict(JobStatus.DEAD)
    if facts.kind == "cron":
        return Verdict(JobStatus.SCHEDULED)
    due = facts.run_at is None or facts.run_at <= now
    activity = facts.activity
    if activity is None:
        return Verdict(JobStatus.PENDING if due else JobStatus.SCHEDULED)
    error = activity.last_failure or None
    if activity.state != "scheduled":
        running = activity.handler_since is not None and activity.handler_since <= now
        if not due and not running:
            return Verdict(JobStatus.SCHEDULED, "with a worker, waiting for run_at")
        return Verdict(JobStatus.RUNNING, last_error=error)
    if not due:  # handed out ahead of run_at; no worker has taken it yet
        return Verdict(JobStatus.SCHEDULED)
    next_at = activity.next_attempt_at
    if activity.attempt > 1 and next_at is not None and next_at > now:
        return Verdict(JobStatus.RETRYING, next_attempt_at=next_at, last_error=error)
    return Verdict(JobStatus.PENDING, next_attempt_at=next_at, last_error=error)


def _failure(facts: Facts) -> str | None:
    return facts.activity.last_failure if facts.activity is not None else None


def _closed(facts: Facts) -> Verdict:
    match facts.execution:
        case "completed":
            return Verdict(JobStatus.DONE)
        case "canceled":
            return Verdict(JobStatus.CANCELLED)
        case "terminated":
            return Verdict(JobStatus.CANCELLED, "terminated")
        case "continued_as_new":  # an earlier run of a cron: its successor speaks for it
            return Verdict(JobStatus.SCHEDULED, "continued as new")
    if is_discarded(facts.attribute, facts.failure_type):
        return Verdict(JobStatus.DISCARDED)
    why = facts.failure_message or facts.failure_type or facts.execution.replace("_", " ")
    return Verdict(
        JobStatus.DEAD,
        "the run ended (it cannot be requeued)",
        last_error=why,
    )


def is_discarded(attribute: str | None, failure_type: str | None) -> bool:
    """A closed Failed run is a discarded job: JobStatus says so (``discarded``) or its
    failure does."""
    return attribute == JobStatus.DISCARDED or failure_type == DISCARDED_FAILURE


# -- attempts ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AttemptCount:
    """One attempt: its number (cumulative, from 1) and its place in its round's budget."""

    number: int
    in_round: int
    budget: int
    round: int = 1

    @property
    def label(self) -> str:
        return attempt_label(self.number, self.in_round, self.budget, self.round)


def attempt_label(number: int, in_round: int, budget: int, round_: int = 1) -> str:
    """``attempt 2 of 4``; past the first round (or after a handover) the cumulative number
    first, then the place in the round: ``attempt 6 (2 of 4 in round 2)``."""
    if round_ == 1 and number == in_round:
        return f"attempt {number} of {budget}"
    return f"attempt {number} ({in_round} of {budget} in round {round_})"


def current_attempt(attempts: Sequence[AttemptRecord], round_: int, budget: int) -> AttemptCount:
    """The attempt running now, or the one due next: never attempt 0."""
    running = bool(attempts) and attempts[-1].outcome == "running"
    before = list(attempts[:-1]) if running else list(attempts)
    number = attempts[-1].attempt if running else (before[-1].attempt + 1 if before else 1)
    spent = sum(1 for a in before if a.round == round_ and a.spent)
    return AttemptCount(number, spent + 1, budget, round_)


def last_attempt(attempts: Sequence[AttemptRecord], budget: int) -> AttemptCount | None:
    """The latest attempt that ended (None before any did)."""
    ended = [a for a in attempts if a.outcome != "running"]
    if not ended:
        return None
    last = ended[-1]
    in_round = sum(1 for a in ended if a.round == last.round and a.spent)
    return AttemptCount(last.attempt, max(in_round, 1), budget, last.round)


def ran_at(attempts: Sequence[AttemptRecord]) -> datetime | None:
    """When the job first ran (its first attempt's start); None if it never ran."""
    return attempts[0].started_at if attempts else None


def job_time(run_at: datetime | None, closed_at: datetime | None) -> datetime | None:
    """The job's time, for "newest first": when it runs (run_at); once closed, never later
    than when it closed (a job triggered or cancelled before its run_at)."""
    if run_at is None or closed_at is None:
        return run_at or closed_at
    return min(run_at, closed_at)


class JobView(JobReport):
    """A job's report as ``jobctl status`` and ``GET /jobs/{id}`` show it: the workflow's report
    with the status this module computed and the attempt numbering filled in."""

    status_detail: str | None = None  # e.g. "terminated", "with a worker, waiting for run_at"
    attempt: int | None = None  # the attempt running, or due next (cumulative, from 1)
    attempt_label: str | None = None  # "attempt 2 of 4", "attempt 6 (2 of 4 in round 2)"
    ran_at: datetime | None = None  # when it first ran (a finished job shows this, not run_at)
