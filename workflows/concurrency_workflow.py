"""``ConcurrencyLimitWorkflow``: the semaphore of one concurrency key (id ``concurrency/<key>``).

At most ``limit`` jobs with the key hold a permit at once, whatever the number of workers. A job
holds its permit for a whole round (from run_at until the round ends done, exhausted, withdrawn
or cancelled): Temporal retries the attempts of a round inside one activity, so the job cannot
give the permit back between attempts, and need not. A worker killed mid-attempt therefore frees
nothing: the round's next attempt (after the lease) runs under the same permit, so never more
than ``limit`` handlers of the key run at once.

- Waiters are served by (priority, arrival). A request whose ``limit`` is lower than the number
  of holders waits (at the head) until enough permits come back: each job's own limit holds.
- A holder that ends without releasing (terminated, reset away) is found by checking: while
  requests wait, the semaphore sends a holder its grant again 1, 2, 4, 8, 10, 10, ...
  ``probe_every`` intervals into its hold (a few signals per long hold, not one per interval);
  a signal to a workflow that no longer runs fails, and the permit is taken back.
- The first job of a key starts the semaphore (as an abandoned child); an idle semaphore ends
  after IDLE_END; beyond EVENT_BUDGET events it continues as new with its state.

Every message is checked (:mod:`workflows.inbox`): an invalid one is counted and dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Literal

from pydantic import TypeAdapter
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    import jobctl.workflows.inbox as inbox
    from jobctl.workflows import names
    from jobctl.workflows.models.concurrency import (
        MAX_WAITERS,
        Permit,
        PermitGrant,
        PermitRelease,
        PermitRequest,
        SemaphoreState,
        probe_due,
    )
    from jobctl.workflows.textclip import ellipsize

Mode = Literal["idle", "busy", "waiting"]  # nothing asked | no request blocked | one blocked
IDLE_END = timedelta(minutes=10)
EVENT_BUDGET = 10_000

START_ARG: TypeAdapter[SemaphoreState] = TypeAdapter(SemaphoreState)
REQUEST_ARG: TypeAdapter[PermitRequest] = TypeAdapter(PermitRequest)
RELEASE_ARG: TypeAdapter[PermitRelease] = TypeAdapter(PermitRelease)


def check_start(state: SemaphoreState) -> None:
    """A start input must name its own key in every request."""
    for permit in (*state.holders, *state.waiters):
        if permit.request.key != state.key:
            raise ValueError(f"a request for key {permit.request.key!r} in {state.key!r}")


def _order(permit: Permit) -> tuple[int, int]:
    return permit.request.priority, permit.seq


def _same_run(permit: Permit, holder: str, run_id: str) -> bool:
    return permit.request.holder == holder and permit.request.run_id == run_id


@workflow.defn(name=names.CONCURRENCY_WORKFLOW)
class ConcurrencyLimitWorkflow:
    @workflow.init
    def __init__(self, *args: Any) -> None:
        """Started with a SemaphoreState (the first request among its waiters)."""
        self.state = inbox.start_arg(args, START_ARG, check_start)
        self.changes = 0  # bumped by every accepted message
        self.regrant: set[str] = set()  # tickets of holders that asked again
        self.due: Mode | None = None  # what the clock woke the loop for

    @workflow.run
    async def run(self, *args: Any) -> SemaphoreState:
        state = self.state
        clock = asyncio.create_task(self._clock())  # ends with the run
        while True:
            seen = self.changes  # what changes while granting (a reclaim too) is seen below
            await self._grant()
            if self._history_full():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(state)
            due, self.due = self.due, None
            if due == "idle" and self._mode() == "idle":
                await workflow.wait_condition(workflow.all_handlers_finished)
                clock.cancel()
                return state
            if due == "waiting" and state.waiters:
                await self._probe()
                continue
            await workflow.wait_condition(self._changed_since(seen))

    def _mode(self) -> Mode:
        """``waiting``: a request waits for a permit to come back (one that can be granted now
        is the loop's next step, not a wait)."""
        state = self.state
        if state.waiters and len(state.holders) >= min(state.waiters, key=_order).request.limit:
            return "waiting"
        return "busy" if state.holders or state.waiters else "idle"

    async def _clock(self) -> None:
        """Wake the loop every probe_every while requests wait (to check the holders), and
        after IDLE_END without any request or holder (to end). One timer per interval or
        change of mode, never one per message."""
        while True:
            mode = self._mode()
            left = self._mode_left(mode)
            if mode == "busy":
                await workflow.wait_condition(left)
                continue
            interval = IDLE_END if mode == "idle" else timedelta(seconds=self.state.probe_every)
            label = "end if still idle" if mode == "idle" else "check that the holders run"
            try:
                await workflow.wait_condition(left, timeout=interval, timeout_summary=label)
            except TimeoutError:
                self.due = mode
                self.changes += 1

    def _mode_left(self, mode: Mode) -> Callable[[], bool]:
        return lambda: self._mode() != mode

    def _changed_since(self, seen: int) -> Callable[[], bool]:
        return lambda: self.changes != seen or self._history_full()

    def _history_full(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested() or info.get_current_history_length() > EVENT_BUDGET
        )

    async def _grant(self) -> None:
        """Grant permits to the head waiters while their limits allow; tell them (and the
        holders that asked again) at once; a holder that cannot be told is gone."""
        state = self.state
        told = [p for p in state.holders if p.request.ticket in self.regrant]
        self.regrant.clear()
        state.waiters.sort(key=_order)
        while state.waiters and len(state.holders) < state.waiters[0].request.limit:
            permit = state.waiters.pop(0)
            permit.granted_at = workflow.now()
            state.holders.append(permit)
            state.granted += 1
            told.append(permit)
        await self._tell(told)
        self._show()

    async def _probe(self) -> None:
        """Send the holders due for a check their grant again: the ones no longer running
        are dropped (see probe_due: 1, 2, 4, ... intervals into a hold)."""
        state, now = self.state, workflow.now()
        due = [p for p in state.holders if probe_due(p, now, state.probe_every)]
        for permit in due:
            permit.checks += 1
        await self._tell(due)
        self._show()

    async def _tell(self, permits: list[Permit]) -> None:
        if not permits:
            return
        sent = [self._send_grant(permit) for permit in permits]
        delivered = await asyncio.gather(*sent)
        gone = {p.request.ticket for p, ok in zip(permits, delivered, strict=True) if not ok}
        if gone:
            before = len(self.state.holders)
            self.state.holders = [p for p in self.state.holders if p.request.ticket not in gone]
            self.state.reclaimed += before - len(self.state.holders)
            self.changes += 1  # granted again in the next pass of the loop

    async def _send_grant(self, permit: Permit) -> bool:
        request = permit.request
        handle = workflow.get_external_workflow_handle(request.holder, run_id=request.run_id)
        try:
            await handle.signal(
                names.SIGNAL_PERMIT_GRANTED, PermitGrant(key=request.key, ticket=request.ticket)
            )
        except FailureError as err:
            workflow.logger.info("permit of %s reclaimed: %s", request.holder, err)
            return False
        return True

    @workflow.signal(name=names.SIGNAL_ACQUIRE)
    def acquire(self, *args: Any) -> None:
        """A job asks for a permit (again, if it has waited long: then nothing changes, or a
        holder is told again)."""
        try:
            request = inbox.signal_arg(args, REQUEST_ARG, names.SIGNAL_ACQUIRE)
            if request.key != self.state.key:
                raise inbox.Invalid(f"acquire: key {inbox.quote(request.key)} is not this one")
        except inbox.Invalid as err:
            self._reject(str(err))
            return
        state = self.state
        for permit in state.holders:
            if permit.request == request:
                self.regrant.add(request.ticket)
                self.changes += 1
                return
        if any(permit.request == request for permit in state.waiters):
            return
        # A new round of the same run replaces what that run asked before.
        self._drop(request.holder, request.run_id)
        if len(state.waiters) >= MAX_WAITERS:
            self._reject(f"acquire: {MAX_WAITERS} requests already wait; asked again later")
            return
        now = workflow.now()
        state.waiters.append(Permit(request=request, seq=state.next_seq, arrived_at=now))
        state.next_seq += 1
        self.changes += 1

    @workflow.signal(name=names.SIGNAL_RELEASE_PERMIT)
    def release(self, *args: Any) -> None:
        """A job's round ended (or stopped waiting): its permit or request goes."""
        try:
            release = inbox.signal_arg(args, RELEASE_ARG, names.SIGNAL_RELEASE_PERMIT)
        except inbox.Invalid as err:
            self._reject(str(err))
            return
        state = self.state
        found = [
            p
            for p in (*state.holders, *state.waiters)
            if _same_run(p, release.holder, release.run_id) and p.request.ticket == release.ticket
        ]
        if not found:
            return  # already taken back from a holder found gone, or released twice
        self._drop(release.holder, release.run_id)
        self.changes += 1

    def _drop(self, holder: str, run_id: str) -> None:
        state = self.state
        state.holders = [p for p in state.holders if not _same_run(p, holder, run_id)]
        state.waiters = [p for p in state.waiters if not _same_run(p, holder, run_id)]

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        self._reject(inbox.unknown_signal(name))

    def _reject(self, reason: str) -> None:
        """A dropped message: counted, kept (the latest) and shown in the Web UI."""
        state = self.state
        if state.rejected == 0:
            workflow.logger.warning("concurrency %s: %s", state.key, reason)
        state.rejected += 1
        state.last_rejection = ellipsize(reason, inbox.MAX_REASON)
        self._show()

    def _show(self) -> None:
        state = self.state
        limit = state.holders[0].request.limit if state.holders else None
        details = (
            f"key {ellipsize(state.key, 60)}: {len(state.holders)} running"
            + (f" (limit {limit})" if limit is not None else "")
            + f", {len(state.waiters)} waiting; {state.granted} granted,"
            f" {state.reclaimed} reclaimed"
        )
        if state.rejected:
            details += f"; {state.rejected} invalid message(s) dropped, latest: "
            details += ellipsize(state.last_rejection or "", 120)
        workflow.set_current_details(details)

    @workflow.query(name=names.QUERY_PERMITS)
    def permits(self) -> SemaphoreState:
        return self.state
