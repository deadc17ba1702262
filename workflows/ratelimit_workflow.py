"""``RateLimitWorkflow``: the rate limiter of one rate key (id ``ratelimit/<key>``).

At most ``rate`` rounds of the key's jobs start per period, with ``burst`` at once after an
idle spell, whatever the number of workers. A job asks at its run_at (signal ``acquire``);
the limiter answers with a reservation, ``start_at``, the earliest moment the rate allows
(the generic cell rate algorithm: see :mod:`workflows.models.ratelimit`), and the job waits
until then itself. So one workflow task answers every request that arrived together, the
limiter sets no timer per grant, and it does not wait for its grants' delivery before the
next pass (a slow delivery would slow the pace).

- It reserves at most RESERVE_AHEAD ahead; the other requests wait in (priority, arrival)
  order, so a more urgent job that arrives later overtakes every one not yet reserved. Once
  less than REFILL_AT is left reserved, one timer wakes it to reserve the next stretch.
- A request withdrawn before its grant (signal ``release``: the job paused or was cancelled)
  leaves the queue; a reservation handed out is spent whatever the job then does.
- The first job of a key starts the limiter (as an abandoned child); it ends after IDLE_END
  without a start, and continues as new with its state beyond its event budget (10,000
  events), so the pace holds across worker and server restarts and across runs.

Every message is checked (:mod:`workflows.inbox`): an invalid one is counted and dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import TypeAdapter
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    import jobctl.workflows.inbox as inbox
    from jobctl.workflows import names
    from jobctl.workflows.models.concurrency import PermitRelease
    from jobctl.workflows.models.ratelimit import (
        MAX_WAITERS,
        REFILL_AT,
        RESERVE_AHEAD,
        RateGrant,
        RateRequest,
        RateState,
        Waiter,
        count_start,
        reserve,
    )
    from jobctl.workflows.rates import describe, parse_rate
    from jobctl.workflows.textclip import ellipsize

IDLE_END = timedelta(minutes=10)

START_ARG: TypeAdapter[RateState] = TypeAdapter(RateState)
REQUEST_ARG: TypeAdapter[RateRequest] = TypeAdapter(RateRequest)
RELEASE_ARG: TypeAdapter[PermitRelease] = TypeAdapter(PermitRelease)


def check_start(state: RateState) -> None:
    """A start input must name its own key in every request."""
    for waiter in state.waiters:
        if waiter.request.key != state.key:
            raise ValueError(f"a request for key {waiter.request.key!r} in {state.key!r}")


def _order(waiter: Waiter) -> tuple[int, int]:
    return waiter.request.priority, waiter.seq


@workflow.defn(name=names.RATE_WORKFLOW)
class RateLimitWorkflow:
    @workflow.init
    def __init__(self, *args: Any) -> None:
        """Started with a RateState (the first request among its waiters)."""
        self.state = inbox.start_arg(args, START_ARG, check_start)
        self.changes = 0  # bumped by every accepted message and every wake
        self.idle_due = False
        self.quiet_since = workflow.now()  # the latest message or start handed out
        self.sending: set[asyncio.Task[None]] = set()  # grant signals on their way
        self.edits = 0  # bumped by every change to the queue (see _head_start)
        self.head_memo: tuple[tuple[int, datetime | None], datetime | None] | None = None
        # (holder, run_id) -> ticket of each waiter: a burst of asks costs no scan each.
        self.spacings: dict[str, float] = {}  # seconds between starts, per rate text
        self.asked = {
            (w.request.holder, w.request.run_id): w.request.ticket for w in self.state.waiters
        }

    @workflow.run
    async def run(self, *args: Any) -> RateState:
        state = self.state
        clocks = [asyncio.create_task(self._refill_clock()), asyncio.create_task(self._idle())]
        while True:
            seen = self.changes
            await self._grant()
            if self._history_full():
                await workflow.wait_condition(self._settled)
                workflow.continue_as_new(state)
            if self.idle_due:
                self.idle_due = False
                if not state.waiters and workflow.now() - self.quiet_since >= IDLE_END:
                    await workflow.wait_condition(self._settled)
                    for clock in clocks:
                        clock.cancel()
                    return state
            await workflow.wait_condition(self._changed_since(seen))

    def _spacing(self, request: RateRequest) -> float:
        rate = self.spacings.get(request.rate)
        if rate is None:
            rate = self.spacings[request.rate] = parse_rate(request.rate).spacing
        return rate

    def _grantable_at(self, request: RateRequest) -> datetime:
        """When the loop could reserve ``request`` a start, by the state alone: not before
        RESERVE_AHEAD ahead of its not_before, and once the rate allows, REFILL_AT ahead (so
        each wake reserves a stretch of starts, not one)."""
        tat = self.state.tat
        by_rate = (
            tat - timedelta(seconds=self._spacing(request) * (request.burst - 1)) - REFILL_AT
            if tat is not None
            else None
        )
        by_time = request.not_before - RESERVE_AHEAD if request.not_before else None
        moments = [m for m in (by_rate, by_time) if m is not None]
        return max(moments) if moments else datetime.min.replace(tzinfo=UTC)

    def _head_start(self) -> datetime | None:
        """The earliest moment a waiter can be reserved a start (None: nobody waits).
        Computed once per change of the queue or the schedule: the clock's wait evaluates it
        at every step of every task, and a queue may hold thousands."""
        key = (self.edits, self.state.tat)
        if self.head_memo is None or self.head_memo[0] != key:
            waiters = self.state.waiters
            head = min((self._grantable_at(w.request) for w in waiters), default=None)
            self.head_memo = (key, head)
        return self.head_memo[1]

    async def _refill_clock(self) -> None:
        """One timer until the next waiter can be reserved a start. The moment depends on
        the state only, so requests arriving meanwhile start no new timer; after the loop's
        pass no waiter is grantable before it."""
        while True:
            head = self._head_start()
            now = workflow.now()
            changed = self._head_changed(head)
            if head is None or head <= now:
                await workflow.wait_condition(changed)  # nobody waits, or the loop grants it
                continue
            try:
                await workflow.wait_condition(
                    changed, timeout=head - now, timeout_summary="reserve more starts"
                )
            except TimeoutError:
                self.changes += 1

    def _head_changed(self, head: datetime | None) -> Callable[[], bool]:
        return lambda: self._head_start() != head

    async def _idle(self) -> None:
        """Every IDLE_END, let the loop check whether the key went quiet (one timer per
        IDLE_END, whatever the traffic)."""
        while True:
            await workflow.sleep(IDLE_END, summary="end if idle")
            self.idle_due = True
            self.changes += 1

    def _changed_since(self, seen: int) -> Callable[[], bool]:
        return lambda: self.changes != seen or self._history_full()

    def _history_full(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() > self.state.event_budget
        )

    async def _grant(self) -> None:
        """Reserve starts, by (priority, arrival), for every waiter whose start falls within
        RESERVE_AHEAD from now; tell them at once (one task, one signal each)."""
        state, now = self.state, workflow.now()
        horizon = now + RESERVE_AHEAD
        state.waiters.sort(key=_order)
        granted: list[tuple[RateRequest, RateGrant]] = []
        kept: list[Waiter] = []
        for waiter in state.waiters:
            request = waiter.request
            if request.not_before is not None and request.not_before > horizon:
                kept.append(waiter)  # not due yet (the cheap test: a herd asks early)
                continue
            earliest = max(now, request.not_before or now)
            start, tat = reserve(state.tat, earliest, self._spacing(request), request.burst)
            if start > horizon:
                kept.append(waiter)
                continue
            self.asked.pop((request.holder, request.run_id), None)
            state.tat, state.rate, state.burst = tat, request.rate, request.burst
            state.last_start = max(start, state.last_start or start)
            state.granted += 1
            count_start(state, start)
            grant = RateGrant(key=state.key, ticket=request.ticket, start_at=start)
            granted.append((request, grant))
        if len(kept) != len(state.waiters):
            self.edits += 1
        state.waiters = kept
        if granted:
            self.quiet_since = max(now, state.last_start or now)
        for request, grant in granted:  # not awaited here: the next pass need not wait
            task = asyncio.create_task(self._send(request, grant))
            self.sending.add(task)
            task.add_done_callback(self.sending.discard)
        self._show()

    async def _send(self, request: RateRequest, grant: RateGrant) -> None:
        """One grant signal; a job gone meanwhile loses its start (counted)."""
        handle = workflow.get_external_workflow_handle(request.holder, run_id=request.run_id)
        try:
            await handle.signal(names.SIGNAL_RATE_GRANTED, grant)
        except FailureError as err:
            workflow.logger.info("start of %s lost: %s", request.holder, err)
            self.state.lost += 1

    def _settled(self) -> bool:
        """No handler running and every grant signal delivered (or failed)."""
        return not self.sending and workflow.all_handlers_finished()

    @workflow.signal(name=names.SIGNAL_ACQUIRE)
    def acquire(self, *args: Any) -> None:
        """A job asks for a start (again, if it has waited long: then nothing changes)."""
        try:
            request = inbox.signal_arg(args, REQUEST_ARG, names.SIGNAL_ACQUIRE)
            if request.key != self.state.key:
                raise inbox.Invalid(f"acquire: key {inbox.quote(request.key)} is not this one")
        except inbox.Invalid as err:
            self._reject(str(err))
            return
        state, run = self.state, (request.holder, request.run_id)
        asked = self.asked.get(run)
        if asked == request.ticket:
            return  # asked again after a long wait: it keeps its place
        if asked is not None:  # a new round of the same run replaces what it asked before
            self._drop(request.holder, request.run_id)
        if len(state.waiters) >= MAX_WAITERS:
            self._reject(f"acquire: {MAX_WAITERS} requests already wait; asked again later")
            return
        now = workflow.now()
        state.waiters.append(Waiter(request=request, seq=state.next_seq, arrived_at=now))
        self.edits += 1
        self.asked[run] = request.ticket
        state.next_seq += 1
        self.quiet_since = max(self.quiet_since, now)
        self.changes += 1

    @workflow.signal(name=names.SIGNAL_RELEASE_PERMIT)
    def release(self, *args: Any) -> None:
        """A waiting job stopped waiting (paused, cancelled): its request goes."""
        try:
            release = inbox.signal_arg(args, RELEASE_ARG, names.SIGNAL_RELEASE_PERMIT)
        except inbox.Invalid as err:
            self._reject(str(err))
            return
        if self.asked.get((release.holder, release.run_id)) == release.ticket:
            self._drop(release.holder, release.run_id)
            self.changes += 1

    def _drop(self, holder: str, run_id: str) -> None:
        self.edits += 1
        self.asked.pop((holder, run_id), None)
        self.state.waiters = [
            w
            for w in self.state.waiters
            if (w.request.holder, w.request.run_id) != (holder, run_id)
        ]

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        self._reject(inbox.unknown_signal(name))

    def _reject(self, reason: str) -> None:
        """A dropped message: counted, kept (the latest) and shown in the Web UI."""
        state = self.state
        if state.rejected == 0:
            workflow.logger.warning("rate limit %s: %s", state.key, reason)
        state.rejected += 1
        state.last_rejection = ellipsize(reason, inbox.MAX_REASON)
        self._show()

    def _show(self) -> None:
        state = self.state
        rate = describe(state.rate, state.burst) if state.rate else "no start yet"
        details = (
            f"key {ellipsize(state.key, 60)}: {rate}; {len(state.waiters)} waiting;"
            f" {state.granted} started"
        )
        if state.last_start is not None:
            details += (
                f", latest start reserved {state.last_start.isoformat(timespec='milliseconds')}"
            )
        if state.rejected:
            details += f"; {state.rejected} invalid message(s) dropped, latest: "
            details += ellipsize(state.last_rejection or "", 120)
        workflow.set_current_details(details)

    @workflow.query(name=names.QUERY_RESERVATIONS)
    def reservations(self) -> RateState:
        return self.state
