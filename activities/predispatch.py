"""Pre-dispatch: an attempt that reaches its worker before the job's run_at waits there.

A job reaches a worker up to its ``dispatch_lead`` (30 s) before run_at (each job at its own
moment, so a herd due in one second costs the server its work spread over half a minute). The
attempt then waits in the worker, heartbeating, until run_at by the server's clock
(:class:`activities.server_clock.ServerClock`: the start the server stamped, plus local time),
checks once that the job was not paused or cancelled meanwhile (:func:`still_wanted`, 3-9 s
before run_at, or half a wait longer than 30 s before it: :mod:`workflows.prestart_check`),
and starts the handler on time. An attempt lost while it was only waiting costs no attempt. One
that arrives within GO_CHECK_AHEAD of run_at (or after it) records nothing before its handler
(:func:`starts_at_once`), like a job due now (:func:`ready_at_once`).

An attempt that only waits sends no heartbeat when its lease covers the wait
(:func:`lease_covers`: the default 30 s lead in a 60 s lease), else beats at the SDK's own
cadence, as few beats as keep the SDK's clock of the lease going until just after run_at
(:func:`hold_heartbeating`; the slot wait that may follow beats HOLD_AFTER of the lease
after run_at): each beat's moment follows the attempt's own last beat, never run_at itself. A
cancel is caught by its check before run_at. Before that check it beats for the last
time well ahead of it (:func:`pre_check_quiet`), so that no beat of the log without the
attempt reaches the server after the start record. No handler starts until the
server has answered a health check sent at most FRESH_ANSWER before run_at (:func:`heard_by`,
asked a little ahead so the answer is usually in by run_at; one probe shared by the attempts
due together): its outcome could not be recorded otherwise.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Literal

from temporalio import activity
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client

from jobctl.activities.gc_pause import START_WINDOW
from jobctl.activities.server_clock import ServerClock
from jobctl.connection.client import check_serving
from jobctl.workflows.models import JOB_STATUS, HeartbeatState, JobStatus, RunJobResult
from jobctl.workflows.prestart_check import GO_CHECK_AHEAD, check_ahead

log = logging.getLogger("jobs.run_job")
# The SDK sends heartbeats at most every this fraction of the heartbeat timeout (the lease).
SDK_THROTTLE = 0.8
# When a pre-dispatched attempt checks that its job still wants to run: check_ahead. Pause
# refuses to act later than pause_cutoff before run_at (see JobWorkflow), so the check sees it.
GO_CHECK_TIMEOUT = 10.0
# The worker pings the server this often (ServerLiveness). A handler starts only once the
# server answered a health check sent at most FRESH_ANSWER before its run_at; one that waited
# longer than LIVENESS_WINDOW for it looks at the job again (the server may have moved on).
LIVENESS_PING = 0.25
LIVENESS_WINDOW = 1.0
FRESH_ANSWER = 0.1
# A waiting attempt's beats keep the SDK's clock of the lease going until this share of the
# lease after run_at; by then an attempt still waiting for a handler slot beats on its own.
HOLD_AFTER = 0.1

Verdict = Literal["withdrawn", "cancelled", "handed_over"]


def starts_at_once(started: datetime, run_at: datetime) -> bool:
    """Whether a pre-dispatched attempt that the server started at ``started`` skips the
    start record at its check: one started within GO_CHECK_AHEAD of run_at (or after it, a
    retry) starts as a job due now does. The next attempt tells the two kinds of loss apart
    by the same rule (``attempt_outcome.previous_attempts``): an unrecorded attempt started
    this late was lost in its handler and is spent; one started earlier was lost waiting."""
    return started >= run_at - timedelta(seconds=GO_CHECK_AHEAD)


def lease_covers(wait: float, lease: float) -> bool:
    """Whether an attempt's lease holds, without any heartbeat, through a wait of ``wait``
    seconds from the attempt's start: its start record (``start_record.record_start``, sent
    after the check before run_at) is its first beat, and that check may take
    GO_CHECK_TIMEOUT."""
    return wait + GO_CHECK_TIMEOUT <= lease * SDK_THROTTLE


async def sleep_heartbeating(
    seconds: float, state: HeartbeatState, lease: float | None, last_beat_ahead: float = 0.0
) -> float:
    """Wait, holding the lease at the SDK's default cadence (no handler runs: no cancel to
    hurry, and no heartbeat beyond what the lease needs), the last beat ``last_beat_ahead``
    seconds before the wait ends (0: at its end); ``lease`` None: the lease covers the whole
    wait (:func:`lease_covers`), so no heartbeat at all. Returns when the SDK last got a beat
    (monotonic; the wait's start if none): :func:`hold_heartbeating` counts from it.

    The beats are laid back from the last one, a throttle interval apart (the first sooner):
    the SDK holds a beat that follows its previous one within that interval until the interval
    ends, so a last beat placed after a shorter gap went out late (after the start record)."""
    now = last_sent = time.monotonic()
    if lease is None:
        await asyncio.sleep(max(seconds, 0.0))
        return last_sent
    end = now + seconds
    last_beat = end - last_beat_ahead
    every = lease * SDK_THROTTLE
    if last_beat > now:
        beat_at = last_beat - every * math.ceil((last_beat - now) / every - 1)
        while True:
            await asyncio.sleep(max(beat_at - time.monotonic(), 0.0))
            activity.heartbeat(state)
            last_sent = time.monotonic()
            if beat_at >= last_beat:
                break
            beat_at += every
    await asyncio.sleep(max(end - time.monotonic(), 0.0))
    return last_sent


def pre_check_quiet(lease: float) -> float:
    """How long before its check a waiting attempt beats for the last time (none at all
    when the stretch to the check is shorter): long enough that the beat, which the SDK sends
    in the background, is on record before the start record that follows the check, yet with
    the check's bound after it within the throttle's share of the lease (half that share when
    the lease is too short for the bound; the check usually takes milliseconds). A beat at
    the end of the stretch once reached the server after the record, leaving the log without
    the attempt: lost in its handler, it would have read as lost while waiting."""
    share = lease * SDK_THROTTLE
    return max(share - GO_CHECK_TIMEOUT, share / 2)


async def hold_heartbeating(
    seconds: float, state: HeartbeatState, lease: float | None, since: float
) -> None:
    """Wait ``seconds`` (until run_at) after the start record, beating through the SDK as
    few times as keep its clock of the lease (from ``since``, its last beat or the attempt's
    start) going until HOLD_AFTER of the lease past the wait: beats evenly spaced from
    ``since``, at most a throttle interval apart; none when ``lease`` is None (it covers the
    wait). A herd's beats so follow its attempts' own moments; beating at the end of each
    wait (as once) or in its last stretch, 5,000 attempts sent theirs together just as the
    handlers were due.

    The SDK keeps its own clock of the lease (the lease plus 5 s), reset only by the answers
    to its own beats, not by the start record we send ourselves: counted from the record, a
    5,000 herd's waits left 61-86 s between two SDK beats, and the SDK ended ~1,600 waiting
    attempts as timed out (``timed_out=True, not_found=True``) that the server still held."""
    now = time.monotonic()
    end = now + seconds
    if lease is not None:
        until = end + HOLD_AFTER * lease
        count = math.ceil((until - since) / (lease * SDK_THROTTLE)) - 1
        for n in range(1, count + 1):
            beat_at = since + (until - since) * n / (count + 1)
            await asyncio.sleep(max(beat_at - time.monotonic(), 0.0))
            activity.heartbeat(state)
    await asyncio.sleep(max(end - time.monotonic(), 0.0))


class ServerLiveness:
    """Whether the server answers: one cheap health check per worker per LIVENESS_PING,
    whatever the number of jobs, and on demand at a handler's start (:meth:`heard_since`).
    A dispatched job does not start its handler while the server is silent, since its outcome
    could not be recorded and the job would run again."""

    def __init__(self) -> None:
        self.last_ok = time.monotonic()  # when the last answered health check was sent
        self.task: asyncio.Task[None] | None = None
        self.client: Client | None = None
        self._probe: asyncio.Task[bool] | None = None
        self._probe_sent = 0.0

    def watch(self, client: Client) -> None:
        if self.task is None:
            self.client = client
            self.task = asyncio.create_task(self._ping(), name="server-liveness")

    async def _check(self) -> bool:
        """One health check; on a serving answer, ``last_ok`` becomes the moment it was sent
        (an answer of "not serving", a draining frontend's, counts as silence)."""
        assert self.client is not None, "watch() first"
        sent = time.monotonic()
        try:
            await asyncio.wait_for(check_serving(self.client), LIVENESS_PING * 4)
        except Exception:
            return False
        self.last_ok = max(self.last_ok, sent)
        return True

    async def _ping(self) -> None:
        while True:
            await self._check()
            await asyncio.sleep(LIVENESS_PING)

    def ask(self, moment: float) -> None:
        """Have a health check sent at or after ``moment`` (monotonic) on its way, unless
        one is answered or under way: the attempts due together share it."""
        if self.last_ok >= moment:
            return
        if self._probe is None or self._probe.done() or self._probe_sent < moment:
            self._probe_sent = time.monotonic()
            self._probe = asyncio.create_task(self._check())

    async def heard_since(self, moment: float) -> float:
        """Wait until the server has answered a health check sent at or after ``moment``
        (monotonic); the seconds waited. Attempts that ask together share one probe."""
        began = time.monotonic()
        while self.last_ok < moment:
            self.ask(moment)
            assert self._probe is not None
            if not await asyncio.shield(self._probe):
                await asyncio.sleep(0.1)  # silent or refused: ask again
        return time.monotonic() - began

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            self.task = None


async def wait_for_run_at(
    run_at: datetime,
    clock: ServerClock,
    state: HeartbeatState,
    lease: float,
    liveness: ServerLiveness,
    commit: Callable[[], Awaitable[None]],
    near: Callable[[], None],
) -> RunJobResult | None:
    """Wait (heartbeating) until run_at; a result instead if the job no longer wants to run.

    ``commit`` records the attempt's start (appending its record to ``state``) once the check
    before run_at has passed, or at once when the attempt arrived later than that check. A
    result returned after it leaves the record out: its handler never ran. ``near`` is called
    START_WINDOW before run_at (the attempt's start window opens: :mod:`activities.gc_pause`)."""
    # A wait the lease covers sends no heartbeat: the start record is the first.
    wait = (run_at - clock.started).total_seconds()
    beat = None if lease_covers(wait, lease) else lease
    committed = False
    beaten = time.monotonic()  # the SDK's clock of the lease starts at the hand-over

    def early(verdict: Verdict) -> RunJobResult:
        if committed:
            state.attempts.pop()
        return RunJobResult(attempts=state.attempts, **{verdict: True})

    try:
        ahead = check_ahead(wait, random.random())
        until_check = seconds_until(run_at, clock) - ahead
        if until_check > 0:  # no beat just before the check: it could follow the record
            beaten = await sleep_heartbeating(until_check, state, beat, pre_check_quiet(lease))
            verdict = await still_wanted()
            if verdict is not None:
                return early(verdict)
        committed = True  # the record joins the log before its round trip: a cancel during
        await commit()  # it must take it out again
        left = seconds_until(run_at, clock)
        opening = asyncio.get_running_loop().call_later(max(left - START_WINDOW, 0.0), near)
        hold = functools.partial(hold_heartbeating, state=state, lease=beat, since=beaten)
        try:
            waited = await heard_by(run_at, clock, liveness, hold)
        finally:
            opening.cancel()  # a window opened stays open until the attempt closes it
        if waited > LIVENESS_WINDOW:  # the server was silent: it may have moved on meanwhile
            log.warning(
                "job %s: server silent at run_at for %.1fs", activity.info().workflow_id, waited
            )
            verdict = await still_wanted()
            if verdict is not None:
                return early(verdict)
    except asyncio.CancelledError:
        verdict = cancel_verdict()
        if verdict is None:
            raise
        return early(verdict)
    return None


def cancel_verdict() -> Verdict | None:
    """Why the SDK cancelled this attempt before its handler: a person's cancel, or a clean
    shutdown handing it over; None when the attempt is over for another reason, logged by
    name (the SDK's own line names none)."""
    details = activity.cancellation_details()
    if details is not None and details.cancel_requested:
        return "cancelled"
    if details is not None and details.worker_shutdown:
        return "handed_over"
    log.warning(
        "job %s: attempt ended before its handler: %s",
        activity.info().workflow_id,
        ending_reason(details),
    )
    return None


def ending_reason(details: activity.ActivityCancellationDetails | None) -> str:
    """Why an attempt ended without a cancel or a shutdown, in words."""
    if details is None:
        return "cancelled from within the worker"
    if details.timed_out and details.not_found:
        # The SDK's own clock of the lease (the lease plus 5 s since its last answered beat).
        return "no answered heartbeat within the lease, by the SDK's own clock"
    if details.not_found:
        return "the server no longer holds it (timed out or retried there)"
    return f"the server ended it ({details})"


def seconds_until(run_at: datetime, clock: ServerClock) -> float:
    return (run_at - clock.now()).total_seconds()


async def ready_at_once(liveness: ServerLiveness, arrived: float) -> Verdict | None:
    """Whether an attempt that starts at once (not pre-dispatched) may run its handler: once
    the server has answered a health check sent at most FRESH_ANSWER before the attempt
    ``arrived`` (monotonic), and, if that took longer than LIVENESS_WINDOW, the job still
    wants this attempt (:func:`still_wanted`). A verdict instead when it does not.

    The check is free (no action, no heartbeat): such an attempt records nothing with the
    server before its handler, so a short handler costs its attempt alone, and one lost
    before its first heartbeat is counted by the next attempt
    (``attempt_outcome.previous_attempts``)."""
    try:
        waited = await liveness.heard_since(arrived - FRESH_ANSWER)
        if waited <= LIVENESS_WINDOW:
            return None
        log.warning("job %s: server silent at start for %.1fs", activity.info().workflow_id, waited)
        return await still_wanted()
    except asyncio.CancelledError:
        verdict = cancel_verdict()
        if verdict is None:
            raise
        return verdict


async def heard_by(
    run_at: datetime,
    clock: ServerClock,
    liveness: ServerLiveness,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> float:
    """Wait (by ``sleep``) until run_at and until the server has answered a health check sent
    at most FRESH_ANSWER before it (and at most that long ago); the seconds waited for the
    answer. The check is asked FRESH_ANSWER / 2 before run_at, so the answer is usually in by
    run_at, and an attempt due within that half of another's shares its probe."""
    now = time.monotonic()
    run_at_here = now + seconds_until(run_at, clock)
    # The clock is never ahead of the server's: this local moment is at or after run_at -
    # FRESH_ANSWER on the server.
    fresh_from = max(run_at_here, now) - FRESH_ANSWER
    # A callback, not a task per attempt: a herd's attempts wake once, at run_at, and find
    # the shared answer in.
    asking = asyncio.get_running_loop().call_later(
        max(fresh_from + FRESH_ANSWER / 2 - now, 0.0), liveness.ask, fresh_from
    )
    try:
        await sleep(max(run_at_here - time.monotonic(), 0.0))
        return await liveness.heard_since(fresh_from)
    finally:
        asking.cancel()


async def still_wanted() -> Verdict | None:
    """One look at the job before run_at: paused or cancelled meanwhile, or is this attempt
    no longer the current one? (Cancellation also arrives through heartbeats, but a waiting
    attempt beats only every 80% of the lease.) A cancel shows as this attempt's
    CANCEL_REQUESTED state; a pause as the job's PAUSED status. While the server cannot be
    reached the handler does not start: its outcome could not be recorded, and the server
    would run it again."""
    info = activity.info()
    assert info.workflow_id is not None
    handle = activity.client().get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
    delay = 0.5
    while True:
        try:
            desc = await asyncio.wait_for(handle.describe(), GO_CHECK_TIMEOUT)
            break
        except Exception as err:  # unreachable or overloaded: ask again
            log.warning("job %s: pre-start check failed (%s); retrying", info.workflow_id, err)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
    mine = [p for p in desc.raw_description.pending_activities if p.activity_id == info.activity_id]
    if not mine or mine[0].attempt != info.attempt:
        # The server moved on (it timed this attempt out while it could not hear from us):
        # another attempt runs the job; this one must not. Nothing it returns is recorded.
        return "handed_over"
    if mine[0].state == PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED:
        return "cancelled"
    if desc.typed_search_attributes.get(JOB_STATUS) == JobStatus.PAUSED:
        return "withdrawn"
    return None
