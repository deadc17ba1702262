"""How an attempt ends: one type per shape, each knowing what it records and what Temporal sees.

``run_job`` runs the handler and turns whatever happened into exactly one ending; the ending
closes the attempt's record (the round's log and the metrics, :class:`AttemptLog`), writes a
log line where one is due, then returns the activity's result or raises what Temporal must
see. One small type per shape, rather than branches in one function (as River's ``error.go``
gives each way a job can end its own type):

========================  ===========================  ==========================================
ending                    the attempt is recorded as   Temporal sees
========================  ===========================  ==========================================
:class:`Succeeded`        succeeded                    the result, with the round's log
:class:`CancelRequested`  cancelled                    a result: ``cancelled``
:class:`ShutdownHandover` handed_over                  a result: ``handed_over`` (runs elsewhere)
:class:`Interrupted`      lost, or cancelled (cause)   the CancelledError: Temporal retries it
:class:`PermanentFailure` failed                       a non-retryable failure with the log
:class:`RetryLater`       failed, with its delay       a retry failure (the log rides along)
:class:`OutOfAttempts`    failed                       a non-retryable failure with the log
========================  ===========================  ==========================================

A cancel or a shutdown is reported as a result where it can be: Temporal drops the details of
a cancelled activity, and the workflow keeps the history. Every failure is cut to the server's
size limit (:mod:`activities.failure_size`); only a failure that ends the round carries the
round's log (in its details: written to history, never kept as a retry failure).
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from jobctl.activities.attempt_outcome import (
    AttemptLog,
    CancelledByRequest,
    HandedOver,
    cancellation_cause,
    error_fields,
    fail_with_log,
    server_gives_up,
)
from jobctl.activities.context import PermanentError
from jobctl.activities.failure_size import fitted, handler_failure
from jobctl.workflows.backoff import retry_delay
from jobctl.workflows.models import HeartbeatState, JobSpec, RunJobResult

log = logging.getLogger("jobs.run_job")
# Failed attempts are routine for a job scheduler: we log one line each ourselves, and the
# SDK logs BENIGN failures at DEBUG instead of a traceback per attempt.
BENIGN = ApplicationErrorCategory.BENIGN


class Ending(Protocol):
    async def settle(self, attempt: AttemptLog, spec: JobSpec) -> RunJobResult:
        """Close ``attempt``; the activity's result, or raise what Temporal must see."""
        ...


@dataclass
class Succeeded:
    result: Any

    async def settle(self, attempt: AttemptLog, spec: JobSpec) -> RunJobResult:
        attempt.close("succeeded")
        return RunJobResult(attempts=attempt.state.attempts, result=self.result)


@dataclass
class CancelRequested:
    """``jobctl cancel`` reached the running handler."""

    async def settle(self, attempt: AttemptLog, spec: JobSpec) -> RunJobResult:
        attempt.close("cancelled", CancelledByRequest("job cancelled while running"))
        return RunJobResult(attempts=attempt.state.attempts, cancelled=True)


@dataclass
class ShutdownHandover:
    """The worker shut down cleanly: the attempt gives the job back, spending nothing."""

    async def settle(self, attempt: AttemptLog, spec: JobSpec) -> RunJobResult:
        attempt.close("handed_over", HandedOver("worker shut down cleanly; runs elsewhere"))
        number = attempt.record.attempt
        log.warning("job %s attempt %d handed over: worker shutting down", spec.id, number)
        return RunJobResult(attempts=attempt.state.attempts, handed_over=True)


@dataclass
class Interrupted:
    """Any other cancel: a lost lease, a torn-down event loop, Temporal's own (pause, reset).
    Recorded with its cause, then raised again for Temporal to retry."""

    error: asyncio.CancelledError
    details: activity.ActivityCancellationDetails | None

    async def settle(self, attempt: AttemptLog, spec: JobSpec) -> RunJobResult:
        attempt.close(*cancellation_cause(self.details, spec.lease))
        raise self.error


def cancelled(error: asyncio.CancelledError) -> Ending:
    """The ending of an attempt whose handler was cancelled, by why it was."""
    details = activity.cancellation_details()
    if details is not None and details.cancel_requested:
        return CancelRequested()
    if details is not None and details.worker_shutdown:
        return ShutdownHandover()
    return Interrupted(error, details)


@dataclass
class PermanentFailure:
    """The handler raised :class:`PermanentError` (or cannot run at all): no retry."""

    error: PermanentError

    async def settle(self, attempt: AttemptLog, spec: JobSpec) -> RunJobResult:
        attempt.close("failed", self.error)
        message, kind = error_fields(self.error)
        number = attempt.record.attempt
        log.warning("job %s attempt %d failed permanently: %s", spec.id, number, message)
        failure = ApplicationError(
            message, attempt.state, type=kind, non_retryable=True, category=BENIGN
        )
        converter = activity.client().data_converter
        raise handler_failure(failure, self.error, converter) from self.error


@dataclass
class RetryLater:
    """The handler failed and the round has attempts left: retried after ``delay`` seconds.
    The failure carries no details; the round's log reaches the next attempt with it."""

    error: Exception
    delay: float

    async def settle(self, attempt: AttemptLog, spec: JobSpec) -> RunJobResult:
        _close_failed(attempt, self.error, spec, self.delay)
        await fail_with_log(_failure(attempt, self.error, self.delay), attempt.state)


@dataclass
class OutOfAttempts:
    """The handler failed on the round's last attempt (or the server retries no more): the
    round ends, and its failure brings the round's log to the workflow (whose park has
    the dead-letter queue raise the alert)."""

    error: Exception

    async def settle(self, attempt: AttemptLog, spec: JobSpec) -> RunJobResult:
        _close_failed(attempt, self.error, spec, None)
        raise _failure(attempt, self.error, None) from self.error


def failed(error: Exception, number_in_round: int, spec: JobSpec) -> RetryLater | OutOfAttempts:
    """The ending of an attempt whose handler failed (``number_in_round``: this attempt's
    number among those that reached the handler this round)."""
    if number_in_round >= spec.max_attempts or server_gives_up(activity.info()):
        return OutOfAttempts(error)
    jitter = random.random()
    delay = retry_delay(number_in_round, spec.backoff_base, spec.backoff_max, spec.jitter, jitter)
    return RetryLater(error, delay)


def _close_failed(attempt: AttemptLog, err: Exception, spec: JobSpec, delay: float | None) -> None:
    """Close the attempt as failed (retried after ``delay``, or the round's last) and log it."""
    attempt.close("failed", err, delay)
    message, kind = error_fields(err)
    then = f"retry in {delay:.1f}s" if delay is not None else "no attempts left"
    number = attempt.record.attempt
    log.warning("job %s attempt %d failed: %s: %s; %s", spec.id, number, kind, message, then)


def _failure(attempt: AttemptLog, err: Exception, delay: float | None) -> ApplicationError:
    """The failure for ``err``, cut to size: a retry after ``delay`` without details, or
    (``delay`` None) the round's end with its log."""
    message, kind = error_fields(err)
    last = delay is None
    failure = ApplicationError(
        message,
        *([attempt.state] if last else []),
        type=kind,
        non_retryable=last,
        next_retry_delay=timedelta(seconds=delay) if delay is not None else None,
        category=BENIGN,
    )
    return handler_failure(failure, err, activity.client().data_converter)


def attempts_exhausted(state: HeartbeatState, max_attempts: int) -> ApplicationError:
    """The failure of an attempt that finds the round's budget spent before its handler ran
    (the last attempt was lost mid-handler): ends the round with its log."""
    exhausted = ApplicationError(
        f"all {max_attempts} attempts used; the last one was lost",
        state,
        type="AttemptsExhausted",
        non_retryable=True,
        category=BENIGN,
    )
    return fitted(exhausted, activity.client().data_converter)
