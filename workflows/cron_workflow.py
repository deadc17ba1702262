"""``CronJobWorkflow``: one recurring job; every slot becomes a ``JobWorkflow`` child.

Each slot's child has the id ``<cron id>@<slot in UTC>`` and Temporal refuses a second
workflow with that id (REJECT_DUPLICATE), which is the unique (cron_id, scheduled_for)
constraint: a slot can never run twice, and an attempt to is recorded as ``duplicate``.
Children outlive the cron (ABANDON): cancelling a cron stops further slots and lets a running
one finish.

How a slot's end reaches the cron (runs since the ``lean-cron-slot`` patch): the child's
completion, which Temporal records in the run that started it at no cost. Such children carry
the memo ``slot_end: completion`` and send no signal, except when they park (a dead job stays
open) and for how they end after a park. A run continues-as-new only once the children it
tracks that way have ended (it keeps scheduling meanwhile; children started then report by the
``slot_finished`` signal, addressed to the cron's workflow id, so the report reaches whichever
run is current); past twice the event budget it rotates anyway and stops tracking them. Each
slot costs one timer at most (kept across wake-ups), and ``JobRunAt`` is not upserted per slot:
readers compute a cron's next run from its spec. Older runs (no patch marker) keep the earlier
shape: every child signals ``slot_finished``, which wakes the wait, and ``JobRunAt`` follows
each slot.

Zone and cron arithmetic is in :mod:`workflows.cronmath` (pure, passed through the sandbox),
always fed ``workflow.now()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import (
    RawValue,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import (
    ApplicationError,
    TerminatedError,
    WorkflowAlreadyStartedError,
    is_cancelled_exception,
)
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    # "import a.b as b", not "from a import b": the latter bypasses the sandbox's import hook
    # and would load a fresh copy (with restricted ZoneInfo proxies) into every workflow run.
    import workflows.cronmath as cronmath
    import workflows.inbox as inbox
    from workflows.models import (
        JOB_HANDLER,
        JOB_NAME,
        JOB_RUN_AT,
        JOB_STATUS,
        LEAN_SHAPE,
        SHAPE_MEMO_KEY,
        AuditAction,
        ControlRequest,
        CronInput,
        CronReport,
        CronState,
        CronUpdate,
        JobSpec,
        JobStatus,
        PauseRequest,
        SlotOutcome,
        SlotRecord,
        SlotTime,
        append_audit,
    )
    from workflows.uitext import (
        audit_details,
        clip,
        code,
        job_details,
        job_summary,
        moment_text,
    )

from workflows.job_workflow import (
    SLOT_END_BY_COMPLETION,
    SLOT_END_MEMO_KEY,
    JobWorkflow,
    start_search_attributes,
    unnoted_cancellation,
)

RECENT_SLOTS = 20
NEXT_SLOTS = 5
# Slots that came due while paused or while no worker ran are recorded one by one up to
# this many; beyond it the cron jumps ahead and records one summary line.
MAX_BACKLOG_RECORDS = 100
# Slot ends read from child completions, one timer per slot, no JobRunAt upsert per slot, no
# JobStatus upsert on cancel (ExecutionStatus says it).
LEAN_CRON_PATCH = "lean-cron-slot"
# A cron's schedule in its memo, for listings to compute the next run without a query
# (JobRunAt is set at start and no longer follows the slots): {"cron": ..., "timezone": ...}.
CRON_MEMO_KEY = "schedule"
# A run waiting for the children it tracks before continuing-as-new rotates anyway beyond
# this many times its event budget.
FORCED_ROTATION = 2


def _drop_outcome(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def child_outcome(task: asyncio.Future[Any]) -> JobStatus:
    """How a slot's child ended, from its completion: done, cancelled, discarded or dead."""
    if task.cancelled():
        return JobStatus.CANCELLED
    err = task.exception()
    if err is None:
        return JobStatus.DONE
    cause = getattr(err, "cause", None)
    if is_cancelled_exception(err) or isinstance(cause, TerminatedError):
        return JobStatus.CANCELLED
    if isinstance(cause, ApplicationError) and cause.type == "JobDiscarded":
        return JobStatus.DISCARDED
    return JobStatus.DEAD


def cron_search_attributes(
    spec: JobSpec, status: JobStatus, next_run: datetime
) -> TypedSearchAttributes:
    return TypedSearchAttributes(
        [
            SearchAttributePair(JOB_STATUS, status.value),
            SearchAttributePair(JOB_NAME, spec.name),
            SearchAttributePair(JOB_HANDLER, spec.handler),
            SearchAttributePair(JOB_RUN_AT, next_run),
        ]
    )


def cron_memo(spec: JobSpec) -> dict[str, str]:
    """The memo value under CRON_MEMO_KEY: set by the starter at start, kept by ``update``."""
    assert spec.cron is not None
    return {"cron": spec.cron, "timezone": spec.timezone}


def next_run_from_memo(schedule: Any, after: datetime) -> datetime | None:
    """A cron's next slot after ``after`` from its memo's schedule (None when the memo has
    none, e.g. a cron started before it was set, or the schedule has no next slot). Paused
    crons have no next run: callers check JobStatus first."""
    if not isinstance(schedule, dict):
        return None
    try:
        cron = cronmath.parse(str(schedule["cron"]))
        return cronmath.next_slot(cron, cronmath.zone(str(schedule["timezone"])), after)
    except (KeyError, ValueError):  # CronError is a ValueError
        return None


def cron_summary(spec: JobSpec) -> str:
    """``send-report · http.post · cron 0 9 * * 1-5 Europe/Paris``"""
    return job_summary(spec)


def cron_details(spec: JobSpec) -> str:
    return job_details(spec, "each slot runs as its own job, id `<cron id>@<slot in UTC>`")


def tick_summary(spec: JobSpec, slot: datetime, cron: str) -> str:
    """A slot's job: ``send-report · http.post · slot 2026-12-01 09:00 Europe/Paris (08:00
    UTC) of cron 0 9 * * 1-5``."""
    return job_summary(spec, f"slot {moment_text(slot, spec.timezone)} of cron {cron}")


@workflow.defn(name="CronJobWorkflow")
class CronJobWorkflow:
    @workflow.init
    def __init__(self, *args: Any) -> None:
        """Started with one CronInput (checked by inbox.start_arg: a bad input fails the
        workflow at once with InvalidWorkflowInput)."""
        start = inbox.start_arg(args, inbox.CRON_START, inbox.check_cron_start)
        self.spec = start.spec
        self.state = start.state.model_copy(deep=True)
        self.event_budget = start.event_budget
        self.triggers = 0  # manual runs requested and not yet started
        self.controls_seen = 0  # bumps on every control or report so a wait re-evaluates
        self.cancelled = False
        self.cancel_noted = False  # the cancel_requested signal recorded who and why
        self.planned: tuple[datetime, datetime] | None = None  # (slot, fire time with jitter)
        self.next_run_upserted: datetime | None = None
        self.lean = False  # set by run(): LEAN_CRON_PATCH
        self.tracked: set[str] = set()  # children of this run whose completion reports their end
        self.slot_timer: tuple[datetime, asyncio.Task[None]] | None = None  # one per slot
        self.cancel_sent: set[str] = set()  # cancel_other: children this run asked to cancel
        self._load_schedule()

    def _load_schedule(self) -> None:
        assert self.spec.cron is not None
        self.cron = cronmath.parse(self.spec.cron)
        self.zone = cronmath.zone(self.spec.timezone)

    @workflow.run
    async def run(self, *args: Any) -> None:
        if self.state.last_slot is None:
            self.state.last_slot = workflow.info().start_time
        self.lean = workflow.patched(LEAN_CRON_PATCH)
        try:
            while True:
                if self._time_to_rotate() and (not self.tracked or self._must_rotate()):
                    await workflow.wait_condition(workflow.all_handlers_finished)
                    workflow.continue_as_new(
                        CronInput(
                            spec=self.spec, state=self._snapshot(), event_budget=self.event_budget
                        )
                    )
                try:
                    await self._step()
                except cronmath.CronError as err:
                    raise self._no_next_slot(err) from None
        except BaseException as err:
            if is_cancelled_exception(err):
                self._note_cancellation("no further slots")
                self.cancelled = True
                if not self.lean:
                    workflow.upsert_search_attributes(
                        [JOB_STATUS.value_set(JobStatus.CANCELLED.value)]
                    )
                self._show()
            raise

    async def _step(self) -> None:
        """Start what is due (manual triggers, a buffered slot, the next slot) or wait for it."""
        now = workflow.now()
        if self.triggers:
            self.triggers -= 1
            await self._start(now.replace(microsecond=0), "manual")
            return
        if self.state.buffered is not None and not self.state.running:
            slot, self.state.buffered = self.state.buffered, None
            await self._start(slot, "ran")
            return
        if self.state.paused:
            self._drop_slot_timer()
            until = self.state.paused_until
            if until is not None and now >= until:
                self._resume()
            else:
                label = f"paused until {self._when(until)}" if until is not None else ""
                await self._wait_for_control(until, label)
            return
        slot, fire_at = self._plan()
        if now < fire_at:
            if self.lean:
                await self._wait_for_slot(fire_at, f"next slot {self._when(slot)}")
            else:
                self._publish_next_run(slot)
                await self._wait_for_control(fire_at, f"next slot {self._when(slot)}")
            return
        self.planned = None
        late = now - fire_at
        if late > timedelta(seconds=self.spec.catchup_window):
            detail = f"beyond the {self.spec.catchup_window:g}s catch-up window"
            # Every slot at or before this threshold is late by more than the window.
            threshold = now - timedelta(
                seconds=self.spec.catchup_window + self.spec.schedule_jitter
            )
            if slot <= threshold:
                self._skip_backlog(threshold, "missed", detail)
            else:
                self.state.last_slot = slot
                self._record(slot, "missed", detail=detail)
            return
        self.state.last_slot = slot
        await self._apply_overlap(slot)

    def _no_next_slot(self, err: cronmath.CronError) -> ApplicationError:
        """The schedule ran out (e.g. dates end with year 9999): the cron fails, saying why."""
        message = f"cron {self.cron.expression} in {self.spec.timezone} {err}"
        workflow.logger.error("cron %s: %s; no further slots", self.spec.id, message)
        return ApplicationError(message, type="CronHasNoNextSlot", non_retryable=True)

    def _next_slot(self, after: datetime) -> datetime | None:
        """The next slot, or None when there is none (for display and for walking a backlog;
        the run loop lets CronError through and fails the cron)."""
        try:
            return cronmath.next_slot(self.cron, self.zone, after)
        except cronmath.CronError:
            return None

    def _plan(self) -> tuple[datetime, datetime]:
        """The next slot and when to fire it (jitter drawn once per slot, deterministically)."""
        assert self.state.last_slot is not None
        slot = cronmath.next_slot(self.cron, self.zone, self.state.last_slot)
        if self.planned is None or self.planned[0] != slot:
            jitter = workflow.random().uniform(0, self.spec.schedule_jitter)
            self.planned = (slot, slot + timedelta(seconds=jitter))
        return self.planned

    async def _apply_overlap(self, slot: datetime) -> None:
        if self.state.running:
            policy = self.spec.overlap
            if policy == "skip":
                self._record(
                    slot, "skipped", detail=f"{len(self.state.running)} slot(s) still running"
                )
                return
            if policy == "buffer_one":
                if self.state.buffered is None:
                    self.state.buffered = slot
                    self._record(slot, "buffered", detail="runs when the running slot finishes")
                else:
                    self._record(slot, "skipped", detail="one slot is already buffered")
                return
            if policy == "cancel_other":
                # Each child once (lean runs): a cancel takes a while to settle (the handler
                # sees it within its cancel latency); a second request adds nothing, and the
                # test server fails the task for it.
                for job_id in [j for j in self.state.running if j not in self.cancel_sent]:
                    if self.lean:
                        self.cancel_sent.add(job_id)
                    with contextlib.suppress(Exception):  # already finished: nothing to cancel
                        await workflow.get_external_workflow_handle(job_id).cancel()
        await self._start(slot, "ran")

    async def _start(self, slot: datetime, outcome: SlotOutcome) -> None:
        job_id = f"{self.spec.id}@{cronmath.iso_utc(slot)}"
        tick = self._tick_spec(job_id, slot)
        try:
            # While a rotation waits, new children report by signal (this run will not see
            # their completion).
            by_completion = self.lean and not self._time_to_rotate()
            child = await workflow.start_child_workflow(
                JobWorkflow.run,
                tick,
                id=job_id,
                task_queue=workflow.info().task_queue,
                parent_close_policy=ParentClosePolicy.ABANDON,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                memo=self._slot_memo(by_completion),
                search_attributes=start_search_attributes(tick, JobStatus.SCHEDULED),
                static_summary=tick_summary(tick, slot, self.cron.expression),
                static_details=job_details(
                    tick,
                    f"{outcome} slot {self._when(slot)} of cron job {code(self.spec.id)} "
                    f"({code(self.cron.expression)} in {self.spec.timezone})",
                ),
            )
            if self.lean:
                child.add_done_callback(functools.partial(self._child_ended, job_id))
                if by_completion:
                    self.tracked.add(job_id)
            else:
                # The slot reports its end by signal; its result here is read only to be
                # dropped (a cancelled slot would otherwise log "exception never retrieved").
                child.add_done_callback(_drop_outcome)
        except WorkflowAlreadyStartedError:
            workflow.logger.error(
                "slot %s of cron %s already has a job; not starting it twice",
                cronmath.iso_utc(slot),
                self.spec.id,
            )
            self._record(slot, "duplicate", job_id, detail="a job for this slot already exists")
            return
        self.state.running[job_id] = slot
        self._record(slot, outcome, job_id, JobStatus.RUNNING)

    def _slot_memo(self, by_completion: bool) -> dict[str, str] | None:
        """A slot job's memo: lean runs give it the lean shape (no patch marker in the child)
        and, unless a rotation waits, tell it that its completion is its report."""
        if not self.lean:
            return None
        memo = {SHAPE_MEMO_KEY: LEAN_SHAPE}
        if by_completion:
            memo[SLOT_END_MEMO_KEY] = SLOT_END_BY_COMPLETION
        return memo

    def _tick_spec(self, job_id: str, slot: datetime) -> JobSpec:
        planned = self.planned[1] if self.planned and self.planned[0] == slot else slot
        key = self.spec.idempotency_key or self.spec.id
        return JobSpec(
            id=job_id,
            name=self.spec.name,
            handler=self.spec.handler,
            payload=self.spec.payload,
            run_at=max(planned, slot),
            timezone=self.spec.timezone,
            max_attempts=self.spec.max_attempts,
            backoff_base=self.spec.backoff_base,
            backoff_max=self.spec.backoff_max,
            jitter=self.spec.jitter,
            lease=self.spec.lease,
            timeout=self.spec.timeout,
            idempotency_key=f"{key}@{cronmath.iso_utc(slot)}",
            dispatch_lead=self.spec.dispatch_lead,
        )

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

    def _child_ended(self, job_id: str, task: asyncio.Future[Any]) -> None:
        """A child of this run completed (free: Temporal records it in this run's history)."""
        self.tracked.discard(job_id)
        self._slot_ended(job_id, child_outcome(task))

    def _slot_ended(self, job_id: str, status: JobStatus) -> bool:
        """Record how a slot's job settled; True if it was still counted as running."""
        running = self.state.running.pop(job_id, None) is not None
        self.cancel_sent.discard(job_id)
        for record in self.state.recent:
            if record.job_id == job_id:
                record.status = status
        self._show()
        return running

    async def _wait_for_control(self, until: datetime | None, label: str) -> None:
        self._show()
        seen = self.controls_seen
        timeout = (until - workflow.now()) if until is not None else None
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                self._changed_since(seen), timeout=timeout, timeout_summary=clip(label) or None
            )

    def _changed_since(self, seen: int) -> Callable[[], bool]:
        if not self.lean:
            return lambda: self.controls_seen != seen or self._time_to_rotate()
        return lambda: (
            self.controls_seen != seen
            or (self._time_to_rotate() and (not self.tracked or self._must_rotate()))
            or (self.state.buffered is not None and not self.state.running)
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

    def _publish_next_run(self, slot: datetime) -> None:
        if self.next_run_upserted != slot:
            self.next_run_upserted = slot
            workflow.upsert_search_attributes([JOB_RUN_AT.value_set(slot)])

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
        elif self.state.paused:
            until = self.state.paused_until
            parts = ["**paused**", f"until {self._when(until)}" if until else "until resumed"]
        else:
            # The planned slot when there is one (no second cron computation per wait).
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

    def _snapshot(self) -> CronState:
        state = self.state.model_copy(update={"generation": self.state.generation + 1}, deep=True)
        for job_id in self.tracked:  # a forced rotation: the next run cannot hear their end
            state.running.pop(job_id, None)
        return state

    # -- queries -------------------------------------------------------------------------

    @workflow.query
    def status(self) -> CronReport:
        assert self.state.last_slot is not None
        try:
            upcoming = cronmath.upcoming(self.cron, self.zone, self.state.last_slot, NEXT_SLOTS)
        except cronmath.CronError:  # the schedule ends (the run loop fails the cron)
            upcoming = []
        if self.cancelled:
            status = JobStatus.CANCELLED
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
        )

    # -- updates and signals ---------------------------------------------------------------

    @workflow.update
    async def pause(self, request: PauseRequest) -> CronReport:
        self.state.paused_until = request.until
        self._set_paused(True)
        self._audit(
            "pause", request, f"until {self._when(request.until)}" if request.until else None
        )
        return self.status()

    @pause.validator
    def _check_pause(self, request: PauseRequest) -> None:
        inbox.check_until(request.until, workflow.now())
        inbox.check_request(request)

    @workflow.update
    async def resume(self, request: ControlRequest | None = None) -> CronReport:
        self._resume()
        self._audit("resume", request)
        return self.status()

    @resume.validator
    def _check_resume(self, request: ControlRequest | None = None) -> None:
        if not self.state.paused:
            raise ValueError("cannot resume: the cron is not paused")
        inbox.check_request(request)

    @workflow.update
    async def trigger(self, request: ControlRequest | None = None) -> CronReport:
        """Run one extra slot now (recorded as manual), whatever the overlap policy."""
        self.triggers += 1
        self.controls_seen += 1
        self._audit("trigger", request, "one extra slot now")
        return self.status()

    @trigger.validator
    def _check_trigger(self, request: ControlRequest | None = None) -> None:
        inbox.check_request(request)

    @workflow.update(name="update")
    async def update_schedule(self, change: CronUpdate) -> CronReport:
        updates = change.schedule_changes()
        self.spec = self.spec.model_copy(update=updates)
        self._load_schedule()
        # The new schedule starts from now: slots of the new expression in the past are not due.
        assert self.state.last_slot is not None
        self.state.last_slot = max(self.state.last_slot, workflow.now())
        self.planned = None
        self.controls_seen += 1
        if self.lean:  # listings compute the next run from it
            workflow.upsert_memo({CRON_MEMO_KEY: cron_memo(self.spec)})
        changed = ", ".join(f"{key} {value}" for key, value in updates.items())
        self._audit("update", ControlRequest(actor=change.actor, note=change.note), changed)
        return self.status()

    @update_schedule.validator
    def _check_update(self, change: CronUpdate) -> None:
        # CronError is a ValueError: raising it rejects the update, leaving no trace in history.
        cron = cronmath.parse(change.cron) if change.cron is not None else self.cron
        zone = cronmath.zone(change.timezone) if change.timezone is not None else self.zone
        inbox.check_request(ControlRequest(actor=change.actor, note=change.note))
        cronmath.next_slot(cron, zone, workflow.now())  # a schedule with no next slot is refused

    @workflow.signal
    def cancel_requested(self, *args: Any) -> None:
        """Who cancels and why (a ControlRequest): sent just before the workflow cancellation
        itself. An invalid one is recorded as rejected; the cancellation still notes itself."""
        request = args[0] if args else None
        try:
            raw = inbox.one_arg(args, "cancel_requested", optional=True)
            checked = inbox.accept(inbox.CONTROL_ARG, raw, "cancel_requested")
        except inbox.Invalid as err:
            self._reject(str(err), request)
            return
        self.cancel_noted = True
        self._audit("cancel", checked, "no further slots")

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """A signal this workflow does not define: recorded and dropped."""
        self._reject(inbox.unknown_signal(name))

    def _reject(self, reason: str, raw: object = None) -> None:
        """Record a dropped message in the audit trail (see workflows/inbox.py)."""
        streak = inbox.record_rejection(
            self.state.audit, workflow.now(), reason, inbox.actor_of(raw)
        )
        if streak == 1:
            workflow.logger.warning("cron %s: %s", self.spec.id, reason)
        self._show()

    @workflow.signal
    def slot_finished(self, *args: Any) -> None:
        """A SlotFinished, from a slot's job when it settles."""
        raw = args[0] if args else None
        try:
            raw = inbox.one_arg(args, "slot_finished")
            report = inbox.accept(inbox.SLOT_FINISHED_ARG, raw, "slot_finished")
        except inbox.Invalid as err:
            self._reject(str(err), raw)
            return
        # A parked child signals its later ends too: no need to wait for its completion.
        self.tracked.discard(report.job_id)
        # Lean runs wake on what the end changes (see _changed_since), not on every report.
        if self._slot_ended(report.job_id, report.status) and not self.lean:
            self.controls_seen += 1
