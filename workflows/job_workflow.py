"""``JobWorkflow``: one delayed job, from its durable wait to done, dead or cancelled.

Cheapest correct shape (see README, "Server work per job"): the starter passes ``start_delay``
so no workflow task runs until the job is due; the first task schedules ``run_job``. Retries
are the activity's RetryPolicy, so a failed attempt costs the workflow nothing. An update
(pause, trigger, ...) wakes a delayed workflow early; from then on the wait is a timer raced
against the controls.

Visibility carries ``JobStatus`` only where a listing must filter on it (:func:`listed_status`):
``scheduled`` from the start, ``paused``, ``dead`` and ``discarded``. Running, done and
cancelled are Temporal's own state (a started pending activity, the execution status).

The workflow is assembled from parts, each its own module: the shared state and how it shows
(:mod:`workflows.job_core`), the dead-letter path (:mod:`workflows.job_dlq`), the queries,
updates and signals (:mod:`workflows.job_controls`) and the pure rules
(:mod:`workflows.job_rules`); this module holds the run loop and the attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.common import Priority
from temporalio.exceptions import ActivityError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    import jobctl.workflows.inbox as inbox
    from jobctl.workflows import names
    from jobctl.workflows.durations import format_duration
    from jobctl.workflows.job_controls import JobControls
    from jobctl.workflows.job_permit import JobPermit, Outcome
    from jobctl.workflows.job_rules import (
        LOST_LEASE,
        LOST_LEASE_TYPE,
        READ_LOG_RETRY,
        READ_LOG_TIMEOUT,
        activity_priority,
        attempt_allowance,
        attempts_from_failure,
        failure_message,
        retry_policy,
    )
    from jobctl.workflows.models import (
        AttemptRecord,
        HeartbeatState,
        JobReport,
        JobState,
        JobStatus,
        RunJobInput,
        RunJobResult,
    )
    from jobctl.workflows.uitext import clip


@workflow.defn(name=names.JOB_WORKFLOW)
class JobWorkflow(JobControls, JobPermit):
    @workflow.init
    def __init__(self, *args: Any) -> None:
        """Started with one JobSpec (checked by inbox.start_arg: a bad input fails the
        workflow at once with InvalidWorkflowInput)."""
        self.spec = inbox.start_arg(args, inbox.JOB_START, inbox.check_job_start)
        self.state = JobState()

    @workflow.run
    async def run(self, *args: Any) -> JobReport:
        assert self.spec.run_at is not None  # inbox.check_job_start
        try:
            inbox.check_due(self.spec.run_at, workflow.now(), "run_at")
        except inbox.Invalid as err:
            raise inbox.invalid_start(str(err)) from None
        self._ensure_search_attributes()
        self._show()
        try:
            outcome: Outcome = "withdrawn"
            while outcome == "withdrawn":  # paused while dispatched: wait again
                await self._wait_until_due()
                outcome = await self._permitted_round()
            while outcome == "exhausted":
                await self._park()
                await self._await_release()  # a discard ends the run here
                outcome = await self._permitted_round()
        except BaseException as err:
            if is_cancelled_exception(err):
                self._note_cancellation(self.state.cancel_detail)
                self._set_status(JobStatus.CANCELLED)
                await self._tell_parent()
            raise
        self._set_status(JobStatus.DONE)
        await self._tell_parent()
        # A handler may still be answering the DLQ about an ignored request.
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self.report()

    async def _wait_until_due(self) -> None:
        """Sleep until the job may be dispatched (``dispatch_lead`` before run_at), honouring
        pause (with or without an end), resume and trigger."""
        run_at = self.spec.run_at
        assert run_at is not None, "one-shot jobs always carry run_at"
        lead = timedelta(seconds=self.spec.dispatch_lead)
        state = self.state
        while not state.triggered:
            now = workflow.now()
            if state.status == JobStatus.PAUSED:
                if state.paused_until is not None and now >= state.paused_until:
                    self._resume()
                    continue
                wake_at = state.paused_until
            elif now >= run_at - lead:
                return
            else:
                wake_at = run_at - lead
            seen = state.controls_seen
            timeout = (wake_at - now) if wake_at is not None else None
            if state.status == JobStatus.PAUSED:
                label = f"paused until {self._when(wake_at)}"
            else:
                before = f"{format_duration(lead.total_seconds())} before " if lead else ""
                label = f"wait until {before}run_at {self._when(run_at)}"
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    self._controls_changed_since(seen), timeout=timeout, timeout_summary=label
                )

    def _controls_changed_since(self, seen: int) -> Callable[[], bool]:
        return lambda: self.state.controls_seen != seen

    async def _run_round(self) -> Outcome:
        """One budget of attempts: done, exhausted, or withdrawn (paused while dispatched)."""
        self._set_status(JobStatus.RUNNING)
        run_at = self.spec.run_at
        # Hand it to a worker now and let it wait there for run_at (the server's herd work
        # is spread over the lead window); a triggered or late job runs at once.
        not_before = None
        if run_at is not None and run_at > workflow.now() and not self.state.triggered:
            not_before = run_at
        first_record = len(self.state.attempts)
        executions = 0
        while True:
            executions += 1
            activity_id = f"round-{self.state.round}" + (f"-{executions}" if executions > 1 else "")
            attempt = self._start_attempt(first_record, not_before, activity_id)
            try:
                outcome = await self._settle(attempt, activity_id)
            except ActivityError as err:
                if is_cancelled_exception(err):
                    raise
                self.state.attempts.extend(attempts_from_failure(err, workflow.now()))
                self.state.last_error = failure_message(err, self.spec)
                return "exhausted"
            finally:
                self.state.dispatched_until = self.state.dispatched_at = None
            if outcome.cancelled or workflow.cancellation_reason() is not None:
                self._cancel_met(outcome)  # the workflow was cancelled; the record is kept
            self.state.attempts.extend(outcome.attempts)
            if outcome.withdrawn:
                return "withdrawn"
            if outcome.handed_over:
                continue  # a clean shutdown gave it back: run it again now, same budget
            self.state.result = outcome.result
            return "done"

    def _start_attempt(
        self, first_record: int, not_before: datetime | None, activity_id: str
    ) -> workflow.ActivityHandle[RunJobResult]:
        """Schedule ``run_job`` for what remains of the round's budget (attempts from
        ``first_record`` on belong to this round)."""
        state = self.state
        spent = sum(a.spent for a in state.attempts[first_record:])
        job = RunJobInput(
            spec=self.spec,
            round=state.round,
            attempt_offset=len(state.attempts),
            spent=spent,
            not_before=not_before,
        )
        state.dispatched_until = not_before
        state.dispatched_at = workflow.now() if not_before is not None else None
        self._show()
        first, last = job.spent + 1, self.spec.max_attempts
        tries = f"attempt {first}" if first == last else f"attempts {first}-{last}"
        return workflow.start_activity(
            names.RUN_JOB,
            job,
            summary=clip(f"{self.spec.handler} · round {state.round} · {tries} of {last}"),
            result_type=RunJobResult,
            activity_id=activity_id,
            # Only workers serving the handler poll its queue; none within handler_wait:
            # a non-retryable SCHEDULE_TO_START timeout ends the round (failure_message).
            task_queue=names.handler_task_queue(workflow.info().task_queue, self.spec.handler),
            schedule_to_start_timeout=timedelta(seconds=self.spec.handler_wait),
            start_to_close_timeout=attempt_allowance(self.spec),
            heartbeat_timeout=timedelta(seconds=self.spec.lease),
            retry_policy=retry_policy(self.spec, job.budget),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            priority=activity_priority(self.spec) or Priority.default,
        )

    async def _settle(
        self, attempt: workflow.ActivityHandle[RunJobResult], activity_id: str
    ) -> RunJobResult:
        """The attempt's outcome. The attempt is shielded from the workflow's cancellation,
        which then reads the round's attempt log first (lean runs), cancels the attempt and
        waits for it: a running attempt answers with its own record, while one waiting out
        a retry backoff ends without any, and the log read first is what remains of it."""
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            if attempt.done():
                # Cancelled in the very task that brought the attempt's end: keep its record.
                if attempt.cancelled() or attempt.exception() is not None:
                    raise
                self._cancel_met(attempt.result())
        live = await self._read_attempt_log(activity_id)
        attempt.cancel()
        try:
            outcome = await attempt
        except ActivityError as err:
            if is_cancelled_exception(err):
                self.state.attempts.extend(live)
            else:  # the round ended otherwise while the cancel was on its way (a retry
                # failure carries no log: then the log read first is what remains)
                self.state.attempts.extend(attempts_from_failure(err, workflow.now()) or live)
                self.state.last_error = failure_message(err, self.spec)
            raise asyncio.CancelledError() from None
        self._cancel_met(outcome)

    async def _read_attempt_log(self, activity_id: str) -> list[AttemptRecord]:
        """The round's attempts as the pending activity's heartbeat details hold them now (an
        attempt that never reported its end was lost), or none if they cannot be read."""
        try:
            state: HeartbeatState | None = await workflow.execute_local_activity(
                names.READ_ATTEMPT_LOG,
                activity_id,
                result_type=HeartbeatState,
                start_to_close_timeout=READ_LOG_TIMEOUT,
                retry_policy=READ_LOG_RETRY,
                summary="read the attempt log before cancelling the attempt",
            )
        except ActivityError as err:
            workflow.logger.warning("job %s: attempt log unreadable: %s", self.spec.id, err)
            return []
        if state is None:
            return []
        state.close_dangling(workflow.now(), LOST_LEASE, LOST_LEASE_TYPE)
        return state.attempts

    def _cancel_met(self, outcome: RunJobResult) -> NoReturn:
        """End the round cancelled, keeping the attempt's record. An attempt that ended
        otherwise while the cancel was on its way (its handler finished first, say) does not
        beat the cancel: the job still ends cancelled, with a finished handler's result kept
        and the audit trail saying so."""
        self.state.attempts.extend(outcome.attempts)
        if not (outcome.cancelled or outcome.withdrawn or outcome.handed_over):
            self.state.result = outcome.result
            self.state.cancel_detail = "arrived after the handler had finished; its result is kept"
        raise asyncio.CancelledError()
