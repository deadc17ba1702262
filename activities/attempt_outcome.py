"""What one attempt's ending is recorded as, and the wall that keeps a handler's exceptions
inside its attempt.

A handler may raise anything, including what is not an :class:`Exception`: ``sys.exit()``
(SystemExit), ``KeyboardInterrupt``, ``GeneratorExit``, or an ``asyncio.CancelledError`` that
nobody asked for. Let through, asyncio re-raises SystemExit and KeyboardInterrupt out of the
event loop, which tears the whole worker down (every other attempt on it included), and the
job's retry then does the same to every fresh worker it reaches. So the handler runs inside
:func:`contained_sync` / :func:`contained_async`, which turn such an exception into a
:class:`HandlerAborted`: the attempt fails with the original type and value as its reason,
retried or dead-lettered like any failure, and the worker keeps polling.

``asyncio.CancelledError`` keeps its meaning when it was asked for (``jobctl cancel``, the job's
timeout, a lost lease, a worker shutting down): only a handler cancelling itself is contained.
A real Ctrl-C or SIGTERM never arrives as an exception inside a handler: the worker turns both
into a graceful shutdown with its own signal handlers (worker.py).

``os._exit()`` cannot be contained: it ends the worker process like SIGKILL, and the attempt
is lost by its lease (recorded as ``LeaseExpired``) and retried on another worker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, Literal, NoReturn

from temporalio import activity
from temporalio.exceptions import ApplicationError

from jobctl.activities import metrics
from jobctl.activities.context import JobContext, PermanentError
from jobctl.activities.failure_size import clip
from jobctl.activities.predispatch import starts_at_once
from jobctl.workflows.backoff import base_delay
from jobctl.workflows.job_rules import attempt_allowance
from jobctl.workflows.models import AttemptRecord, HeartbeatState, RunJobInput

Outcome = Literal["succeeded", "failed", "lost", "cancelled", "handed_over"]

log = logging.getLogger("jobs.run_job")
# How long a failed attempt waits for the server to take its failure (and log) before it
# falls back to the SDK's own way of reporting it.
REPORT_TIMEOUT = timedelta(seconds=10)


class CancelledByRequest(Exception):
    """Recorded as the error of an attempt stopped by ``jobctl cancel``."""


class HandedOver(Exception):
    """Recorded as the error of an attempt given back by a worker shutting down cleanly."""


class LeaseExpired(Exception):
    """Recorded as the error of an attempt whose lease ran out (no heartbeat in time)."""

    def __init__(self, lease: float) -> None:
        super().__init__(f"lease lost: no heartbeat for {lease:g}s (worker died or stalled)")


# The error of an attempt lost before any heartbeat of its own reached the server.
LOST_UNRECORDED = (
    "lease lost before the attempt's first heartbeat reached the server (worker died or"
    " stalled); its times are reckoned from the retry that followed it"
)


class WorkerStopped(Exception):
    """Recorded as the error of an attempt whose worker's event loop stopped under it."""


def cancellation_cause(
    details: activity.ActivityCancellationDetails | None, lease: float
) -> tuple[Outcome, BaseException]:
    """What a CancelledError that is neither ``jobctl cancel`` nor a clean shutdown means for
    the attempt: a lost lease, a worker whose loop was torn down, or Temporal's own reason."""
    if details is None:  # not Temporal's cancel: asyncio cancelled every task on the way out
        stopped = "the worker's event loop stopped under the attempt; it runs again elsewhere"
        return "lost", WorkerStopped(stopped)
    if details.timed_out or details.not_found:
        return "lost", LeaseExpired(lease)
    return "cancelled", asyncio.CancelledError("attempt cancelled by Temporal (paused or reset)")


class AttemptTimeout(Exception):
    """The handler ran past the job's ``timeout``."""


class UnknownHandlerError(PermanentError):
    """The job names a handler this worker does not have."""


class HandlerAborted(Exception):
    """A handler raised a BaseException that is not an Exception; the attempt records
    ``raised`` (its type and value) as its error, and the worker carries on."""

    def __init__(self, raised: BaseException, note: str = "") -> None:
        super().__init__(f"handler raised {raised!r}{note}; the worker kept running")
        self.raised = raised


def error_fields(err: BaseException) -> tuple[str, str]:
    """The (message, type name) an attempt records for ``err``: the message cut to
    ``MESSAGE_BYTES`` (and marked), the same text its failure carries."""
    if isinstance(err, HandlerAborted):
        return clip(str(err)), type(err.raised).__name__
    return clip(str(err) or type(err).__name__), type(err).__name__


def contained_sync(fn: Callable[[JobContext], Any], ctx: JobContext) -> Any:
    """Call a sync handler (in its pool thread), containing what is not an Exception."""
    try:
        return fn(ctx)
    except Exception:
        raise
    except BaseException as err:  # asyncio never cancels a thread: any of these is the handler's
        raise HandlerAborted(err) from err


async def contained_async(fn: Callable[[JobContext], Awaitable[Any]], ctx: JobContext) -> Any:
    """Await an async handler inside its own task, containing what is not an Exception,
    a CancelledError included unless someone did cancel the task."""
    try:
        return await fn(ctx)
    except Exception:
        raise
    except asyncio.CancelledError as err:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # asked for: cancel request, timeout, lost lease or shutdown
        raise HandlerAborted(err, " without being cancelled") from err
    except BaseException as err:
        raise HandlerAborted(err) from err


class AttemptLog:
    """The running attempt's record in the round's log (the heartbeat details) and metrics."""

    def __init__(self, state: HeartbeatState, record: AttemptRecord, handler: str) -> None:
        self.state = state
        self.record = record
        self.handler = handler
        self.started = time.monotonic()
        state.attempts.append(record)

    def restart(self, started_at: datetime) -> None:
        """The handler starts now: its start was recorded before it took a handler slot."""
        self.record = self.record.model_copy(update={"started_at": started_at})
        self.state.attempts[-1] = self.record
        self.started = time.monotonic()

    def close(
        self, outcome: Outcome, error: BaseException | None = None, delay: float | None = None
    ) -> None:
        # Server start time plus our own monotonic duration: one consistent timeline.
        ran = timedelta(seconds=time.monotonic() - self.started)
        message, kind = error_fields(error) if error is not None else (None, None)
        self.state.attempts[-1] = self.record.close(
            outcome, self.record.started_at + ran, message, kind, delay
        )
        self.state.progress = None
        # The next attempt reads the log from the heartbeat details. A failure brings them
        # in its own request (fail_with_log); a success needs none (the result has the log).
        if outcome not in ("succeeded", "failed"):
            activity.heartbeat(self.state)
        metrics.record_end(self.handler, outcome, ran)


async def fail_with_log(failure: ApplicationError, state: HeartbeatState) -> NoReturn:
    """Fail the attempt with a retry ``failure``, the round's log (this attempt closed) riding
    in the same request as its last heartbeat details: the next attempt reads it there, at no
    extra heartbeat. (The SDK attaches a pending heartbeat to the failure only when one was
    sent in this attempt already; otherwise the heartbeat is a request, and billed, of its
    own.) Sent through the SDK's async-completion handle, then the SDK is told the activity
    is completed; if the request does not get through, the ordinary way: heartbeat, raise."""
    info = activity.info()
    handle = activity.client().get_async_activity_handle(task_token=info.task_token)
    try:
        await handle.fail(failure, last_heartbeat_details=[state], rpc_timeout=REPORT_TIMEOUT)
    except Exception as err:  # unreachable, or the attempt is no longer current
        log.warning("job %s: could not report the failure with its log: %s", info.workflow_id, err)
        activity.heartbeat(state)
        raise failure from None
    activity.raise_complete_async()


def server_gives_up(info: activity.Info) -> bool:
    """Whether the server retries no more after this attempt (its RetryPolicy's attempts are
    used up, e.g. by attempts lost before their handler ran): its failure then ends the round
    and must carry the round's log like any last failure."""
    policy = info.retry_policy
    return policy is not None and 0 < policy.maximum_attempts <= info.attempt


def previous_attempts(info: activity.Info, job: RunJobInput) -> HeartbeatState:
    """The round's log from earlier attempts, closing one that died without reporting and,
    for attempts that start at once, adding those lost before any heartbeat of theirs
    reached the server (:func:`unrecorded_attempts`)."""
    if info.heartbeat_details:
        state = HeartbeatState.model_validate(info.heartbeat_details[0])
    else:
        state = HeartbeatState()
    state.progress = None
    spec = job.spec
    unrecorded = lost = unrecorded_attempts(info, job, state)
    if job.not_before is not None:
        # A pre-dispatched attempt started well before run_at records its start at its check:
        # one of them without a record was lost while it waited, and costs nothing.
        spent_by = job.not_before
        unrecorded = [a for a in unrecorded if starts_at_once(a.started_at, spent_by)]
        for number, record in enumerate(unrecorded, start=len(state.attempts) + 1):
            record.attempt = job.attempt_offset + number
    if state.attempts and state.attempts[-1].outcome == "running":
        # The server scheduled the attempt after it one RetryPolicy interval after the loss.
        after = lost[0].started_at if lost else info.current_attempt_scheduled_time
        number = max(info.attempt - 1 - len(lost), 1)
        lost_at = after - timedelta(seconds=base_delay(number, spec.backoff_base, spec.backoff_max))
        ran_for = (lost_at - state.attempts[-1].started_at).total_seconds()
        if ran_for >= spec.timeout:
            state.close_dangling(
                lost_at, f"attempt exceeded the {spec.timeout:g}s timeout", "AttemptTimeout"
            )
        else:
            state.close_dangling(lost_at, str(LeaseExpired(spec.lease)), LeaseExpired.__name__)
    state.attempts.extend(unrecorded)
    return state


def unrecorded_attempts(
    info: activity.Info, job: RunJobInput, state: HeartbeatState
) -> list[AttemptRecord]:
    """The attempts the server made before this one that the log lacks, oldest first: each
    sent no heartbeat (it started at once and its handler was short, or it ended its worker
    first; or it was pre-dispatched and lost while it waited) and was lost by its lease.
    Their times are reckoned back from when this attempt was scheduled: each was timed out
    one lease (or its allowance, if shorter) after its start and retried one RetryPolicy
    interval later."""
    spec = job.spec
    missing = info.attempt - 1 - len(state.attempts)
    held = timedelta(seconds=min(spec.lease, attempt_allowance(spec).total_seconds()))
    # They came after the last recorded attempt (a pre-dispatched round's attempts lost while
    # waiting leave no record anywhere in the log, so the count alone may reach past it).
    last = state.attempts[-1] if state.attempts else None
    since = (last.ended_at or last.started_at) if last is not None else None
    records: list[AttemptRecord] = []
    scheduled = info.current_attempt_scheduled_time
    for number in range(info.attempt - 1, info.attempt - 1 - missing, -1):
        ended = scheduled - timedelta(
            seconds=base_delay(number, spec.backoff_base, spec.backoff_max)
        )
        scheduled = ended - held
        if since is not None and scheduled <= since:
            break
        record = AttemptRecord(
            attempt=job.attempt_offset + number,
            round=job.round,
            started_at=scheduled,
            worker="unknown",
        )
        records.append(record.close("lost", ended, LOST_UNRECORDED, LeaseExpired.__name__))
    return records[::-1]
