"""The ``run_job`` activity: one attempt of a job's handler, holding the lease by heartbeat.

The heartbeat timeout is the lease. Heartbeats flow from the event loop while the handler runs
(a thread for sync handlers), so a busy handler keeps its lease and a dead worker loses it.
The round's attempt log travels in the heartbeat details, which Temporal hands to the next
attempt, so every attempt's start, end, worker and error survive worker crashes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any, Literal

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from activities.registry import HandlerRegistry, JobContext, PermanentError
from workflows.backoff import base_delay, retry_delay
from workflows.models import AttemptRecord, HeartbeatState, RunJobInput, RunJobResult

Outcome = Literal["succeeded", "failed", "cancelled", "handed_over"]

log = logging.getLogger("jobs.run_job")
# Failed attempts are routine for a job scheduler: we log one line each ourselves, and the
# SDK logs BENIGN failures at DEBUG instead of a traceback per attempt.
BENIGN = ApplicationErrorCategory.BENIGN
# Sync handlers that ignore ctx.cancelled get this long to notice before we give up on them.
CANCEL_GRACE_SECONDS = 5.0


class CancelledByRequest(Exception):
    """Recorded as the error of an attempt stopped by ``jobs cancel``."""


class HandedOver(Exception):
    """Recorded as the error of an attempt given back by a worker shutting down cleanly."""


class UnknownHandlerError(PermanentError):
    """The job names a handler this worker does not have."""


def previous_attempts(info: activity.Info, job: RunJobInput) -> HeartbeatState:
    """The round's log from earlier attempts, closing one that died without reporting."""
    if not info.heartbeat_details:
        return HeartbeatState()
    state = HeartbeatState.model_validate(info.heartbeat_details[0])
    state.progress = None
    if state.attempts and state.attempts[-1].outcome == "running":
        spec = job.spec
        # The server scheduled this attempt one RetryPolicy interval after the loss.
        lost_at = info.current_attempt_scheduled_time - timedelta(
            seconds=base_delay(
                max(job.spent + info.attempt - 1, 1), spec.backoff_base, spec.backoff_max
            )
        )
        ran_for = (lost_at - state.attempts[-1].started_at).total_seconds()
        if ran_for >= spec.timeout:
            state.close_dangling(
                lost_at, f"attempt exceeded the {spec.timeout:g}s timeout", "AttemptTimeout"
            )
        else:
            state.close_dangling(
                lost_at,
                f"lease lost: no heartbeat for {spec.lease:g}s (worker died or stalled)",
                "LeaseExpired",
            )
    return state


class JobActivities:
    """Activities bound to a handler registry and the thread pool for sync handlers."""

    def __init__(self, registry: HandlerRegistry, executor: ThreadPoolExecutor, worker: str):
        self.registry = registry
        self.executor = executor
        self.worker = worker

    @activity.defn(name="run_job")
    async def run_job(self, job: RunJobInput) -> RunJobResult:
        info = activity.info()
        spec = job.spec
        state = previous_attempts(info, job)
        started = time.monotonic()
        record = AttemptRecord(
            attempt=job.attempt_offset + info.attempt,
            round=job.round,
            started_at=info.started_time,
            worker=self.worker,
        )
        state.attempts.append(record)
        activity.heartbeat(state)

        def finish(
            outcome: Outcome, error: BaseException | None = None, delay: float | None = None
        ) -> None:
            # Server start time plus our own monotonic duration: one consistent timeline.
            ended = record.started_at + timedelta(seconds=time.monotonic() - started)
            message = (str(error) or type(error).__name__) if error else None
            kind = type(error).__name__ if error else None
            state.attempts[-1] = record.close(outcome, ended, message, kind, delay)
            state.progress = None
            activity.heartbeat(state)

        ctx = JobContext(
            job_id=spec.id,
            name=spec.name,
            attempt=record.attempt,
            max_attempts=spec.max_attempts,
            scheduled_at=spec.run_at or info.scheduled_time,
            idempotency_key=spec.key,
            payload=spec.payload,
            worker=self.worker,
        )
        ctx._report = lambda details: setattr(state, "progress", details)
        try:
            fn = self.registry.get(spec.handler)
            if fn is None:
                raise UnknownHandlerError(
                    f"unknown handler {spec.handler!r}; this worker has {self.registry.names()}"
                )
            result = await self._run(fn, ctx, state, lease=spec.lease)
            try:
                json.dumps(result)
            except (TypeError, ValueError) as err:  # retrying would not make it storable
                raise PermanentError(f"handler returned a value that is not JSON: {err}") from err
        except asyncio.CancelledError as err:
            # Report the attempt instead of raising where we can: Temporal drops the details
            # of a cancelled activity, and the workflow keeps the history.
            details = activity.cancellation_details()
            if details is not None and details.cancel_requested:
                finish("cancelled", CancelledByRequest("job cancelled while running"))
                return RunJobResult(attempts=state.attempts, cancelled=True)
            if details is not None and details.worker_shutdown:
                finish("handed_over", HandedOver("worker shut down cleanly; runs elsewhere"))
                log.warning(
                    "job %s attempt %d handed over: worker shutting down", spec.id, record.attempt
                )
                return RunJobResult(attempts=state.attempts, handed_over=True)
            finish("cancelled", err)  # timed out or lost its lease: Temporal retries it
            raise
        except PermanentError as err:
            finish("failed", err)
            log.warning("job %s attempt %d failed permanently: %s", spec.id, record.attempt, err)
            raise ApplicationError(
                str(err), state, type=type(err).__name__, non_retryable=True, category=BENIGN
            ) from err
        except Exception as err:
            in_round = job.spent + info.attempt  # this attempt's number within the round
            delay = None
            if in_round < spec.max_attempts:
                delay = retry_delay(
                    in_round, spec.backoff_base, spec.backoff_max, spec.jitter, random.random()
                )
            finish("failed", err, delay)
            then = f"retry in {delay:.1f}s" if delay is not None else "no attempts left"
            log.warning(
                "job %s attempt %d failed: %s: %s; %s",
                spec.id,
                record.attempt,
                type(err).__name__,
                err,
                then,
            )
            raise ApplicationError(
                str(err) or type(err).__name__,
                state,
                type=type(err).__name__,
                next_retry_delay=timedelta(seconds=delay) if delay is not None else None,
                category=BENIGN,
            ) from err
        finish("succeeded")
        return RunJobResult(attempts=state.attempts, result=result)

    async def _run(self, fn: Any, ctx: JobContext, state: HeartbeatState, lease: float) -> Any:
        """Run the handler, heartbeating every third of the lease until it returns."""
        if HandlerRegistry.is_async(fn):
            task: asyncio.Future[Any] = asyncio.ensure_future(fn(ctx))
        else:
            loop = asyncio.get_running_loop()
            task = loop.run_in_executor(self.executor, fn, ctx)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=lease / 3)
                if done:
                    return task.result()
                activity.heartbeat(state)
        except asyncio.CancelledError:
            ctx._cancelled.set()
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait({task}, timeout=CANCEL_GRACE_SECONDS)
            raise
