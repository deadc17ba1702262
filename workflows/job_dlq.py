"""The dead-letter path of ``JobWorkflow``: park a job whose round is exhausted, wait for a
requeue or discard (the job decides; :meth:`JobDlqPath._release` takes the request), tell the
DLQ what became of it, and tell a cron's slot how its job settled. Workflow code."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from temporalio import workflow
from temporalio.exceptions import ApplicationError, FailureError

import jobctl.workflows.inbox as inbox
import jobctl.workflows.jobstatus as js
from jobctl.workflows import names
from jobctl.workflows.job_core import JobCore
from jobctl.workflows.job_rules import DLQ_RETRY
from jobctl.workflows.models import (
    ControlRequest,
    DeadEntry,
    JobRelease,
    JobStatus,
    ReleaseRequest,
    SlotFinished,
)

Release = Literal["requeue", "discard"]


class JobDlqPath(JobCore):
    async def _park(self) -> None:
        """Dead: say so in visibility and the memo, then index it in the DLQ (which alerts)."""
        self.state.parked_at = workflow.now()
        self._set_status(JobStatus.DEAD)
        entry = DeadEntry(
            job_id=self.spec.id,
            name=self.spec.name,
            handler=self.spec.handler,
            attempts=len(self.state.attempts),
            last_error=self.state.last_error,
            parked_at=self.state.parked_at,
            round=self.state.round,
        )
        workflow.upsert_memo({names.MEMO_DLQ: entry.model_dump(mode="json")})
        summary = f"park in the dead-letter queue after {entry.attempts} attempt(s)"
        try:  # the DLQ runs (every park but the first): one signal
            dlq = workflow.get_external_workflow_handle(names.DLQ_WORKFLOW_ID)
            await dlq.signal(names.SIGNAL_PARK, entry)
        except FailureError:  # no DLQ yet (or it was terminated): signal-with-start it
            await self._tell_dlq(entry, summary)
        await self._tell_parent()

    async def _await_release(self) -> None:
        """Wait, parked, for a requeue or discard and apply it: a requeue returns with the next
        round's number set; a discard ends the run failed (``JobDiscarded``)."""
        await workflow.wait_condition(lambda: self.state.release_request is not None)
        # release_request stays set (so later requests are ignored) until the next round
        # starts and the status leaves dead in the same step.
        action = self.state.release_request
        assert action is not None
        workflow.upsert_memo({names.MEMO_DLQ: None})
        self.state.parked_at = None
        await self._report_release(action, applied=True)
        if action == "discard":
            self._list(JobStatus.DISCARDED)  # the run ends Failed: listings tell it by this
            self._show(JobStatus.DISCARDED)
            await workflow.wait_condition(workflow.all_handlers_finished)
            raise ApplicationError(
                f"discarded after {len(self.state.attempts)} attempts: {self.state.last_error}",
                type=js.DISCARDED_FAILURE,
                non_retryable=True,
            )
        self.state.round += 1
        self.state.release_request = None

    async def _tell_parent(self) -> None:
        """A cron's slot job reports how it settled (done, dead, cancelled) to its cron: by
        signal, unless the cron reads it from the child's completion (memo ``slot_end``); a
        parked job is still open, so its park, and its end after one, are signalled anyway."""
        parent = workflow.info().parent
        if parent is None:
            return
        slot_end = workflow.memo_value(names.MEMO_SLOT_END, None)
        by_completion = slot_end == names.SLOT_END_BY_COMPLETION
        state = self.state
        parked = state.status == JobStatus.DEAD or state.parked_at is not None or state.round > 1
        if by_completion and not parked:
            return
        report = SlotFinished(job_id=self.spec.id, status=state.status)
        try:
            await workflow.get_external_workflow_handle(parent.workflow_id).signal(
                names.SIGNAL_SLOT_FINISHED, report
            )
        except FailureError:  # the cron is gone (cancelled or finished): nobody to tell
            workflow.logger.info("cron %s is gone; not reporting %s", parent.workflow_id, report)

    async def _report_release(self, action: Release, applied: bool) -> None:
        """Tell the DLQ what a requeue or discard did (the index and log follow the job)."""
        by = self.state.release_by if applied else ControlRequest()
        release = JobRelease(
            job_id=self.spec.id,
            action=action,
            applied=applied,
            status=self.state.status,
            round=self.state.round,
            actor=by.actor,
            note=by.note,
        )
        outcome = "applied" if applied else f"ignored (job is {self.state.status})"
        try:  # one signal; a DLQ that is not running has no index or log to update
            await workflow.get_external_workflow_handle(names.DLQ_WORKFLOW_ID).signal(
                names.SIGNAL_JOB_RELEASED, release
            )
        except FailureError:
            workflow.logger.info("no dead-letter queue running; %s %s not logged", action, outcome)

    async def _tell_dlq(self, entry: DeadEntry, summary: str) -> None:
        """Park in a DLQ that is not running: an activity signals-with-start it."""
        await workflow.execute_activity(
            names.PARK_IN_DLQ,
            entry,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=DLQ_RETRY,
            summary=summary,
        )

    async def _release(self, action: Release, args: tuple[Any, ...]) -> None:
        """A requeue or discard sent to the job (by a person, or forwarded by the DLQ): taken
        when the job is dead and no other is under way; otherwise recorded as ignored."""
        try:
            request = inbox.signal_arg(args, inbox.JOB_RELEASE_ARG, action, optional=True)
        except inbox.Invalid as err:
            self._reject(str(err), args[0] if args else None)
            return
        if not isinstance(request, ReleaseRequest):
            request = ReleaseRequest(source=request)
        from_dlq = request.source == names.DLQ_WORKFLOW_ID
        via = " (via the dead-letter queue)" if from_dlq else ""
        state = self.state
        if state.status == JobStatus.DEAD and state.release_request is None:
            state.release_request = action
            state.release_by = ControlRequest(actor=request.actor, note=request.note)
            if action == "requeue":
                done = f"round {state.round + 1}: {self.spec.max_attempts} fresh attempt(s)"
            else:
                done = "dead for good"
            self._audit(action, request, done + via)
            return
        # Not dead (or already released): a no-op. A request forwarded by the DLQ gets an
        # answer so the DLQ's log says what happened.
        workflow.logger.warning("%s ignored: job %s is %s", action, self.spec.id, state.status)
        under_way = state.status == JobStatus.DEAD and state.release_request is not None
        why = f"a {state.release_request} is under way" if under_way else f"job is {state.status}"
        self._audit(action, request, f"ignored: {why}{via}")
        if from_dlq:
            await self._report_release(action, applied=False)
