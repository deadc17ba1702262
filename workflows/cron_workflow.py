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

Waits without a timer (:mod:`workflows.cron_waits`):
with no slot running, a slot's job starts up to 10 s before the slot's time and waits in its
worker like any pre-dispatched job, so a cron whose slots follow each other within 10 s needs
no timer at all; under ``skip`` / ``buffer_one`` a slot that comes due while another runs is
decided when that one ends, as it would have been at its time.

Zone and cron arithmetic is in :mod:`workflows.cronmath` (pure, passed through the sandbox),
always fed ``workflow.now()``.

The workflow is assembled from parts, each its own module: the shared state and how it shows
(:mod:`workflows.cron_core`), the waits (:mod:`workflows.cron_waits`), the queries, updates
and signals (:mod:`workflows.cron_controls`) and the pure rules (:mod:`workflows.cron_rules`);
this module holds the run loop and the slots.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import (
    ApplicationError,
    WorkflowAlreadyStartedError,
    is_cancelled_exception,
)
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    # "import a.b as b", not "from a import b": the latter bypasses the sandbox's import hook
    # and would load a fresh copy (with restricted ZoneInfo proxies) into every workflow run.
    import jobctl.workflows.cronmath as cronmath
    import jobctl.workflows.inbox as inbox
    from jobctl.workflows import names
    from jobctl.workflows.cron_controls import CronControls
    from jobctl.workflows.cron_rules import (
        BACKFILL_BATCH,
        bounded_next_slot,
        child_end,
        child_outcome,
        tick_spec,
        tick_summary,
    )
    from jobctl.workflows.job_rules import start_search_attributes
    from jobctl.workflows.models import (
        CronInput,
        CronState,
        JobStatus,
        SlotOutcome,
    )
    from jobctl.workflows.uitext import code, job_details

from jobctl.workflows.job_workflow import JobWorkflow

# The failure type of a cron whose schedule has no further slot.
NO_NEXT_SLOT = "CronHasNoNextSlot"


@workflow.defn(name=names.CRON_WORKFLOW)
class CronJobWorkflow(CronControls):
    @workflow.init
    def __init__(self, *args: Any) -> None:
        """Started with one CronInput (checked by inbox.start_arg: a bad input fails the
        workflow at once with InvalidWorkflowInput)."""
        start = inbox.start_arg(args, inbox.CRON_START, inbox.check_cron_start)
        self.spec = start.spec
        self.state = start.state.model_copy(deep=True)
        self.event_budget = start.event_budget
        # The run's own bookkeeping (not carried over): see CronCore for what each holds.
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
        self._load_schedule()
        self.overlap_wait = False
        self.slot_end = None
        # Here, not in run(): an update that reaches a new cron in its first workflow task
        # runs its handler before run() starts, and handlers read the last slot.
        if self.state.last_slot is None:
            self.state.last_slot = self._created()

    @workflow.run
    async def run(self, *args: Any) -> None:
        try:
            while self.ended is None:
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
            if self._runs_left() == 0:
                self._record(slot, "skipped", detail="max_runs reached")
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
        elif now >= start_at and self._lazy_overlap():
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
        return ApplicationError(message, type=NO_NEXT_SLOT, non_retryable=True)

    def _plan(self) -> tuple[datetime, datetime] | None:
        """The next slot and when to fire it (jitter drawn once per slot, deterministically);
        None when the bounds (``end``, ``max_runs``) allow no further slot."""
        assert self.state.last_slot is not None
        if self._runs_left() == 0:
            return None
        slot = bounded_next_slot(self.spec, self.cron, self.zone, self.state.last_slot)
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
            slot = self._next_slot(head.after)
            if slot is None or slot > head.to:
                self.state.backfills.pop(0)  # its range is done
                break
            slots.append(slot)
            head.after = slot
        await asyncio.gather(*(self._start(slot, "backfilled") for slot in slots))

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
                # Each child once: a cancel takes a while to settle (the handler
                # sees it within its cancel latency); a second request adds nothing, and the
                # test server fails the task for it.
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
                static_summary=tick_summary(tick, slot, self.cron.expression),
                static_details=job_details(
                    tick,
                    f"{outcome} slot {self._when(slot)} of cron job {code(self.spec.id)} "
                    f"({code(self.cron.expression)} in {self.spec.timezone})",
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
            self._record(slot, "duplicate", job_id, detail="a job for this slot already exists")
            return
        self.state.running[job_id] = slot
        self._record(slot, outcome, job_id, JobStatus.RUNNING)

    def _slot_memo(self, by_completion: bool) -> dict[str, str] | None:
        """A slot job's memo: unless a rotation waits, its completion is its report."""
        return {names.MEMO_SLOT_END: names.SLOT_END_BY_COMPLETION} if by_completion else None

    def _child_ended(self, job_id: str, task: asyncio.Future[Any]) -> None:
        """A child of this run completed (free: Temporal records it in this run's history)."""
        self.tracked.discard(job_id)
        self._slot_ended(job_id, child_outcome(task), child_end(task))

    def _snapshot(self) -> CronState:
        state = self.state.model_copy(update={"generation": self.state.generation + 1}, deep=True)
        for job_id in self.tracked:  # a forced rotation: the next run cannot hear their end
            state.running.pop(job_id, None)
        return state
