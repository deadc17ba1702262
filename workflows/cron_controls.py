"""What ``CronJobWorkflow`` answers from outside: the ``status`` query, the ``pause`` /
``resume`` / ``trigger`` / ``update`` updates (with their validators), and the
``cancel_requested`` and ``slot_finished`` signals. Every message is checked by
:mod:`workflows.inbox`; an invalid signal is recorded as rejected, never fails the workflow.
Workflow code."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

import jobctl.workflows.cronmath as cronmath
import jobctl.workflows.inbox as inbox
from jobctl.workflows import names
from jobctl.workflows.cron_rules import (
    MAX_QUEUED_BACKFILLS,
    BackfillTooLarge,
    backfill_slots,
    backfill_start,
    cron_memo,
)
from jobctl.workflows.cron_waits import CronWaits
from jobctl.workflows.models import ControlRequest, CronReport, CronUpdate, PauseRequest
from jobctl.workflows.models.cron import (
    Backfill,
    BackfillAnswer,
    BackfillOverlap,
    BackfillRequest,
)


class CronControls(CronWaits):
    @workflow.query(name=names.QUERY_STATUS)
    def status(self) -> CronReport:
        return self.report()

    @workflow.update(name=names.UPDATE_PAUSE)
    async def pause(self, request: PauseRequest) -> CronReport:
        self._decide_overlapped_now()
        self.state.paused_until = request.until
        self._set_paused(True)
        self._audit(
            "pause", request, f"until {self._when(request.until)}" if request.until else None
        )
        return self.report()

    @pause.validator
    def _check_pause(self, request: PauseRequest) -> None:
        inbox.check_until(request.until, workflow.now())
        inbox.check_request(request)

    @workflow.update(name=names.UPDATE_RESUME)
    async def resume(self, request: ControlRequest | None = None) -> CronReport:
        self._resume()
        self._audit("resume", request)
        return self.report()

    @resume.validator
    def _check_resume(self, request: ControlRequest | None = None) -> None:
        if not self.state.paused:
            raise ValueError("cannot resume: the cron is not paused")
        inbox.check_request(request)

    @workflow.update(name=names.UPDATE_TRIGGER)
    async def trigger(self, request: ControlRequest | None = None) -> CronReport:
        """Run one extra slot now (recorded as manual), whatever the overlap policy."""
        self.triggers += 1
        self.controls_seen += 1
        self._audit("trigger", request, "one extra slot now")
        return self.report()

    @trigger.validator
    def _check_trigger(self, request: ControlRequest | None = None) -> None:
        inbox.check_request(request)

    @workflow.update(name=names.UPDATE_SCHEDULE)
    async def update_schedule(self, change: CronUpdate) -> CronReport:
        updates = change.schedule_changes()
        self._decide_overlapped_now()
        self.spec = self.spec.model_copy(update=updates)
        self._load_schedule()
        # The new schedule starts from now: slots of the new expression in the past are not due.
        assert self.state.last_slot is not None
        self.state.last_slot = max(self.state.last_slot, workflow.now())
        self.planned = None
        self.controls_seen += 1
        # Listings compute the next run from it.
        workflow.upsert_memo({names.MEMO_SCHEDULE: cron_memo(self.spec)})
        changed = ", ".join(f"{key} {value}" for key, value in updates.items())
        self._audit("update", ControlRequest(actor=change.actor, note=change.note), changed)
        return self.report()

    @update_schedule.validator
    def _check_update(self, change: CronUpdate) -> None:
        # CronError is a ValueError: raising it rejects the update, leaving no trace in history.
        cron = cronmath.parse(change.cron) if change.cron is not None else self.cron
        zone = cronmath.zone(change.timezone) if change.timezone is not None else self.zone
        inbox.check_request(ControlRequest(actor=change.actor, note=change.note))
        gap, repeat = self.spec.dst_gap, self.spec.dst_repeat
        cronmath.next_slot(cron, zone, workflow.now(), gap=gap, repeat=repeat)  # none: refused

    @workflow.update(name=names.UPDATE_BACKFILL)
    async def backfill(self, request: BackfillRequest) -> BackfillAnswer:
        """Queue every slot in [from, to] (within the bounds); the run loop starts them, each
        with its slot's usual id, so a slot that already has a job is not run twice. The
        slots are counted here, once (the validator only does the cheap checks: replay runs
        no validator, and one activation must stay well under the deadlock detector's 2 s);
        a range beyond the cap fails the update."""
        slots, overlap = self._backfill_plan(request)
        if slots:
            self.state.backfills.append(
                Backfill(after=backfill_start(slots[0]), to=slots[-1], overlap=overlap)
            )
            self.controls_seen += 1
        span = f"{self._when(slots[0])} to {self._when(slots[-1])}" if slots else "no slot"
        detail = f"{len(slots)} slot(s), {span}, {overlap}"
        self._audit("backfill", ControlRequest(actor=request.actor, note=request.note), detail)
        return BackfillAnswer(
            job_id=self.spec.id,
            slots=len(slots),
            first=slots[0] if slots else None,
            last=slots[-1] if slots else None,
            overlap=overlap,
            queued=len(self.state.backfills),
        )

    @backfill.validator
    def _check_backfill(self, request: BackfillRequest) -> None:
        if not isinstance(request, BackfillRequest):  # a null argument decodes as None
            raise ValueError("cannot backfill: the argument must be an object with from and to")
        inbox.check_request(ControlRequest(actor=request.actor, note=request.note))
        if self.ended is not None:
            raise ValueError(f"cannot backfill: the cron is done ({self.ended})")
        if len(self.state.backfills) >= MAX_QUEUED_BACKFILLS:
            raise ValueError(
                f"cannot backfill: {MAX_QUEUED_BACKFILLS} backfills are already waiting"
            )
        if request.from_ > request.to:
            raise ValueError("cannot backfill: from is after to")
        if request.to > workflow.now():
            raise ValueError(
                "cannot backfill: to is in the future (a backfill runs past slots; the cron "
                "runs the coming ones itself)"
            )

    def _backfill_plan(self, request: BackfillRequest) -> tuple[list[datetime], BackfillOverlap]:
        """The slots a backfill covers and how they start (an ApplicationError, which fails
        the update alone, for a range beyond the cap)."""
        try:
            slots = backfill_slots(self.spec, self.cron, self.zone, request.from_, request.to)
        except BackfillTooLarge as err:
            raise ApplicationError(f"cannot backfill: {err}", non_retryable=True) from None
        default: BackfillOverlap = "allow_all" if self.spec.overlap == "allow_all" else "buffer_all"
        return slots, request.overlap or default

    @workflow.signal(name=names.SIGNAL_CANCEL_REQUESTED)
    def cancel_requested(self, *args: Any) -> None:
        """Who cancels and why (a ControlRequest): sent just before the workflow cancellation
        itself. An invalid one is recorded as rejected; the cancellation still notes itself."""
        request = args[0] if args else None
        signal = names.SIGNAL_CANCEL_REQUESTED
        try:
            checked = inbox.signal_arg(args, inbox.CONTROL_ARG, signal, optional=True)
        except inbox.Invalid as err:
            self._reject(str(err), request)
            return
        self.cancel_noted = True
        self._audit("cancel", checked, "no further slots")

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """A signal this workflow does not define: recorded and dropped."""
        self._reject(inbox.unknown_signal(name))

    @workflow.signal(name=names.SIGNAL_SLOT_FINISHED)
    def slot_finished(self, *args: Any) -> None:
        """A SlotFinished, from a slot's job when it settles."""
        raw = args[0] if args else None
        signal = names.SIGNAL_SLOT_FINISHED
        try:
            report = inbox.signal_arg(args, inbox.SLOT_FINISHED_ARG, signal)
        except inbox.Invalid as err:
            self._reject(str(err), raw)
            return
        # A parked child signals its later ends too: no need to wait for its completion.
        self.tracked.discard(report.job_id)
        # The run wakes on what the end changes (see _changed_since), not on every report.
        self._slot_ended(report.job_id, report.status)
