"""``CronJobWorkflow``: one recurring job; every slot becomes a ``JobWorkflow`` child.

Each slot's child has the id ``<cron id>@<slot in UTC>`` and Temporal refuses a second
workflow with that id (REJECT_DUPLICATE), which is the unique (cron_id, scheduled_for)
constraint: a slot can never run twice, and an attempt to is recorded as ``duplicate``.
Children outlive the cron (ABANDON): cancelling a cron stops further slots and lets a running
one finish.

How a slot's end reaches the cron: the child's
completion, which Temporal records in the run that started it at no cost. Such children carry
the memo ``slot_end: completion`` and send no signal, except when they park (a dead job stays
open) and for how they end after a park. A run continues-as-new only once the children it
tracks that way have ended (it keeps scheduling meanwhile; children started then report by the
``slot_finished`` signal, addressed to the cron's workflow id, so the report reaches whichever
run is current); past twice the event budget it rotates anyway and stops tracking them. Each
slot costs one timer at most (kept across wake-ups), and ``JobRunAt`` is not upserted per slot:
readers compute a cron's next run from its spec.

Waits without a timer:
with no slot running, a slot's job starts up to 10 s before the slot's time and waits in its
worker like any pre-dispatched job, so a cron whose slots follow each other within 10 s needs
no timer at all; under ``skip`` / ``buffer_one`` a slot that comes due while another runs is
decided when that one ends, as it would have been at its time.

Zone and cron arithmetic is in :mod:`workflows.cronmath` (pure, passed through the sandbox),
always fed ``workflow.now()``.

This module holds the whole workflow: its state, the run loop and the slots, the waits, and
thin handlers for the query, updates and signals. Its decisions are pure functions, tested
without a server: what it does with its :class:`CronState` (records, backlogs, overlap
outcomes, the report and the Web UI text) in :mod:`workflows.cron_state`, and its rules (the
schedule, a slot's job, the checks of ``update`` and ``backfill``) in
:mod:`workflows.cron_rules`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue, WorkflowIDReusePolicy
from temporalio.exceptions import (
    ApplicationError,
    WorkflowAlreadyStartedError,
    is_cancelled_exception,
)
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    # "import a.b as b", not "from a import b": the latter bypasses the sandbox's import hook
    # and would load a fresh copy (with restricted ZoneInfo proxies) into every workflow run.
    import jobctl.workflows.cron_state as cron_state
    import jobctl.workflows.cronmath as cronmath
    import jobctl.workflows.inbox as inbox
    from jobctl.workflows import controls, names
    from jobctl.workflows.cron_rules import (
        BACKFILL_BATCH,
        FORCED_ROTATION,
        Schedule,
        backfill_plan,
        backfill_start,
        check_backfill,
        check_update,
        child_end,
        child_outcome,
        cron_memo,
        lazy_overlap,
        start_ahead,
        tick_spec,
        tick_summary,
    )
    from jobctl.workflows.job_rules import start_search_attributes, unnoted_cancellation
    from jobctl.workflows.models import (
        JOB_STATUS,
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
        append_audit,
    )
    from jobctl.workflows.models.cron import Backfill, BackfillAnswer, BackfillRequest
    from jobctl.workflows.textclip import clip_line
    from jobctl.workflows.uitext import code, job_details, moment_text

from jobctl.workflows.job_workflow import JobWorkflow

# The failure type of a cron whose schedule has no further slot.
NO_NEXT_SLOT = "CronHasNoNextSlot"


@workflow.defn(name=names.CRON_WORKFLOW)
class CronJobWorkflow:
    schedule: Schedule  # the spec, with its expression and zone parsed
    state: CronState  # carried across continue-as-new; the rest is this run's own
    event_budget: int
    triggers: int  # manual runs requested and not yet started
    controls_seen: int  # bumps on every control or report so a wait re-evaluates
    cancelled: bool
    cancel_noted: bool  # the cancel_requested signal recorded who and why
    planned: tuple[datetime, datetime] | None  # (slot, fire time with jitter)
    overlap_wait: bool  # waiting (no timer) for the running slot's end: see lazy_overlap
    slot_end: datetime | None  # when the latest running slot ended (see _slot_ended)
    tracked: set[str]  # children of this run whose completion reports their end
    slot_timer: tuple[datetime, asyncio.Task[None]] | None  # one per slot
    cancel_sent: set[str]  # cancel_other: children this run asked to cancel
    ended: str | None  # why the schedule is over (its bounds), once it is
    over: bool  # the bounds allow no further scheduled slot (the cron ends once idle)

    @workflow.init
    def __init__(self, *args: Any) -> None:
        """Started with one CronInput (checked by inbox.start_arg: a bad input fails the
        workflow at once with InvalidWorkflowInput)."""
        start = inbox.start_arg(args, inbox.CRON_START, inbox.check_cron_start)
        self.state = start.state.model_copy(deep=True)
        self.event_budget = start.event_budget
        self.triggers = 0
        self.controls_seen = 0
        self.cancelled = False
        self.cancel_noted = False
        self.planned = None
        self.tracked = set()
        self.slot_timer = None
        self.cancel_sent = set()
        self.ended = None
        self.over = False
        self.schedule = Schedule.of(start.spec)
        self.overlap_wait = False
        self.slot_end = None
        # Here, not in run(): an update that reaches a new cron in its first workflow task
        # runs its handler before run() starts, and handlers read the last slot. From when
        # the server started the cron: slots due before its first workflow task (no worker
        # had polled yet) run or are recorded as missed, as after any outage.
        if self.state.last_slot is None:
            self.state.last_slot = workflow.info().workflow_start_time

    @property
    def spec(self) -> JobSpec:
        return self.schedule.spec

    # The run loop and the slots.

    @workflow.run
    async def run(self, *args: Any) -> None:
        try:
            while self.ended is None:
                if self._time_to_rotate() and (not self.tracked or self._must_rotate()):
                    await workflow.wait_condition(workflow.all_handlers_finished)
                    workflow.continue_as_new(
                        CronInput(
                            spec=self.spec,
                            state=cron_state.snapshot(self.state, self.tracked),
                            event_budget=self.event_budget,
                        )
                    )
                try:
                    await self._step()
                except cronmath.CronError as err:
                    raise self._no_next_slot(err) from None
            await workflow.wait_condition(workflow.all_handlers_finished)
        except BaseException as err:
            if is_cancelled_exception(err):
                self._decide_overlapped_now()
                self._note_cancellation("no further slots")
                self.cancelled = True
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
            if cron_state.runs_left(self.spec, self.state) == 0:
                cron_state.record(self.state, slot, "skipped", detail="max_runs reached")
                return
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
        planned = self._plan()
        if planned is None:
            await self._wind_down()
            return
        slot, fire_at = planned
        # Started ahead only when no slot runs; otherwise the overlap policy decides at fire_at.
        start_at = self._start_at(fire_at)
        if now < start_at or (now < fire_at and self.state.running):
            await self._wait_for_planned(slot, fire_at, start_at)
        else:
            await self._due(slot, fire_at)

    async def _wait_for_planned(
        self, slot: datetime, fire_at: datetime, start_at: datetime
    ) -> None:
        """The planned slot is not due: go on with a backfill, or wait for its start time, its
        fire time, or (lazy overlap) the end of the slot that runs."""
        now = workflow.now()
        # Set only for the wait that ends with the running slot (a cron update may have
        # moved the planned slot since): another wait would end at once, again and again.
        self.overlap_wait = False
        if self._backfill_ready():
            await self._backfill_step()
        elif now >= start_at and lazy_overlap(self.spec):
            self.overlap_wait = True  # the running slot's end decides this one
            await self._wait_for_control(None, "")
        else:
            wake_at = start_at if now < start_at else fire_at
            await self._wait_for_slot(wake_at, f"next slot {self._when(slot)}")

    async def _due(self, slot: datetime, fire_at: datetime) -> None:
        """The planned slot is due (or may start ahead): start it, or record why not."""
        now = workflow.now()
        self.planned = None
        if self._overlapped(fire_at, slot):
            return
        if cron_state.missed(self.schedule, self.state, slot, fire_at, now):
            return
        self.state.last_slot = slot
        await self._apply_overlap(slot)

    def _no_next_slot(self, err: cronmath.CronError) -> ApplicationError:
        """The schedule ran out (e.g. dates end with year 9999): the cron fails, saying why."""
        message = f"cron {self.schedule.cron.expression} in {self.spec.timezone} {err}"
        workflow.logger.error("cron %s: %s; no further slots", self.spec.id, message)
        return ApplicationError(message, type=NO_NEXT_SLOT, non_retryable=True)

    def _plan(self) -> tuple[datetime, datetime] | None:
        """The next slot and when to fire it (jitter drawn once per slot, deterministically);
        None when the bounds (``end``, ``max_runs``) allow no further slot."""
        assert self.state.last_slot is not None
        if cron_state.runs_left(self.spec, self.state) == 0:
            return None
        slot = self.schedule.next_slot(self.state.last_slot)
        if slot is None:
            return None
        if self.planned is None or self.planned[0] != slot:
            jitter = workflow.random().uniform(0, self.spec.schedule_jitter)
            self.planned = (slot, slot + timedelta(seconds=jitter))
        return self.planned

    async def _wind_down(self) -> None:
        """The bounds allow no further slot: finish the queued backfills and wait for the
        running slots (and manual runs), then end as done."""
        self.over = True
        self.planned = None
        self._drop_slot_timer()
        if self._backfill_ready():
            await self._backfill_step()
        elif self.state.backfills or self.state.running:
            await self._wait_for_control(None, "schedule over; waiting for running slots")
        else:
            self._end()

    async def _backfill_step(self) -> None:
        """Start the next slots of the oldest backfill (a batch, or one for buffer_all)."""
        head = self.state.backfills[0]
        wanted = BACKFILL_BATCH if head.overlap == "allow_all" else 1
        slots: list[datetime] = []
        while len(slots) < wanted:
            slot = self.schedule.slot_after(head.after)
            if slot is None or slot > head.to:
                self.state.backfills.pop(0)  # its range is done
                break
            slots.append(slot)
            head.after = slot
        await asyncio.gather(*(self._start(slot, "backfilled") for slot in slots))

    async def _apply_overlap(self, slot: datetime) -> None:
        """Start a due slot, unless the overlap policy holds it (``skip``, ``buffer_one``);
        ``cancel_other`` first asks the running slots' jobs to cancel."""
        if cron_state.held(self.spec, self.state, slot):
            return
        if self.state.running and self.spec.overlap == "cancel_other":
            # Each child once: a cancel takes a while to settle (the handler sees it within
            # its cancel latency); a second request adds nothing, and the test server fails
            # the task for it.
            for job_id in [j for j in self.state.running if j not in self.cancel_sent]:
                self.cancel_sent.add(job_id)
                with contextlib.suppress(Exception):  # already finished: nothing to cancel
                    await workflow.get_external_workflow_handle(job_id).cancel()
        await self._start(slot, "ran")

    async def _start(self, slot: datetime, outcome: SlotOutcome) -> None:
        job_id = f"{self.spec.id}@{cronmath.iso_utc(slot)}"
        fire_at = self.planned[1] if self.planned and self.planned[0] == slot else slot
        tick = tick_spec(self.spec, job_id, slot, fire_at)
        try:
            # While a rotation waits, new children report by signal (this run will not see
            # their completion).
            by_completion = not self._time_to_rotate()
            child = await workflow.start_child_workflow(
                JobWorkflow.run,
                tick,
                id=job_id,
                task_queue=workflow.info().task_queue,
                parent_close_policy=ParentClosePolicy.ABANDON,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                memo=self._slot_memo(by_completion),
                search_attributes=start_search_attributes(tick, JobStatus.SCHEDULED),
                static_summary=tick_summary(tick, slot, self.schedule.cron.expression),
                static_details=job_details(
                    tick,
                    f"{outcome} slot {self._when(slot)} of cron job {code(self.spec.id)} "
                    f"({code(self.schedule.cron.expression)} in {self.spec.timezone})",
                ),
            )
            child.add_done_callback(functools.partial(self._child_ended, job_id))
            if by_completion:
                self.tracked.add(job_id)
        except WorkflowAlreadyStartedError:
            workflow.logger.error(
                "slot %s of cron %s already has a job; not starting it twice",
                cronmath.iso_utc(slot),
                self.spec.id,
            )
            cron_state.record(
                self.state, slot, "duplicate", job_id, detail="a job for this slot already exists"
            )
            return
        self.state.running[job_id] = slot
        cron_state.record(self.state, slot, outcome, job_id, JobStatus.RUNNING)

    def _slot_memo(self, by_completion: bool) -> dict[str, str] | None:
        """A slot job's memo: unless a rotation waits, its completion is its report."""
        return {names.MEMO_SLOT_END: names.SLOT_END_BY_COMPLETION} if by_completion else None

    def _child_ended(self, job_id: str, task: asyncio.Future[Any]) -> None:
        """A child of this run completed (free: Temporal records it in this run's history)."""
        self.tracked.discard(job_id)
        self._slot_ended(job_id, child_outcome(task), child_end(task))

    # How the state changes and shows (the decisions are in cron_state).

    def _slot_ended(self, job_id: str, status: JobStatus, ended_at: datetime | None = None) -> None:
        """Record how a slot's job settled (its handler's last end when its report says, else
        now)."""
        if cron_state.settle(self.state, job_id, status):  # it was still counted as running
            end = ended_at or workflow.now()
            self.slot_end = end if self.slot_end is None else max(self.slot_end, end)
        self.cancel_sent.discard(job_id)
        self._show()

    def _end(self) -> None:
        """The bounds are reached and nothing runs: the cron ends as done (the run loop
        returns, so its run completes)."""
        self.ended = cron_state.end_reason(self.spec, self.state)
        workflow.logger.info("cron %s: %s; done", self.spec.id, self.ended)
        workflow.upsert_search_attributes([JOB_STATUS.value_set(JobStatus.DONE.value)])
        self._show()

    def _set_paused(self, paused: bool) -> None:
        self.state.paused = paused
        status = JobStatus.PAUSED if paused else JobStatus.SCHEDULED
        workflow.upsert_search_attributes([JOB_STATUS.value_set(status.value)])
        self.controls_seen += 1

    def _resume(self) -> None:
        cron_state.skip_backlog(
            self.schedule, self.state, workflow.now(), "paused", "the cron was paused"
        )
        self.state.paused_until = None
        self.planned = None
        self._set_paused(False)

    def _when(self, moment: datetime) -> str:
        return moment_text(moment, self.spec.timezone)

    def _show(self) -> None:
        workflow.set_current_details(self.current_details())

    def current_details(self) -> str:
        return cron_state.details_text(
            self.schedule,
            self.state,
            workflow.now(),
            cancelled=self.cancelled,
            ended=self.ended,
            triggers=self.triggers,
            overlap_wait=self.overlap_wait,
            planned=self.planned[0] if self.planned else None,
        )

    def report(self) -> CronReport:
        return cron_state.report(
            self.schedule,
            self.state,
            workflow.now(),
            cancelled=self.cancelled,
            ended=self.ended,
            overlap_wait=self.overlap_wait,
        )

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
        controls.reject(self.state.audit, f"cron {self.spec.id}", reason, raw)
        self._show()

    # The waits: for a slot's start or fire time (one timer per slot, kept across wake-ups),
    # for a control, or for what a slot's end changes; and when a wait is over.

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

    def _overlapped(self, fire_at: datetime, slot: datetime) -> bool:
        """After a wait for the running slot's end: the slots due before that end get the
        overlap policy's outcome, as if decided at their time. True if ``slot`` was one."""
        waited, self.overlap_wait = self.overlap_wait, False
        ended = self.slot_end
        if not waited or self.state.running or ended is None or fire_at > ended:
            return False
        cron_state.decide_overlapped(self.schedule, self.state, ended)
        return True

    def _decide_overlapped_now(self) -> None:
        """Before a control changes what comes next (pause, update, cancel): the slots due so
        far during the running slot get their outcome now, as they would have at their time."""
        if self.overlap_wait and self.state.running:
            cron_state.decide_overlapped(self.schedule, self.state, workflow.now())

    async def _wait_for_slot(self, fire_at: datetime, label: str) -> None:
        """Wait for the slot's fire time or a change. The slot's timer outlives a wake-up (a
        control, a buffered slot starting): one timer per slot, not one per wait."""
        self._show()
        # A fired timer with its slot still ahead (a rounding of the server's clock) is
        # replaced, never waited on again.
        if self.slot_timer is None or self.slot_timer[0] != fire_at or self.slot_timer[1].done():
            self._drop_slot_timer()
            sleep = workflow.sleep(fire_at - workflow.now(), summary=clip_line(label) or None)
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
                self._changed_since(seen), timeout=timeout, timeout_summary=clip_line(label) or None
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

    # What the cron answers from outside: every message is checked by workflows/inbox.py; an
    # invalid signal is recorded as rejected, never fails the workflow.

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
        self.schedule = Schedule.of(self.spec.model_copy(update=updates))
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
        check_update(change, self.schedule, workflow.now())

    @workflow.update(name=names.UPDATE_BACKFILL)
    async def backfill(self, request: BackfillRequest) -> BackfillAnswer:
        """Queue every slot in [from, to] (within the bounds); the run loop starts them, each
        with its slot's usual id, so a slot that already has a job is not run twice. The
        slots are counted here, once (the validator only does the cheap checks: replay runs
        no validator, and one activation must stay well under the deadlock detector's 2 s);
        a range beyond the cap fails the update."""
        slots, overlap = backfill_plan(self.schedule, request)
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
        check_backfill(request, self.ended, len(self.state.backfills), workflow.now())

    @workflow.signal(name=names.SIGNAL_CANCEL_REQUESTED)
    def cancel_requested(self, *args: Any) -> None:
        """Who cancels the cron and why (see controls.accept_cancel)."""
        request = controls.accept_cancel(args, self._reject)
        if not isinstance(request, controls.Rejected):
            self.cancel_noted = True
            self._audit("cancel", request, "no further slots")

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
