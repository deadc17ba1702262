"""The ``run_job`` activity: one attempt of a job's handler, holding the lease by heartbeat.

The heartbeat timeout is the lease. Heartbeats flow from the event loop while the handler runs
(a thread for sync handlers), so a busy handler keeps its lease and a dead worker loses it.
The round's attempt log travels in the heartbeat details, which Temporal hands to the next
attempt, so every attempt's start, end, worker and error survive worker crashes. The start
is recorded with the server before the handler runs, and whatever the handler raises stays
in its attempt (:mod:`activities.attempt_outcome`). A failed attempt's record reaches the
next attempt in the same request as its failure (no heartbeat of its own); the failure itself
carries no log and is cut to fit the server's limit (:mod:`activities.failure_size`), and
only the round's last failure, which is never kept as a retry failure, brings the round's log
to the workflow.

Pre-dispatch: a job reaches a worker up to its ``dispatch_lead`` (30 s) before run_at (each
job at its own moment, so a herd due in one second costs the server its work spread over half
a minute). The activity then waits in the worker, heartbeating, until run_at by the server's
clock (its start time as the server stamped it, plus local monotonic time), checks once that
the job was not paused or cancelled meanwhile, and starts the handler on time.

Budget: Temporal's RetryPolicy allows the round's attempts plus a few in reserve, and this
activity counts the attempts that reached the handler, refusing to run past ``max_attempts``.
An attempt lost while it was only waiting (its worker died before run_at) therefore costs
nothing, and one lost mid-handler counts as spent.

Cancel latency: a cancel reaches the attempt in the answer to a heartbeat. While the handler
runs, the loop beats every ``min(lease / 3, cancel_latency)`` and the worker lets the SDK send
one every ``min(80% of the lease, cancel_latency)`` (``max_heartbeat_throttle_interval``), so a
cancel reaches the handler within :meth:`JobActivities.cancel_within` (10 s by default): 360
heartbeats per hour of handler run time. An attempt that only waits for its run_at sends no
heartbeat when its lease covers the wait (:func:`lease_covers`: the default 30 s lead in a 60 s
lease), else beats at the SDK's own cadence; a cancel then is caught by its check before run_at.

Metrics (:mod:`activities.metrics`): each attempt that reaches its handler counts as started
with its fire lag (handler start minus when the attempt was due, see :func:`due_at`), and as
succeeded or failed with its run time when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any, Literal

from temporalio import activity
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from activities import metrics
from activities.attempt_outcome import (
    AttemptLog,
    AttemptTimeout,
    CancelledByRequest,
    HandedOver,
    UnknownHandlerError,
    cancellation_cause,
    contained_async,
    contained_sync,
    error_fields,
    fail_with_log,
    heartbeat_durably,
    previous_attempts,
    server_gives_up,
)
from activities.failure_size import fitted, handler_failure
from activities.registry import HandlerRegistry, JobContext, PermanentError
from workflows.backoff import retry_delay
from workflows.models import (
    JOB_STATUS,
    AttemptRecord,
    HeartbeatState,
    JobSpec,
    JobStatus,
    RunJobInput,
    RunJobResult,
)

log = logging.getLogger("jobs.run_job")
# Failed attempts are routine for a job scheduler: we log one line each ourselves, and the
# SDK logs BENIGN failures at DEBUG instead of a traceback per attempt.
BENIGN = ApplicationErrorCategory.BENIGN
# Sync handlers that ignore ctx.cancelled get this long to notice before we give up on them.
CANCEL_GRACE_SECONDS = 5.0
# The most a cancel takes to reach a running handler, unless the worker says otherwise
# (JOBS_CANCEL_LATENCY, worker.py): the heartbeat cadence while a handler runs.
DEFAULT_CANCEL_LATENCY = 10.0
# The SDK sends heartbeats at most every this fraction of the heartbeat timeout (the lease).
SDK_THROTTLE = 0.8
# A pre-dispatched attempt checks, this many seconds before run_at (plus a random spread so a
# herd does not check at once), that the job still wants to run. Pause refuses to act later
# than CONTROL_CUTOFF before run_at (see JobWorkflow), so the check always sees it.
GO_CHECK_AHEAD = 3.0
GO_CHECK_SPREAD = 6.0
GO_CHECK_TIMEOUT = 10.0
# The worker pings the server this often; a handler due to start when the last good answer is
# older than LIVENESS_WINDOW waits for the server (see ServerLiveness).
LIVENESS_PING = 0.25
LIVENESS_WINDOW = 1.0


def due_at(info: activity.Info, job: RunJobInput) -> datetime:
    """When this attempt was due, by the server's clock: the base of its fire lag.

    A retry was due when the server scheduled it (after its backoff), or at run_at if it is
    still waiting for it. A first attempt was due at run_at; unless it runs earlier than that
    (triggered) or belongs to a requeued round, then when the server scheduled it.
    """
    scheduled = info.current_attempt_scheduled_time
    if info.attempt > 1:
        return max(scheduled, job.not_before) if job.not_before is not None else scheduled
    if job.not_before is not None:
        return job.not_before
    if job.round == 1 and job.spec.run_at is not None:
        return min(job.spec.run_at, scheduled)
    return scheduled


class ServerClock:
    """The server's time as this attempt knows it: the start the server stamped on the attempt,
    advanced by local monotonic time (immune to the worker's wall clock)."""

    def __init__(self, started: datetime):
        self.started = started
        self.origin = time.monotonic()

    def now(self) -> datetime:
        return self.started + timedelta(seconds=time.monotonic() - self.origin)


def lease_covers(wait: float, lease: float) -> bool:
    """Whether an attempt's lease holds, without any heartbeat, through a wait of ``wait``
    seconds from the attempt's start: the handler's start beats at once when it ends
    (``heartbeat_durably``), and the check before run_at may take GO_CHECK_TIMEOUT."""
    return wait + GO_CHECK_TIMEOUT <= lease * SDK_THROTTLE


async def sleep_heartbeating(seconds: float, state: HeartbeatState, lease: float | None) -> None:
    """Wait, holding the lease at the SDK's default cadence (no handler runs: no cancel to
    hurry, and no heartbeat beyond what the lease needs); ``lease`` None: the lease covers
    the whole wait (:func:`lease_covers`), so no heartbeat at all."""
    if lease is None:
        await asyncio.sleep(max(seconds, 0.0))
        return
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        await asyncio.sleep(min(left, lease * SDK_THROTTLE))
        activity.heartbeat(state)


class ServerLiveness:
    """Whether the server answered lately: one cheap health check per worker per LIVENESS_PING,
    whatever the number of jobs. A dispatched job does not start its handler while the server
    is silent, since its outcome could not be recorded and the job would run again."""

    def __init__(self) -> None:
        self.last_ok = time.monotonic()
        self.task: asyncio.Task[None] | None = None

    def watch(self, client: Client) -> None:
        if self.task is None:
            self.task = asyncio.create_task(self._ping(client), name="server-liveness")

    async def _ping(self, client: Client) -> None:
        while True:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.service_client.check_health(), LIVENESS_PING * 4)
                self.last_ok = time.monotonic()
            await asyncio.sleep(LIVENESS_PING)

    def silent(self) -> bool:
        return time.monotonic() - self.last_ok > LIVENESS_WINDOW

    async def wait_until_heard(self) -> None:
        while self.silent():
            await asyncio.sleep(0.1)

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            self.task = None


class JobActivities:
    """Activities bound to a handler registry, the thread pool for sync handlers and the
    worker's handler slots (attempts waiting for their time do not hold a slot)."""

    def __init__(
        self,
        registry: HandlerRegistry,
        executor: ThreadPoolExecutor,
        worker: str,
        max_concurrent_jobs: int,
        cancel_latency: float = DEFAULT_CANCEL_LATENCY,
    ):
        self.registry = registry
        self.cancel_latency = cancel_latency
        self.executor = executor
        self.worker = worker
        self.slots = asyncio.Semaphore(max_concurrent_jobs)
        self.liveness = ServerLiveness()
        self.running: set[str] = set()  # attempts in their handler, for the loop watchdog

    def cancel_within(self, lease: float) -> float:
        """The most a cancel takes to reach a running handler: how often its heartbeats reach
        the server (the worker's throttle is ``cancel_latency``, the SDK's 80% of the lease)."""
        return min(lease * SDK_THROTTLE, self.cancel_latency)

    def beat_every(self, lease: float) -> float:
        """How often the handler loop hands the SDK a heartbeat: at least as often as the
        throttle lets one through, so every one the throttle allows is sent."""
        return min(lease / 3, self.cancel_latency)

    @activity.defn(name="run_job")
    async def run_job(self, job: RunJobInput) -> RunJobResult:
        info = activity.info()
        state = previous_attempts(info, job)
        spent = job.spent + sum(a.spent for a in state.attempts)
        if spent >= job.spec.max_attempts:  # the last attempt was lost mid-handler
            exhausted = ApplicationError(
                f"all {job.spec.max_attempts} attempts used; the last one was lost",
                state,
                type="AttemptsExhausted",
                non_retryable=True,
                category=BENIGN,
            )
            raise fitted(exhausted, activity.client().data_converter)
        clock = ServerClock(info.started_time)
        if job.not_before is not None:
            self.liveness.watch(activity.client())
            early = await self._wait_for_run_at(job.not_before, clock, state, job.spec.lease)
            if early is not None:
                return early
        async with self.slots:
            return await self._attempt(job, state, spent + 1, clock, due_at(info, job))

    async def _wait_for_run_at(
        self, run_at: datetime, clock: ServerClock, state: HeartbeatState, lease: float
    ) -> RunJobResult | None:
        """Wait (heartbeating) until run_at; a result instead if the job no longer wants to run."""
        # A wait the lease covers sends no heartbeat: the handler's start sends the first.
        beat = None if lease_covers((run_at - clock.started).total_seconds(), lease) else lease
        try:
            ahead = GO_CHECK_AHEAD + random.uniform(0, GO_CHECK_SPREAD)
            until_check = (run_at - clock.now()).total_seconds() - ahead
            if until_check > 0:
                await sleep_heartbeating(until_check, state, beat)
                verdict = await self._still_wanted()
                if verdict is not None:
                    return RunJobResult(attempts=state.attempts, **{verdict: True})
            await sleep_heartbeating((run_at - clock.now()).total_seconds(), state, beat)
            if self.liveness.silent():  # the server went quiet: start only once it hears us
                log.warning(
                    "job %s: server silent at run_at; waiting for it", activity.info().workflow_id
                )
                await self.liveness.wait_until_heard()
                verdict = await self._still_wanted()  # it may have moved on meanwhile
                if verdict is not None:
                    return RunJobResult(attempts=state.attempts, **{verdict: True})
        except asyncio.CancelledError:
            details = activity.cancellation_details()
            if details is not None and details.cancel_requested:
                return RunJobResult(attempts=state.attempts, cancelled=True)
            if details is not None and details.worker_shutdown:
                return RunJobResult(attempts=state.attempts, handed_over=True)
            raise
        return None

    async def _still_wanted(self) -> Literal["withdrawn", "cancelled", "handed_over"] | None:
        """One look at the job before run_at: paused or cancelled meanwhile, or is this attempt
        no longer the current one? (Cancellation also arrives through heartbeats, but a
        waiting attempt beats only every 80% of the lease.) While the server cannot be reached
        the handler does not start: its outcome could not be recorded, and the server would
        run it again."""
        info = activity.info()
        assert info.workflow_id is not None
        handle = activity.client().get_workflow_handle(
            info.workflow_id, run_id=info.workflow_run_id
        )
        delay = 0.5
        while True:
            try:
                desc = await asyncio.wait_for(handle.describe(), GO_CHECK_TIMEOUT)
                break
            except Exception as err:  # unreachable or overloaded: ask again
                log.warning("job %s: pre-start check failed (%s); retrying", info.workflow_id, err)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        mine = [
            p for p in desc.raw_description.pending_activities if p.activity_id == info.activity_id
        ]
        if not mine or mine[0].attempt != info.attempt:
            # The server moved on (it timed this attempt out while it could not hear from us):
            # another attempt runs the job; this one must not. Nothing it returns is recorded.
            return "handed_over"
        if mine[0].state == PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED:
            return "cancelled"
        status = desc.typed_search_attributes.get(JOB_STATUS)
        if status == JobStatus.CANCELLED:
            return "cancelled"
        if status == JobStatus.PAUSED:
            return "withdrawn"
        return None

    async def _attempt(
        self,
        job: RunJobInput,
        state: HeartbeatState,
        number_in_round: int,
        clock: ServerClock,
        due: datetime,
    ) -> RunJobResult:
        """Run the handler once, recording the attempt (in the job's log and the metrics)."""
        spec = job.spec
        record = AttemptRecord(
            attempt=job.attempt_offset + len(state.attempts) + 1,
            round=job.round,
            started_at=clock.now(),
            worker=self.worker,
        )
        attempt = AttemptLog(state, record, spec.handler)
        metrics.record_start(spec.handler, record.started_at - due)
        ctx = JobContext(
            job_id=spec.id,
            name=spec.name,
            attempt=record.attempt,
            max_attempts=spec.max_attempts,
            scheduled_at=spec.run_at or record.started_at,
            idempotency_key=spec.key,
            payload=spec.payload,
            worker=self.worker,
        )
        ctx._report = lambda details: setattr(state, "progress", details)
        state.cancel_within = self.cancel_within(spec.lease)
        try:
            # The lease starts now: status shows the attempt, even if its handler kills us.
            await heartbeat_durably(state, min(spec.lease / 3, GO_CHECK_TIMEOUT))
            result = await self._handle(job, ctx, state)
        except asyncio.CancelledError:
            # Report the attempt instead of raising where we can: Temporal drops the details
            # of a cancelled activity, and the workflow keeps the history.
            details = activity.cancellation_details()
            if details is not None and details.cancel_requested:
                attempt.close("cancelled", CancelledByRequest("job cancelled while running"))
                return RunJobResult(attempts=state.attempts, cancelled=True)
            if details is not None and details.worker_shutdown:
                attempt.close("handed_over", HandedOver("worker shut down cleanly; runs elsewhere"))
                log.warning(
                    "job %s attempt %d handed over: worker shutting down", spec.id, record.attempt
                )
                return RunJobResult(attempts=state.attempts, handed_over=True)
            attempt.close(*cancellation_cause(details, spec.lease))  # Temporal retries it
            raise
        except PermanentError as err:
            attempt.close("failed", err)
            message, kind = error_fields(err)
            log.warning(
                "job %s attempt %d failed permanently: %s", spec.id, record.attempt, message
            )
            failure = ApplicationError(
                message, state, type=kind, non_retryable=True, category=BENIGN
            )
            raise handler_failure(failure, err, activity.client().data_converter) from err
        except Exception as err:  # a handler's SystemExit & co arrive as HandlerAborted
            failure = self._failed(attempt, err, number_in_round, spec)
            if failure.non_retryable:  # the round ends: its log goes to the workflow
                raise failure from err
            await fail_with_log(failure, state)  # the log goes to the next attempt
        attempt.close("succeeded")
        return RunJobResult(attempts=state.attempts, result=result)

    async def _handle(self, job: RunJobInput, ctx: JobContext, state: HeartbeatState) -> Any:
        """The handler's result, within the job's timeout and storable as JSON."""
        spec = job.spec
        fn = self.registry.get(spec.handler)
        if fn is None:
            raise UnknownHandlerError(
                f"unknown handler {spec.handler!r}; this worker has {self.registry.names()}"
            )
        try:
            async with asyncio.timeout(spec.timeout) as deadline:
                result = await self._run(fn, ctx, state, spec.lease)
        except TimeoutError as err:
            if not deadline.expired():  # the handler's own TimeoutError: an ordinary failure
                raise
            raise AttemptTimeout(f"handler ran past the {spec.timeout:g}s timeout") from err
        try:
            json.dumps(result)
        except (TypeError, ValueError) as err:  # retrying would not make it storable
            raise PermanentError(f"handler returned a value that is not JSON: {err}") from err
        return result

    def _failed(
        self, attempt: AttemptLog, err: Exception, number_in_round: int, spec: JobSpec
    ) -> ApplicationError:
        """Close the attempt as failed; the failure that retries it after its backoff (cut to
        size, no details), or that ends the round after its last attempt (non-retryable, the
        round's log in its details: written to history, never kept as a retry failure)."""
        last = number_in_round >= spec.max_attempts or server_gives_up(activity.info())
        delay = (
            None
            if last
            else retry_delay(
                number_in_round, spec.backoff_base, spec.backoff_max, spec.jitter, random.random()
            )
        )
        attempt.close("failed", err, delay)
        message, kind = error_fields(err)
        then = f"retry in {delay:.1f}s" if delay is not None else "no attempts left"
        log.warning(
            "job %s attempt %d failed: %s: %s; %s",
            spec.id,
            attempt.record.attempt,
            kind,
            message,
            then,
        )
        failure = ApplicationError(
            message,
            *([attempt.state] if last else []),
            type=kind,
            non_retryable=last,
            next_retry_delay=timedelta(seconds=delay) if delay is not None else None,
            category=BENIGN,
        )
        return handler_failure(failure, err, activity.client().data_converter)

    async def _run(self, fn: Any, ctx: JobContext, state: HeartbeatState, lease: float) -> Any:
        """Run the handler, heartbeating every third of the lease until it returns. It runs
        contained (see :mod:`activities.attempt_outcome`): nothing it raises reaches the loop."""
        if HandlerRegistry.is_async(fn):
            task: asyncio.Future[Any] = asyncio.ensure_future(contained_async(fn, ctx))
        else:
            loop = asyncio.get_running_loop()
            # The thread gets this attempt's context, so a handler's own trace spans nest
            # under the attempt's span.
            call = contextvars.copy_context().run
            task = loop.run_in_executor(self.executor, call, contained_sync, fn, ctx)
        label = f"{ctx.job_id} attempt {ctx.attempt}"
        self.running.add(label)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.beat_every(lease))
                if done:
                    return task.result()
                activity.heartbeat(state)
        except asyncio.CancelledError:
            ctx._cancelled.set()
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait({task}, timeout=CANCEL_GRACE_SECONDS)
            raise
        finally:
            self.running.discard(label)
