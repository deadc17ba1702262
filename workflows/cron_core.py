"""What every part of ``CronJobWorkflow`` shares: its spec and :class:`CronState` (carried
across continue-as-new) with the run's own bookkeeping, and how they reach the slot records,
the audit trail, the Web UI (current details) and the ``status`` report. The parts
(:mod:`workflows.cron_controls`, :mod:`workflows.cron_workflow`) build on it; workflow code,
deterministic."""

from __future__ import annotations

import asyncio
from datetime import datetime
from zoneinfo import ZoneInfo

from temporalio import workflow

import jobctl.workflows.cronmath as cronmath
import jobctl.workflows.inbox as inbox
from jobctl.workflows.cron_rules import (
    MAX_BACKLOG_RECORDS,
    NEXT_SLOTS,
    RECENT_SLOTS,
    bounded_next_slot,
)
from jobctl.workflows.job_rules import unnoted_cancellation
from jobctl.workflows.models import (
    JOB_STATUS,
    AuditAction,
    ControlRequest,
    CronReport,
    CronState,
    JobSpec,
    JobStatus,
    SlotOutcome,
    SlotRecord,
    SlotTime,
    append_audit,
)
from jobctl.workflows.uitext import audit_details, moment_text


class CronCore:
    spec: JobSpec
    state: CronState
    cron: cronmath.Cron
    zone: ZoneInfo
    event_budget: int
    triggers: int  # manual runs requested and not yet started
    controls_seen: int  # bumps on every control or report so a wait re-evaluates
    cancelled: bool
    cancel_noted: bool  # the cancel_requested signal recorded who and why
    planned: tuple[datetime, datetime] | None  # (slot, fire time with jitter)
    overlap_wait: bool  # waiting (no timer) for the running slot's end: see _lazy_overlap
    slot_end: datetime | None  # when the latest running slot ended (see _slot_ended)
    tracked: set[str]  # children of this run whose completion reports their end
    slot_timer: tuple[datetime, asyncio.Task[None]] | None  # one per slot
    cancel_sent: set[str]  # cancel_other: children this run asked to cancel
    ended: str | None  # why the schedule is over (its bounds), once it is
    over: bool  # the bounds allow no further scheduled slot (the cron ends once idle)

    def _started_ahead(self) -> list[datetime]:
        """Slots whose job has started and is waiting for the slot's time (shown as next)."""
        now = workflow.now()
        return sorted(slot for slot in self.state.running.values() if slot > now)

    def _load_schedule(self) -> None:
        assert self.spec.cron is not None
        self.cron = cronmath.parse(self.spec.cron)
        self.zone = cronmath.zone(self.spec.timezone)

    def _created(self) -> datetime:
        """Where the first run counts slots from: when the server started the cron, so slots
        due before its first workflow task (no worker had polled yet) run or are recorded as
        missed, as after any outage."""
        return workflow.info().workflow_start_time

    def _next_slot(self, after: datetime) -> datetime | None:
        """The next slot within the bounds, or None when there is none (for display and for
        walking a backlog; the run loop lets CronError through and fails the cron)."""
        try:
            return bounded_next_slot(self.spec, self.cron, self.zone, after)
        except cronmath.CronError:
            return None

    def _runs_left(self) -> int | None:
        """Slots still allowed to start a job under ``max_runs`` (None: no limit). Only
        scheduled slots count ("ran"); manual runs and backfills do not (as in Temporal)."""
        if self.spec.max_runs is None:
            return None
        return max(0, self.spec.max_runs - self.state.counts.get("ran", 0))

    def _end(self) -> None:
        """The bounds are reached and nothing runs: the cron ends as done (the run loop
        returns, so its run completes)."""
        if self._runs_left() == 0:
            self.ended = f"max_runs reached ({self.spec.max_runs} slots ran)"
        else:
            assert self.spec.end is not None
            self.ended = f"no slot before end {self._when(self.spec.end)}"
        workflow.logger.info("cron %s: %s; done", self.spec.id, self.ended)
        workflow.upsert_search_attributes([JOB_STATUS.value_set(JobStatus.DONE.value)])
        self._show()

    def _upcoming(self) -> list[datetime]:
        """The next slots within the bounds (at most NEXT_SLOTS and the runs left)."""
        assert self.state.last_slot is not None
        left = self._runs_left()
        slots: list[datetime] = []
        after = self.state.last_slot
        for _ in range(NEXT_SLOTS if left is None else min(NEXT_SLOTS, left)):
            slot = self._next_slot(after)
            if slot is None:
                break
            slots.append(slot)
            after = slot
        return slots

    def _shown_next(self) -> list[datetime]:
        """The next slots as shown: one whose job started ahead first; while the running
        slot's end decides the slots already due, only those still ahead."""
        upcoming = self._upcoming()
        if self.overlap_wait:
            now = workflow.now()
            upcoming = [slot for slot in upcoming if slot > now]
        return (self._started_ahead() + upcoming)[:NEXT_SLOTS]

    def _skip_backlog(self, until: datetime, outcome: SlotOutcome, detail: str) -> None:
        """Record the slots up to ``until`` that will not run (missed, or paused)."""
        assert self.state.last_slot is not None
        for _ in range(MAX_BACKLOG_RECORDS):
            slot = self._next_slot(self.state.last_slot)
            if slot is None or slot > until:
                return
            self.state.last_slot = slot
            self._record(slot, outcome, detail=detail)
        # A long outage of a frequent cron: jump ahead rather than walk every slot.
        self.state.last_slot = until
        self._record(until, outcome, detail=f"and more slots up to this time ({detail})")

    def _slot_ended(self, job_id: str, status: JobStatus, ended_at: datetime | None = None) -> bool:
        """Record how a slot's job settled (its handler's last end when its report says, else
        now); True if it was still counted as running."""
        running = self.state.running.pop(job_id, None) is not None
        if running:
            end = ended_at or workflow.now()
            self.slot_end = end if self.slot_end is None else max(self.slot_end, end)
        self.cancel_sent.discard(job_id)
        for record in self.state.recent:
            if record.job_id == job_id:
                record.status = status
        self._show()
        return running

    def _set_paused(self, paused: bool) -> None:
        self.state.paused = paused
        status = JobStatus.PAUSED if paused else JobStatus.SCHEDULED
        workflow.upsert_search_attributes([JOB_STATUS.value_set(status.value)])
        self.controls_seen += 1

    def _resume(self) -> None:
        self._skip_backlog(workflow.now(), "paused", "the cron was paused")
        self.state.paused_until = None
        self.planned = None
        self._set_paused(False)

    def _record(
        self,
        slot: datetime,
        outcome: SlotOutcome,
        job_id: str | None = None,
        status: JobStatus | None = None,
        detail: str = "",
    ) -> None:
        self.state.counts[outcome] = self.state.counts.get(outcome, 0) + 1
        self.state.recent.append(
            SlotRecord(slot=slot, outcome=outcome, job_id=job_id, status=status, detail=detail)
        )
        del self.state.recent[:-RECENT_SLOTS]

    def _when(self, moment: datetime) -> str:
        return moment_text(moment, self.spec.timezone)

    def _show(self) -> None:
        workflow.set_current_details(self.current_details())

    def current_details(self) -> str:
        """``**scheduled** · next slot ... · running: 1 · last slot ... ran (done) · ran 12``,
        from state only, so replay rebuilds the same text."""
        last_slot = self.state.last_slot or workflow.info().start_time
        if self.cancelled:
            parts = ["**cancelled**", "no further slots"]
        elif self.ended is not None:
            parts = ["**done**", self.ended]
        elif self.state.paused:
            until = self.state.paused_until
            parts = ["**paused**", f"until {self._when(until)}" if until else "until resumed"]
        else:
            if self.overlap_wait or self.state.running:  # a slot started ahead shows first
                shown = self._shown_next()
                nxt = shown[0] if shown else None
            else:  # the planned slot when there is one (no cron computation per wait)
                nxt = self.planned[0] if self.planned else self._next_slot(last_slot)
            parts = ["**scheduled**", f"next slot {self._when(nxt) if nxt else 'none'}"]
        if self.triggers:
            parts.append(f"{self.triggers} manual run(s) queued")
        if self.state.running:
            parts.append(f"running: {len(self.state.running)}")
        if self.state.buffered is not None:
            parts.append(f"buffered: {self._when(self.state.buffered)}")
        if self.state.recent:
            last = self.state.recent[-1]
            settled = f" ({last.status})" if last.status else ""
            parts.append(f"last slot {self._when(last.slot)} {last.outcome}{settled}")
        if self.state.counts:
            parts.append(", ".join(f"{k} {v}" for k, v in sorted(self.state.counts.items())))
        trail = audit_details(self.state.audit, self.spec.timezone)
        return " · ".join(parts) + (f"\n\n{trail}" if trail else "")

    def _audit(
        self, action: AuditAction, request: ControlRequest | None, detail: str | None = None
    ) -> None:
        """Record an operator action in the cron's trail (carried across continue-as-new)."""
        append_audit(self.state.audit, action, request, workflow.now(), detail)
        self._show()

    def _note_cancellation(self, detail: str | None) -> None:
        request = unnoted_cancellation(self.cancel_noted)
        if request is not None:
            self._audit("cancel", request, detail)

    def _reject(self, reason: str, raw: object = None) -> None:
        """Record a dropped message in the audit trail (see workflows/inbox.py)."""
        streak = inbox.record_rejection(
            self.state.audit, workflow.now(), reason, inbox.actor_of(raw)
        )
        if streak == 1:
            workflow.logger.warning("cron %s: %s", self.spec.id, reason)
        self._show()

    def report(self) -> CronReport:
        """What the ``status`` query answers (and every control returns)."""
        upcoming = [] if self.ended is not None else self._shown_next()
        if self.cancelled:
            status = JobStatus.CANCELLED
        elif self.ended is not None:
            status = JobStatus.DONE
        else:
            status = JobStatus.PAUSED if self.state.paused else JobStatus.SCHEDULED
        return CronReport(
            job_id=self.spec.id,
            name=self.spec.name,
            handler=self.spec.handler,
            status=status,
            cron=self.cron.expression,
            timezone=self.spec.timezone,
            overlap=self.spec.overlap,
            run_at=None if self.cancelled or not upcoming else upcoming[0],
            paused_until=self.state.paused_until,
            next_slots=[
                SlotTime(local=local, utc=utc)
                for local, utc in cronmath.slot_times(upcoming, self.zone)
            ],
            recent_slots=list(reversed(self.state.recent)),
            running=sorted(self.state.running),
            counts=dict(self.state.counts),
            generation=self.state.generation,
            audit=list(self.state.audit),
            **self.spec.scheduling(),
        )
