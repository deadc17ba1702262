"""The ``run_job`` activity: one attempt of a job's handler, holding the lease by heartbeat.

The heartbeat timeout is the lease. Heartbeats flow from the event loop while the handler runs
(a thread for sync handlers), so a busy handler keeps its lease and a dead worker loses it.
The round's attempt log travels in the heartbeat details, which Temporal hands to the next
attempt, so every attempt's start, end, worker and error survive worker crashes. An attempt
that waited for its run_at records its start with the server before the handler runs; one
that starts at once sends its record with its first heartbeat, START_RECORD_GRACE into the
handler, so a short handler costs no heartbeat, and one lost before that record is counted
by the next attempt. Whatever the handler raises stays in its attempt
(:mod:`activities.attempt_outcome`). A failed attempt's record reaches the
next attempt in the same request as its failure (no heartbeat of its own); the failure itself
carries no log and is cut to fit the server's limit (:mod:`activities.failure_size`), and
only the round's last failure, which is never kept as a retry failure, brings the round's log
to the workflow.

Pre-dispatch: a job reaches a worker up to its ``dispatch_lead`` (30 s) before run_at; the
attempt waits there until run_at by the server's clock, checks once (3-9 s ahead, or half its
wait ahead when it waits longer than 30 s) that the job still wants to run, records its start
then (unless it arrived within 3 s of run_at), and starts the handler on time
(:mod:`activities.predispatch`). From a second before run_at (or from arrival, for an attempt
that starts at once) until its handler starts, the worker collects only Python's youngest
garbage generation, so no long collection pass delays a herd's starts (:mod:`activities.gc_pause`).

Budget: Temporal's RetryPolicy allows the round's attempts plus a few in reserve, and this
activity counts the attempts that reached the handler, refusing to run past ``max_attempts``.
An attempt lost while it was only waiting (its worker died before its check) therefore costs
nothing; one lost after its start was recorded, or one that started at once, counts as spent.

Cancel latency: a cancel reaches the attempt in the answer to a heartbeat. While the handler
runs, the loop beats every ``min(lease / 3, cancel_latency)`` and the worker lets the SDK send
one every ``min(80% of the lease, cancel_latency)`` (``max_heartbeat_throttle_interval``), so a
cancel reaches the handler within :meth:`JobActivities.cancel_within` (10 s by default): 360
heartbeats per hour of handler run time. An attempt that only waits for its run_at beats no
more than its lease needs (:mod:`activities.predispatch`).

How an attempt ends (success, cancel, handover, lost, permanent or retried failure) is one
type per shape in :mod:`activities.attempt_endings`. Its report waits, at most REPORT_HOLD,
until no attempt waits for a handler slot: starts first (:mod:`activities.slot_gate`).

Metrics (:mod:`activities.metrics`): each attempt that reaches its handler counts as started
with its fire lag (handler start minus when the attempt was due, see :func:`due_at`), and as
succeeded or failed with its run time when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from temporalio import activity

from jobctl.activities import metrics
from jobctl.activities.attempt_endings import (
    Ending,
    PermanentFailure,
    Succeeded,
    attempts_exhausted,
)
from jobctl.activities.attempt_endings import cancelled as cancelled_ending
from jobctl.activities.attempt_endings import failed as failed_ending
from jobctl.activities.attempt_outcome import (
    AttemptLog,
    AttemptTimeout,
    UnknownHandlerError,
    contained_async,
    contained_sync,
    previous_attempts,
)
from jobctl.activities.context import HandlerRegistry, JobContext, PermanentError
from jobctl.activities.gc_pause import StartWindow
from jobctl.activities.predispatch import (
    GO_CHECK_TIMEOUT,
    HOLD_AFTER,
    SDK_THROTTLE,
    ServerLiveness,
    ready_at_once,
    starts_at_once,
    wait_for_run_at,
)
from jobctl.activities.server_clock import ServerClock, ServerTimeline
from jobctl.activities.slot_gate import SlotGate
from jobctl.activities.start_record import record_start
from jobctl.workflows import names
from jobctl.workflows.models import (
    AttemptRecord,
    HeartbeatState,
    JobSpec,
    RunJobInput,
    RunJobResult,
)

# Sync handlers that ignore ctx.cancelled get this long to notice before we give up on them.
CANCEL_GRACE_SECONDS = 5.0
# A handler of an attempt that started at once (not pre-dispatched) runs this long before its
# attempt's record reaches the server, in the first heartbeat: status shows that it runs (from
# Temporal's pending activity), the record adds its worker and the cancel promise.
START_RECORD_GRACE = 1.0
# The longest an attempt whose handler ended holds its report while others wait for a slot.
REPORT_HOLD = 1.0
# The most a cancel takes to reach a running handler, unless the worker says otherwise
# (JOBS_CANCEL_LATENCY, worker.py): the heartbeat cadence while a handler runs.
DEFAULT_CANCEL_LATENCY = 10.0


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


def job_context(
    spec: JobSpec, record: AttemptRecord, state: HeartbeatState, worker: str
) -> JobContext:
    """What the handler is told about this attempt; its progress goes to the next heartbeat."""
    ctx = JobContext(
        job_id=spec.id,
        name=spec.name,
        attempt=record.attempt,
        max_attempts=spec.max_attempts,
        scheduled_at=spec.run_at or record.started_at,
        idempotency_key=spec.key,
        payload=spec.payload,
        worker=worker,
    )
    ctx._report = lambda details: setattr(state, "progress", details)
    return ctx


class JobActivities:
    """Activities bound to a handler registry, the thread pool for sync handlers and the
    worker's handler slots (attempts waiting for their time do not hold a slot; those waiting
    for a slot get one by priority, fair share and arrival: :mod:`activities.slot_gate`)."""

    def __init__(
        self,
        registry: HandlerRegistry,
        executor: ThreadPoolExecutor,
        worker: str,
        max_concurrent_jobs: int,
        cancel_latency: float = DEFAULT_CANCEL_LATENCY,
        slots_per_key: int | None = None,
    ):
        self.registry = registry
        self.cancel_latency = cancel_latency
        self.executor = executor
        self.worker = worker
        # By priority, fair share, arrival; at most slots_per_key to one fairness key.
        self.slots = SlotGate(max_concurrent_jobs, slots_per_key)
        self.liveness = ServerLiveness()
        self.timeline = ServerTimeline()  # the server's time, by every attempt's start stamp
        self.running: set[str] = set()  # attempts in their handler, for the loop watchdog

    def cancel_within(self, lease: float) -> float:
        """The most a cancel takes to reach a running handler: how often its heartbeats reach
        the server (the worker's throttle is ``cancel_latency``, the SDK's 80% of the lease)."""
        return min(lease * SDK_THROTTLE, self.cancel_latency)

    def beat_every(self, lease: float) -> float:
        """How often the handler loop hands the SDK a heartbeat: at least as often as the
        throttle lets one through, so every one the throttle allows is sent."""
        return min(lease / 3, self.cancel_latency)

    @activity.defn(name=names.RUN_JOB)
    async def run_job(self, job: RunJobInput) -> RunJobResult:
        arrived = time.monotonic()
        info = activity.info()
        state = previous_attempts(info, job)
        spent = job.spent + sum(a.spent for a in state.attempts)
        if spent >= job.spec.max_attempts:  # the last attempt was lost mid-handler
            raise attempts_exhausted(state, job.spec.max_attempts)
        clock = ServerClock(info.started_time, self.timeline)
        self.liveness.watch(activity.client())
        window = StartWindow()  # older garbage generations wait for its handler (gc_pause)
        try:
            return await self._wait_and_attempt(job, state, spent, clock, window, arrived)
        finally:
            window.end()

    async def _wait_and_attempt(
        self,
        job: RunJobInput,
        state: HeartbeatState,
        spent: int,
        clock: ServerClock,
        window: StartWindow,
        arrived: float,
    ) -> RunJobResult:
        """The attempt once its budget is checked: at once, or at run_at if pre-dispatched."""
        info = activity.info()
        if job.not_before is None:  # nothing is recorded before its handler (ready_at_once)
            window.begin()
            verdict = await ready_at_once(self.liveness, arrived)
            if verdict is not None:
                return RunJobResult(attempts=state.attempts, **{verdict: True})
            return await self._attempt(
                job, state, None, spent + 1, clock, due_at(info, job), window
            )
        # Pre-dispatched: the start is recorded at the check before run_at (predispatch),
        # unless the attempt began after that check's earliest moment (starts_at_once).
        not_before = job.not_before
        at_once = starts_at_once(info.started_time, not_before)
        opened: AttemptLog | None = None

        async def commit() -> None:
            nonlocal opened
            opened = self._open(job, state, not_before)
            if not at_once:
                await self._record_start(job, state)

        early = await wait_for_run_at(
            not_before, clock, state, job.spec.lease, self.liveness, commit, window.begin
        )
        if early is not None:
            return early
        return await self._attempt(job, state, opened, spent + 1, clock, due_at(info, job), window)

    def _open(self, job: RunJobInput, state: HeartbeatState, started_at: datetime) -> AttemptLog:
        """This attempt's record in the round's log, running from ``started_at``."""
        record = AttemptRecord(
            attempt=job.attempt_offset + len(state.attempts) + 1,
            round=job.round,
            started_at=started_at,
            worker=self.worker,
        )
        state.cancel_within = self.cancel_within(job.spec.lease)
        return AttemptLog(state, record, job.spec.handler)

    async def _record_start(self, job: RunJobInput, state: HeartbeatState) -> None:
        await record_start(state, min(job.spec.lease / 3, GO_CHECK_TIMEOUT), job.spec.lease)

    async def _attempt(
        self,
        job: RunJobInput,
        state: HeartbeatState,
        opened: AttemptLog | None,
        number_in_round: int,
        clock: ServerClock,
        due: datetime,
        window: StartWindow,
    ) -> RunJobResult:
        """Run the handler once, recording the attempt (in the job's log and the metrics);
        ``opened``: its record, opened at the check before run_at (None: open it now). The
        server hears of a record not sent at that check with the first heartbeat, a second
        into the handler, or with the attempt's end. ``window`` closes as the handler starts."""
        spec = job.spec
        attempt = opened or self._open(job, state, clock.now())
        ending: Ending
        try:
            async with self.slots.slot(
                spec.priority,
                spec.fairness_key,
                spec.fairness_weight,
                beat=lambda: activity.heartbeat(state),
                every=spec.lease * SDK_THROTTLE / 2,
                # A waiting attempt's beats held the SDK's clock only until just after run_at.
                first=None if opened is None else spec.lease * HOLD_AFTER,
            ):
                window.end()
                attempt.restart(clock.now())
                metrics.record_start(spec.handler, attempt.record.started_at - due)
                ctx = job_context(spec, attempt.record, state, self.worker)
                ending = Succeeded(await self._handle(job, ctx, state))
        except asyncio.CancelledError as err:
            ending = cancelled_ending(err)
        except PermanentError as err:
            ending = PermanentFailure(err)
        except Exception as err:  # a handler's SystemExit & co arrive as HandlerAborted
            ending = failed_ending(err, number_in_round, spec)
        await self._after_queued_starts()
        return await ending.settle(attempt, spec)

    async def _after_queued_starts(self) -> None:
        """Let the attempts queued for a slot start before this one reports (SlotGate, starts
        first), for at most REPORT_HOLD. A cancel meanwhile changes nothing: the handler has
        ended, and its ending is what the server must hear."""
        try:
            await self.slots.no_one_waiting(REPORT_HOLD)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()

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
            # The first beat is the start record of an attempt that started at once: a
            # handler done within START_RECORD_GRACE costs no heartbeat at all.
            every = min(START_RECORD_GRACE, self.beat_every(lease))
            while True:
                done, _ = await asyncio.wait({task}, timeout=every)
                if done:
                    return task.result()
                activity.heartbeat(state)
                every = self.beat_every(lease)
        except asyncio.CancelledError:
            ctx._cancelled.set()
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait({task}, timeout=CANCEL_GRACE_SECONDS)
            raise
        finally:
            self.running.discard(label)
