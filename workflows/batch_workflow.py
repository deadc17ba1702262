"""``BatchWorkflow``: a group of one-shot jobs, counted as they settle; its callback jobs
(``on_complete``, ``on_success``) start once, when every member has settled.

Workflow id ``batch/<batch id>``. Each member is a ``JobWorkflow`` child with the member's
job id (ABANDON: a member outlives its batch, as a dead member stays parked). A member reports
every settlement by the ``slot_finished`` signal, sent to the batch's workflow id (the cron's
path: ``JobWorkflow._tell_parent``; a batch member carries no ``slot_end`` memo, so it always
signals): done, dead (when it parks), cancelled, and again after a requeue. Signals reach
whichever run is current, so the batch continues-as-new freely (beyond its event budget, or
when Temporal suggests it), carrying its :class:`BatchState` and the members not yet started.

Exactly once: a callback is a child with a fixed id (``<batch id>.on_complete`` unless the
spec names one), started in the batch's last run, which completes right after: the start
command is in the history once, replays never issue it again, and Temporal refuses a second
workflow with that id (REJECT_DUPLICATE) whatever happens.

Cancel (the ``cancel`` update, or Temporal's cancellation of the batch workflow): members
not started yet never start (counted cancelled); each started, unsettled member is cancelled;
their reports settle the batch and the callbacks run with them counted.

Decisions are pure functions in :mod:`workflows.batch_rules`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError, is_cancelled_exception
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    import jobctl.workflows.batch_rules as rules
    import jobctl.workflows.inbox as inbox
    from jobctl.workflows import names
    from jobctl.workflows.job_rules import start_search_attributes
    from jobctl.workflows.models import ControlRequest, JobSpec, JobStatus
    from jobctl.workflows.models.batch import (
        NOT_STARTED,
        BatchCallback,
        BatchInput,
        BatchReport,
        BatchState,
        CallbackRecord,
    )
    from jobctl.workflows.textclip import clip_line
    from jobctl.workflows.uitext import job_details, job_summary


@workflow.defn(name=names.BATCH_WORKFLOW)
class BatchWorkflow:
    batch_id: str
    pending: list[dict[str, Any]]  # members not started yet, in order
    callbacks: dict[str, BatchCallback]
    state: BatchState  # carried across continue-as-new
    event_budget: int
    changed: int  # bumps on every report or control, so a wait re-evaluates
    busy: asyncio.Future[None] | None  # the step in flight (shielded from cancellation)
    finished: bool

    @workflow.init
    def __init__(self, *args: Any) -> None:
        """Started with one BatchInput (a bad one fails the workflow at once)."""
        start = inbox.start_arg(args, rules.BATCH_START, rules.check_start)
        self.batch_id = start.batch_id
        self.pending = list(start.pending)
        self.callbacks = rules.callbacks_of(start)
        self.state = start.state.model_copy(deep=True)
        self.event_budget = start.event_budget
        self.changed = 0
        self.busy = None
        self.finished = False
        for name, callback in self.callbacks.items():
            self.state.callbacks.setdefault(name, CallbackRecord(job_id=callback.job_id))
        if self.state.created_at is None:
            self.state.created_at = workflow.info().workflow_start_time

    @workflow.run
    async def run(self, *args: Any) -> BatchReport:
        while not self.finished:
            try:
                # One step at a time, shielded: a cancellation of the batch's workflow never
                # interrupts a wave of starts half way; it becomes a cancel of the batch.
                if self.busy is None or self.busy.done():
                    self.busy = asyncio.ensure_future(self._step())
                await asyncio.shield(self.busy)
            except BaseException as err:
                if not is_cancelled_exception(err) or self.state.completed_at is not None:
                    raise
                self._cancel(ControlRequest(note="the batch's workflow was cancelled"))
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self.report()

    async def _step(self) -> None:
        """Start the next wave of members, cancel them, wait for reports, or, once every
        member has settled, start the callbacks and finish."""
        state = self.state
        self._show()
        if self.pending and state.cancel is None:
            await self._rotate_if_due()
            await self._start_wave()
        elif self.pending:
            self.pending.clear()
            rules.drop_unstarted(state)
        elif state.cancel is not None and not state.cancel_sent:
            await self._cancel_members()
        elif not rules.all_settled(state):
            await self._rotate_if_due()
            seen = self.changed
            await workflow.wait_condition(
                lambda: self.changed != seen or self._time_to_rotate(),
                timeout_summary="wait for members to settle",
            )
        else:
            await self._start_callbacks()
            state.completed_at = workflow.now()
            self.finished = True
            self._show()

    # -- members -------------------------------------------------------------------------------

    async def _start_wave(self) -> None:
        wave, self.pending = self.pending[: rules.WAVE], self.pending[rules.WAVE :]
        await asyncio.gather(*(self._start_member(raw) for raw in wave))

    async def _start_member(self, raw: dict[str, Any]) -> None:
        spec = rules.check_member_spec(raw)
        # Counted as started before the start returns: its report may come in the same
        # activation as the start's answer, and must not be taken for a forged one.
        self.state.started += 1
        if not await self._start_job(raw, spec, f"member of batch {self.batch_id}"):
            workflow.logger.warning("batch %s: member id %s is taken", self.batch_id, spec.id)
            rules.settle(self.state, spec.id, NOT_STARTED)
            self.changed += 1

    async def _cancel_members(self) -> None:
        """Ask every started, unsettled member to cancel (once; their reports follow)."""
        targets = rules.unsettled_started(self.state)
        self.state.cancel_sent = True
        for first in range(0, len(targets), rules.WAVE):
            wave = targets[first : first + rules.WAVE]
            await asyncio.gather(*(self._cancel_member(job_id) for job_id in wave))

    async def _cancel_member(self, job_id: str) -> None:
        with contextlib.suppress(Exception):  # it ended meanwhile: its report says how
            await workflow.get_external_workflow_handle(job_id).cancel()

    # -- callbacks -------------------------------------------------------------------------------

    async def _start_callbacks(self) -> None:
        summary = rules.summary(self.batch_id, self.state)
        for name, callback in self.callbacks.items():
            record = self.state.callbacks[name]
            if record.state != "waiting":
                continue
            if name == "on_success" and not summary["succeeded"]:
                record.state = "skipped"
                continue
            await self._start_callback(name, callback, record, summary)

    async def _start_callback(
        self,
        name: str,
        callback: BatchCallback,
        record: CallbackRecord,
        summary: dict[str, Any],
    ) -> None:
        raw = rules.callback_spec(callback, summary, workflow.now())
        try:
            spec = rules.check_member_spec(raw)
        except ValueError as err:  # the door checks it; a batch started by hand may not
            workflow.logger.error("batch %s: %s is invalid: %s", self.batch_id, name, err)
            record.state = "invalid"
            return
        if await self._start_job(raw, spec, f"{name} callback of batch {self.batch_id}"):
            record.state = "started"
            record.started_at = workflow.now()
        else:
            workflow.logger.error("batch %s: %s id %s is taken", self.batch_id, name, spec.id)
            record.state = "id_taken"

    async def _start_job(self, raw: dict[str, Any], spec: JobSpec, role: str) -> bool:
        """Start a member or callback as a JobWorkflow child; False if its id is taken."""
        try:
            await workflow.start_child_workflow(
                names.JOB_WORKFLOW,
                raw,
                id=spec.id,
                task_queue=workflow.info().task_queue,
                parent_close_policy=ParentClosePolicy.ABANDON,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                search_attributes=start_search_attributes(spec, JobStatus.SCHEDULED),
                static_summary=job_summary(spec),
                static_details=job_details(spec, role),
            )
        except WorkflowAlreadyStartedError:
            return False
        return True

    # -- continue-as-new -------------------------------------------------------------------------

    def _time_to_rotate(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() > self.event_budget
        )

    async def _rotate_if_due(self) -> None:
        if not self._time_to_rotate():
            return
        await workflow.wait_condition(workflow.all_handlers_finished)
        carried = self.state.model_copy(update={"generation": self.state.generation + 1})
        workflow.continue_as_new(
            BatchInput(
                batch_id=self.batch_id,
                pending=self.pending,
                on_complete=self.callbacks.get("on_complete"),
                on_success=self.callbacks.get("on_success"),
                state=carried,
                event_budget=self.event_budget,
            )
        )

    # -- state and how it shows --------------------------------------------------------------

    def report(self) -> BatchReport:
        return rules.report(self.batch_id, self.state)

    def _show(self) -> None:
        workflow.set_current_details(rules.details_text(self.batch_id, self.state))

    def _cancel(self, request: ControlRequest | None) -> None:
        if self.state.cancel is None:
            self.state.cancel = rules.cancel_mark(request, workflow.now())
            self.changed += 1

    def _reject(self, reason: str) -> None:
        if self.state.rejected == 0:  # the first of a flood is logged; all are counted
            workflow.logger.warning("batch %s: %s", self.batch_id, clip_line(reason))
        rules.reject(self.state, reason)

    # -- what the batch answers from outside (every input checked; a bad signal is counted and
    # dropped, a bad update refused) --------------------------------------------------------

    @workflow.query(name=names.QUERY_STATUS)
    def status(self) -> BatchReport:
        return self.report()

    @workflow.update(name=names.UPDATE_CANCEL)
    async def cancel(self, request: ControlRequest | None = None) -> BatchReport:
        """Cancel every unsettled member (a second cancel changes nothing)."""
        self._cancel(request)
        return self.report()

    @cancel.validator
    def _check_cancel(self, request: ControlRequest | None = None) -> None:
        if self.state.completed_at is not None or self.finished:
            raise ValueError("cannot cancel: every member has settled and the callbacks ran")
        inbox.check_request(request)

    @workflow.signal(name=names.SIGNAL_SLOT_FINISHED)
    def slot_finished(self, *args: Any) -> None:
        """A member's settlement (done, dead, cancelled), sent by its JobWorkflow."""
        callback_ids = {record.job_id for record in self.state.callbacks.values()}
        try:
            settled = rules.accept_report(self.state, args, callback_ids)
        except inbox.Invalid as err:
            self._reject(str(err))
            return
        if settled is None:
            return
        if self.state.completed_at is not None:
            self._reject(f"{settled[0]} reported {settled[1]} after the batch completed: ignored")
            return
        rules.settle(self.state, *settled)
        self.changed += 1

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        self._reject(inbox.unknown_signal(name))
