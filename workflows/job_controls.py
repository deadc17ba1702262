"""What ``JobWorkflow`` answers from outside: the ``status`` query, the ``pause`` / ``resume`` /
``trigger`` updates (with their validators), and the ``cancel_requested``, ``requeue`` and
``discard`` signals. Every message is checked by :mod:`workflows.inbox`; an invalid signal is
recorded as rejected, never fails the workflow. Workflow code."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue

import jobctl.workflows.inbox as inbox
from jobctl.workflows import names
from jobctl.workflows.job_dlq import JobDlqPath
from jobctl.workflows.models import (
    JOB_RUN_AT,
    ControlRequest,
    JobReport,
    JobStatus,
    PauseRequest,
)
from jobctl.workflows.prestart_check import pause_cutoff


class JobControls(JobDlqPath):
    @workflow.query(name=names.QUERY_STATUS)
    def status(self) -> JobReport:
        return self.report()

    def _waiting_in_worker(self) -> bool:
        """Dispatched, but far enough from run_at that a pause still lands before the
        attempt's check (:func:`workflows.prestart_check.pause_cutoff`)."""
        until, since = self.state.dispatched_until, self.state.dispatched_at
        if until is None:
            return False
        wait = (until - since).total_seconds() if since is not None else 0.0
        return workflow.now() < until - timedelta(seconds=pause_cutoff(wait))

    @workflow.update(name=names.UPDATE_PAUSE)
    async def pause(self, request: PauseRequest) -> JobReport:
        # A dispatched attempt sees the paused status when it checks before run_at, and
        # withdraws without running the handler.
        self.state.paused_until = request.until
        self.state.controls_seen += 1
        self._audit(
            "pause", request, f"until {self._when(request.until)}" if request.until else None
        )
        self._set_status(JobStatus.PAUSED)
        return self.report()

    @pause.validator
    def _check_pause(self, request: PauseRequest) -> None:
        state = self.state
        waiting = state.status in (JobStatus.SCHEDULED, JobStatus.PAUSED) and not state.triggered
        if not (waiting or self._waiting_in_worker()):
            raise ValueError(f"cannot pause: job is {state.status}; only a waiting job pauses")
        inbox.check_until(request.until, workflow.now())
        inbox.check_request(request)

    @workflow.update(name=names.UPDATE_RESUME)
    async def resume(self, request: ControlRequest | None = None) -> JobReport:
        self._audit("resume", request)
        self._resume()
        return self.report()

    @resume.validator
    def _check_resume(self, request: ControlRequest | None = None) -> None:
        if self.state.status != JobStatus.PAUSED:
            raise ValueError(f"cannot resume: job is {self.state.status}, not paused")
        inbox.check_request(request)

    @workflow.update(name=names.UPDATE_TRIGGER)
    async def trigger(self, request: ControlRequest | None = None) -> JobReport:
        self.state.triggered = True
        self.state.paused_until = None
        self.state.controls_seen += 1
        # Listings tell a due job by its JobRunAt: this one is due now.
        workflow.upsert_search_attributes([JOB_RUN_AT.value_set(workflow.now())])
        self._audit("trigger", request, "runs now")
        return self.report()

    @trigger.validator
    def _check_trigger(self, request: ControlRequest | None = None) -> None:
        state = self.state
        if state.dispatched_until is not None:
            raise ValueError(
                "cannot trigger: the job is already with a worker and starts at its run_at"
            )
        if state.status not in (JobStatus.SCHEDULED, JobStatus.PAUSED) or state.triggered:
            raise ValueError(f"cannot trigger: job is {state.status}; it is not waiting to run")
        inbox.check_request(request)

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
        self.state.cancel_noted = True
        self._audit("cancel", checked)

    @workflow.signal(name=names.SIGNAL_REQUEUE)
    async def requeue(self, *args: Any) -> None:
        """Run a dead job again with a fresh attempt budget. Ignored unless dead.

        Takes a ReleaseRequest (who and why), or the older shapes: nothing, or the source."""
        await self._release("requeue", args)

    @workflow.signal(name=names.SIGNAL_DISCARD)
    async def discard(self, *args: Any) -> None:
        """End a dead job for good. Ignored unless dead."""
        await self._release("discard", args)

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """A signal this workflow does not define: recorded and dropped."""
        self._reject(inbox.unknown_signal(name))
