"""How a ``CronJobWorkflow`` run waits: for a slot's start or fire time (one timer per slot,
kept across wake-ups), for a control, or for what a slot's end changes; and when a wait is
over (a control, a rotation, a buffered slot, a slot that may start ahead, a backfill).

Waits that need no timer: with no slot running, a
slot's job starts up to 10 s before the slot's time (:func:`workflows.cron_rules.start_ahead`),
and under ``skip`` / ``buffer_one`` a slot that comes due while another runs is decided when
that one ends. Workflow code."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import datetime

from temporalio import workflow

from jobctl.workflows.cron_core import CronCore
from jobctl.workflows.cron_rules import FORCED_ROTATION, start_ahead
from jobctl.workflows.uitext import clip


class CronWaits(CronCore):
    def _start_at(self, fire_at: datetime) -> datetime:
        """When a slot's job may start if no other slot runs (see cron_rules.start_ahead)."""
        return fire_at - start_ahead(self.spec)

    def _ahead_ready(self) -> bool:
        """The planned slot's job may start now: its start time has come, no slot runs and
        the cron is not paused (the run loop's own conditions, so a wait it ends ends in a
        start)."""
        return (
            self.planned is not None
            and not self.state.paused
            and not self.state.running
            and workflow.now() >= self._start_at(self.planned[1])
        )

    def _lazy_overlap(self) -> bool:
        """``skip`` and ``buffer_one`` decide a slot that comes due while another runs when
        that one ends (free: its completion), exactly as at the slot's time (a timer), so a
        running slot costs no timer; ``allow_all`` and ``cancel_other`` act at the slot's
        time."""
        return self.spec.overlap in ("skip", "buffer_one")

    def _overlapped(self, fire_at: datetime, slot: datetime) -> bool:
        """After a wait for the running slot's end: the slots due before that end get the
        overlap policy's outcome, as if decided at their time. True if ``slot`` was one."""
        waited, self.overlap_wait = self.overlap_wait, False
        ended = self.slot_end
        if not waited or self.state.running or ended is None or fire_at > ended:
            return False
        self._decide_overlapped(ended)
        return True

    def _decide_overlapped_now(self) -> None:
        """Before a control changes what comes next (pause, update, cancel): the slots due so
        far during the running slot get their outcome now, as they would have at their time."""
        if self.overlap_wait and self.state.running:
            self._decide_overlapped(workflow.now())

    def _decide_overlapped(self, until: datetime) -> None:
        """Record the slots due up to ``until`` while a slot ran (the first may be buffered)."""
        assert self.state.last_slot is not None
        slot = self._next_slot(self.state.last_slot)
        if slot is None or slot > until:
            return
        self.state.last_slot = slot
        detail = "a slot was still running"
        if self.spec.overlap == "buffer_one" and self.state.buffered is None:
            self.state.buffered = slot
            self._record(slot, "buffered", detail="runs when the running slot finishes")
            detail = "one slot is already buffered"
        else:
            self._record(slot, "skipped", detail=detail)
        self._skip_backlog(until, "skipped", detail)

    async def _wait_for_slot(self, fire_at: datetime, label: str) -> None:
        """Wait for the slot's fire time or a change. The slot's timer outlives a wake-up (a
        control, a buffered slot starting): one timer per slot, not one per wait."""
        self._show()
        # A fired timer with its slot still ahead (a rounding of the server's clock) is
        # replaced, never waited on again.
        if self.slot_timer is None or self.slot_timer[0] != fire_at or self.slot_timer[1].done():
            self._drop_slot_timer()
            sleep = workflow.sleep(fire_at - workflow.now(), summary=clip(label) or None)
            self.slot_timer = (fire_at, asyncio.ensure_future(sleep))
        timer = self.slot_timer[1]
        changed = self._changed_since(self.controls_seen)
        await workflow.wait_condition(lambda: timer.done() or changed())

    def _drop_slot_timer(self) -> None:
        if self.slot_timer is not None:
            self.slot_timer[1].cancel()
            self.slot_timer = None

    async def _wait_for_control(self, until: datetime | None, label: str) -> None:
        self._show()
        seen = self.controls_seen
        timeout = (until - workflow.now()) if until is not None else None
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                self._changed_since(seen), timeout=timeout, timeout_summary=clip(label) or None
            )

    def _changed_since(self, seen: int) -> Callable[[], bool]:
        return lambda: (
            self.controls_seen != seen
            or (self._time_to_rotate() and (not self.tracked or self._must_rotate()))
            or (self.state.buffered is not None and not self.state.running)
            or self._ahead_ready()
            or (self.overlap_wait and not self.state.running and not self.state.paused)
            or self._wake()
        )

    def _must_rotate(self) -> bool:
        """Waited long enough for tracked children: rotate without them."""
        length = workflow.info().get_current_history_length()
        return length > FORCED_ROTATION * self.event_budget

    def _time_to_rotate(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() > self.event_budget
        )

    def _wake(self) -> bool:
        """Beyond controls: a backfill that may go on, or an over schedule gone idle."""
        idle = self.over and not self.state.running and not self.state.paused
        return idle or self._backfill_ready()

    def _backfill_ready(self) -> bool:
        """A queued backfill may start slots now (not while paused or about to rotate;
        ``buffer_all`` only when no slot of the cron is running)."""
        if not self.state.backfills or self.state.paused or self._time_to_rotate():
            return False
        return self.state.backfills[0].overlap == "allow_all" or not self.state.running
