"""``JobWorkflow``: one delayed job, from its durable wait to done, dead or cancelled.

Cheapest correct shape (see README, "Server work per job"): the starter passes ``start_delay``
so no workflow task runs until the job is due; the first task schedules ``run_job``. Retries
are the activity's RetryPolicy, so a failed attempt costs the workflow nothing. An update
(pause, trigger, ...) wakes a delayed workflow early; from then on the wait is a timer raced
against the controls.

Visibility carries ``JobStatus`` only where a listing must filter on it (:func:`listed_status`):
``scheduled`` from the start, ``paused``, ``dead`` and ``discarded``. Running, done and
cancelled are Temporal's own state (a started pending activity, the execution status); runs
started before the ``lean-status`` patch still upsert them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal, NoReturn

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    FailureError,
    TimeoutType,
    is_cancelled_exception,
)
from temporalio.exceptions import TimeoutError as ActivityTimeoutError

with workflow.unsafe.imports_passed_through():
    import workflows.inbox as inbox
    import workflows.jobstatus as js
    from workflows.durations import format_duration
    from workflows.live_attempts import READ_ATTEMPT_LOG
    from workflows.models import (
        CONTROL_CUTOFF,
        DLQ_MEMO_KEY,
        DLQ_WORKFLOW_ID,
        JOB_HANDLER,
        JOB_NAME,
        JOB_RUN_AT,
        JOB_STATUS,
        LEAN_SHAPE,
        SHAPE_MEMO_KEY,
        AttemptRecord,
        AuditAction,
        AuditEntry,
        ControlRequest,
        DeadEntry,
        HeartbeatState,
        JobRelease,
        JobReport,
        JobSpec,
        JobStatus,
        PauseRequest,
        ReleaseRequest,
        RunJobInput,
        RunJobResult,
        SlotFinished,
        append_audit,
    )
    from workflows.uitext import ERROR_BYTES, audit_details, clip, code, moment_text

RUN_JOB = "run_job"
# Attempts lost before their handler started (a worker or the server died while the job
# waited for run_at) cost the job nothing; Temporal's policy keeps this many in reserve.
RESERVE_ATTEMPTS = 3
# How long a dispatched attempt may wait in a busy worker for a free handler slot.
HANDLER_SLOT_WAIT = timedelta(minutes=10)
PARK_IN_DLQ = "park_in_dlq"
REPORT_TO_DLQ = "report_to_dlq"
# Set by a cron on the slot jobs whose completion it reads: they send ``slot_finished`` only
# when they park, and for how they end after a park (see workflows/cron_workflow.py).
SLOT_END_MEMO_KEY = "slot_end"
SLOT_END_BY_COMPLETION = "completion"
# Reaching the DLQ must not fail the job: keep trying, at most every 30 s.
DLQ_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=30))
# A cancel accepted while an attempt ran ends the job cancelled even when the attempt ended
# otherwise (its handler finished first): before this patch such a job went on to done.
CANCEL_WINS_PATCH = "cancel-wins-over-a-finished-attempt"
# Runs under this patch upsert JobStatus only where visibility must filter on it (see
# listed_status), and a cancel reads the round's attempt log from the pending activity before
# cancelling it (a cancel during a retry backoff used to lose the attempts). Before it every
# state (running, done, cancelled too) was upserted. One patch id for all of issue 14's new
# command sequences: each id a run uses costs it an upsert of TemporalChangeVersion.
LEAN_STATUS_PATCH = "lean-status"
# The cancel path's one look at the pending activity; a cancel never waits long for it.
READ_LOG_TIMEOUT = timedelta(seconds=10)
READ_LOG_RETRY = RetryPolicy(maximum_attempts=3)
# A lost attempt's record, as attempts_from_failure closes one after a heartbeat timeout.
LOST_LEASE = "lease lost: no heartbeat within the lease"


def start_search_attributes(spec: JobSpec, status: JobStatus) -> TypedSearchAttributes:
    """The search attributes a job carries from its start (set by whoever starts it)."""
    pairs: list[SearchAttributePair[Any]] = [
        SearchAttributePair(JOB_STATUS, status.value),
        SearchAttributePair(JOB_NAME, spec.name),
        SearchAttributePair(JOB_HANDLER, spec.handler),
    ]
    if spec.run_at is not None:
        pairs.append(SearchAttributePair(JOB_RUN_AT, spec.run_at))
    return TypedSearchAttributes(pairs)


def retry_policy(spec: JobSpec, budget: int) -> RetryPolicy:
    """Temporal drives the retries: the round's ``budget`` of attempts plus a few in reserve for
    attempts lost before their handler started (the activity itself refuses to run the handler
    more than ``max_attempts`` times). The activity supplies each jittered delay; these
    intervals (the same formula without jitter) apply only when an attempt is lost."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=spec.backoff_base),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=spec.backoff_max),
        maximum_attempts=budget + RESERVE_ATTEMPTS,
    )


def budget_of_policy(maximum_attempts: int) -> int | None:
    """The round's attempt budget read back from a ``retry_policy`` it made (for readers with
    no query: the board), or None when the policy is not one of ours."""
    budget = maximum_attempts - RESERVE_ATTEMPTS
    return budget if budget > 0 else None


def attempt_allowance(spec: JobSpec) -> timedelta:
    """Start-to-close of one attempt: waiting for run_at and for a free handler slot, then the
    handler's own ``timeout`` (which the activity enforces)."""
    return timedelta(seconds=spec.dispatch_lead + spec.timeout) + HANDLER_SLOT_WAIT


def attempts_from_failure(err: ActivityError, now: datetime) -> list[AttemptRecord]:
    """Recover the round's attempt log from the activity's final failure."""
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.details:
        return HeartbeatState.model_validate(cause.details[0]).attempts
    if isinstance(cause, ActivityTimeoutError) and cause.last_heartbeat_details:
        state = HeartbeatState.model_validate(cause.last_heartbeat_details[0])
        if cause.type == TimeoutType.HEARTBEAT:
            state.close_dangling(now, LOST_LEASE, "LeaseExpired")
        else:
            kind = cause.type.name if cause.type else "unknown"
            state.close_dangling(now, f"attempt timed out ({kind})", "AttemptTimeout")
        return state.attempts
    return []


def listed_status(status: JobStatus) -> JobStatus | None:
    """What visibility's ``JobStatus`` says for a job in ``status`` (lean runs): only what a
    listing filters on. Running is still ``scheduled`` there (Temporal's pending activity says
    more); done and cancelled are not written (the execution status says them): None."""
    if status in (JobStatus.DONE, JobStatus.CANCELLED):
        return None
    if status == JobStatus.RUNNING:
        return JobStatus.SCHEDULED
    return status


def failure_message(err: ActivityError) -> str:
    cause = err.cause
    if isinstance(cause, ActivityTimeoutError) and cause.type is not None:
        return f"{cause.type.name.lower().replace('_', '-')} timeout"
    return str(cause or err)


def unnoted_cancellation(already_noted: bool) -> ControlRequest | None:
    """A cancellation that came without our ``cancel_requested`` signal first (e.g. ``temporal
    workflow cancel --reason ...``): its reason, if any, as the trail's note."""
    reason = workflow.cancellation_reason()
    return ControlRequest(note=reason) if reason and not already_noted else None


@workflow.defn(name="JobWorkflow")
class JobWorkflow:
    @workflow.init
    def __init__(self, *args: Any) -> None:
        """Started with one JobSpec (checked by inbox.start_arg: a bad input fails the
        workflow at once with InvalidWorkflowInput)."""
        self.spec = inbox.start_arg(args, inbox.JOB_START, inbox.check_job_start)
        self.state = JobStatus.SCHEDULED
        self.listed = JobStatus.SCHEDULED  # the JobStatus search attribute, as last written
        self.lean: bool | None = None  # LEAN_STATUS_PATCH, decided once
        self.paused_until: datetime | None = None
        self.triggered = False
        self.dispatched_until: datetime | None = None  # run_at of an attempt waiting in a worker
        self.controls_seen = 0  # bumps on every control so a wait re-evaluates
        self.round = 1
        self.attempts: list[AttemptRecord] = []
        self.result: Any = None
        self.last_error: str | None = None
        self.release_request: Literal["requeue", "discard"] | None = None
        self.release_by: ControlRequest = ControlRequest()  # who asked for it, and why
        self.parked_at: datetime | None = None
        self.audit: list[AuditEntry] = []  # operator actions, oldest first
        self.cancel_noted = False  # the cancel_requested signal recorded who and why
        self.cancel_detail: str | None = None  # how a cancel met the running attempt

    @workflow.run
    async def run(self, *args: Any) -> JobReport:
        assert self.spec.run_at is not None  # inbox.check_job_start
        try:
            inbox.check_due(self.spec.run_at, workflow.now(), "run_at")
        except inbox.Invalid as err:
            raise inbox.invalid_start(str(err)) from None
        self._lean_status()
        self._ensure_search_attributes()
        self._show()
        try:
            outcome = "withdrawn"
            while outcome == "withdrawn":  # paused while dispatched: wait again
                await self._wait_until_due()
                outcome = await self._run_round()
            while outcome == "exhausted":
                await self._park()
                await workflow.wait_condition(lambda: self.release_request is not None)
                # release_request stays set (so later requests are ignored) until the next
                # round starts and the status leaves dead in the same step.
                action = self.release_request
                assert action is not None
                workflow.upsert_memo({DLQ_MEMO_KEY: None})
                self.parked_at = None
                await self._report_release(action, applied=True)
                if action == "discard":
                    if self._lean_status():  # the run ends Failed: listings tell it by this
                        self._list(JobStatus.DISCARDED)
                    self._show("discarded")
                    await workflow.wait_condition(workflow.all_handlers_finished)
                    raise ApplicationError(
                        f"discarded after {len(self.attempts)} attempts: {self.last_error}",
                        type="JobDiscarded",
                        non_retryable=True,
                    )
                self.round += 1
                self.release_request = None
                outcome = await self._run_round()
        except BaseException as err:
            if is_cancelled_exception(err):
                self._note_cancellation(self.cancel_detail)
                self._set_status(JobStatus.CANCELLED)
                await self._tell_parent()
            raise
        self._set_status(JobStatus.DONE)
        await self._tell_parent()
        # A handler may still be answering the DLQ about an ignored request.
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self.report()

    async def _park(self) -> None:
        """Dead: say so in visibility and the memo, then index it in the DLQ (which alerts)."""
        self.parked_at = workflow.now()
        self._set_status(JobStatus.DEAD)
        entry = DeadEntry(
            job_id=self.spec.id,
            name=self.spec.name,
            handler=self.spec.handler,
            attempts=len(self.attempts),
            last_error=self.last_error,
            parked_at=self.parked_at,
            round=self.round,
        )
        workflow.upsert_memo({DLQ_MEMO_KEY: entry.model_dump(mode="json")})
        summary = f"park in the dead-letter queue after {entry.attempts} attempt(s)"
        # Runs under LEAN_STATUS_PATCH reach a running DLQ by one signal (older runs used the
        # activity every time). One patch for both: each patch id a run uses costs it an
        # upsert of TemporalChangeVersion.
        if self._lean_status():
            try:  # the DLQ runs (every park but the first): one signal
                await workflow.get_external_workflow_handle(DLQ_WORKFLOW_ID).signal("park", entry)
            except FailureError:  # no DLQ yet (or it was terminated): signal-with-start it
                await self._tell_dlq(PARK_IN_DLQ, entry, summary)
        else:
            await self._tell_dlq(PARK_IN_DLQ, entry, summary)
        await self._tell_parent()

    async def _tell_parent(self) -> None:
        """A cron's slot job reports how it settled (done, dead, cancelled) to its cron: by
        signal, unless the cron reads it from the child's completion (memo ``slot_end``); a
        parked job is still open, so its park, and its end after one, are signalled anyway."""
        parent = workflow.info().parent
        if parent is None:
            return
        by_completion = workflow.memo_value(SLOT_END_MEMO_KEY, None) == SLOT_END_BY_COMPLETION
        parked = self.state == JobStatus.DEAD or self.parked_at is not None or self.round > 1
        if by_completion and not parked:
            return
        report = SlotFinished(job_id=self.spec.id, status=self.state)
        try:
            await workflow.get_external_workflow_handle(parent.workflow_id).signal(
                "slot_finished", report
            )
        except FailureError:  # the cron is gone (cancelled or finished): nobody to tell
            workflow.logger.info("cron %s is gone; not reporting %s", parent.workflow_id, report)

    async def _report_release(self, action: Literal["requeue", "discard"], applied: bool) -> None:
        """Tell the DLQ what a requeue or discard did (the index and log follow the job)."""
        by = self.release_by if applied else ControlRequest()
        release = JobRelease(
            job_id=self.spec.id,
            action=action,
            applied=applied,
            status=self.state,
            round=self.round,
            actor=by.actor,
            note=by.note,
        )
        outcome = "applied" if applied else f"ignored (job is {self.state})"
        if not self._lean_status():  # older runs: activity + signal-with-start
            await self._tell_dlq(
                REPORT_TO_DLQ, release, f"tell the dead-letter queue: {action} {outcome}"
            )
            return
        try:  # one signal; a DLQ that is not running has no index or log to update
            await workflow.get_external_workflow_handle(DLQ_WORKFLOW_ID).signal(
                "job_released", release
            )
        except FailureError:
            workflow.logger.info("no dead-letter queue running; %s %s not logged", action, outcome)

    async def _tell_dlq(self, activity: str, message: DeadEntry | JobRelease, summary: str) -> None:
        await workflow.execute_activity(
            activity,
            message,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=DLQ_RETRY,
            summary=summary,
        )

    async def _wait_until_due(self) -> None:
        """Sleep until the job may be dispatched (``dispatch_lead`` before run_at), honouring
        pause (with or without an end), resume and trigger."""
        run_at = self.spec.run_at
        assert run_at is not None, "one-shot jobs always carry run_at"
        lead = timedelta(seconds=self.spec.dispatch_lead)
        while not self.triggered:
            now = workflow.now()
            if self.state == JobStatus.PAUSED:
                if self.paused_until is not None and now >= self.paused_until:
                    self._resume()
                    continue
                wake_at = self.paused_until
            elif now >= run_at - lead:
                return
            else:
                wake_at = run_at - lead
            seen = self.controls_seen
            timeout = (wake_at - now) if wake_at is not None else None
            if self.state == JobStatus.PAUSED:
                label = f"paused until {self._when(wake_at)}"
            else:
                before = f"{format_duration(lead.total_seconds())} before " if lead else ""
                label = f"wait until {before}run_at {self._when(run_at)}"
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    self._controls_changed_since(seen), timeout=timeout, timeout_summary=label
                )

    def _controls_changed_since(self, seen: int) -> Callable[[], bool]:
        return lambda: self.controls_seen != seen

    async def _run_round(self) -> Literal["done", "exhausted", "withdrawn"]:
        """One budget of attempts: done, exhausted, or withdrawn (paused while dispatched)."""
        self._set_status(JobStatus.RUNNING)
        run_at = self.spec.run_at
        # Hand it to a worker now and let it wait there for run_at (the server's herd work
        # is spread over the lead window); a triggered or late job runs at once.
        not_before = None
        if run_at is not None and run_at > workflow.now() and not self.triggered:
            not_before = run_at
        first_record = len(self.attempts)
        executions = 0
        while True:
            spent = sum(a.spent for a in self.attempts[first_record:])
            job = RunJobInput(
                spec=self.spec,
                round=self.round,
                attempt_offset=len(self.attempts),
                spent=spent,
                not_before=not_before,
            )
            executions += 1
            suffix = f"-{executions}" if executions > 1 else ""
            activity_id = f"round-{self.round}{suffix}"
            self.dispatched_until = not_before
            self._show()
            first, last = job.spent + 1, self.spec.max_attempts
            tries = f"attempt {first}" if first == last else f"attempts {first}-{last}"
            attempt = workflow.start_activity(
                RUN_JOB,
                job,
                summary=clip(f"{self.spec.handler} · round {self.round} · {tries} of {last}"),
                result_type=RunJobResult,
                activity_id=activity_id,
                start_to_close_timeout=attempt_allowance(self.spec),
                heartbeat_timeout=timedelta(seconds=self.spec.lease),
                retry_policy=retry_policy(self.spec, job.budget),
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
            try:
                outcome = await self._settle(attempt, activity_id)
            except ActivityError as err:
                if is_cancelled_exception(err):
                    raise
                self.attempts.extend(attempts_from_failure(err, workflow.now()))
                self.last_error = failure_message(err)
                return "exhausted"
            finally:
                self.dispatched_until = None
            if outcome.cancelled or (
                workflow.cancellation_reason() is not None and workflow.patched(CANCEL_WINS_PATCH)
            ):
                self._cancel_met(outcome)  # the workflow was cancelled; the record is kept
            self.attempts.extend(outcome.attempts)
            if outcome.withdrawn:
                return "withdrawn"
            if outcome.handed_over:
                continue  # a clean shutdown gave it back: run it again now, same budget
            self.result = outcome.result
            return "done"

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
            if not self._lean_status():
                attempt.cancel()  # as the cancellation itself did before the patch
                return await attempt
        live = await self._read_attempt_log(activity_id)
        attempt.cancel()
        try:
            outcome = await attempt
        except ActivityError as err:
            if is_cancelled_exception(err):
                self.attempts.extend(live)
            else:  # the round ended otherwise while the cancel was on its way (a retry
                # failure carries no log: then the log read first is what remains)
                self.attempts.extend(attempts_from_failure(err, workflow.now()) or live)
                self.last_error = failure_message(err)
            raise asyncio.CancelledError() from None
        self._cancel_met(outcome)

    async def _read_attempt_log(self, activity_id: str) -> list[AttemptRecord]:
        """The round's attempts as the pending activity's heartbeat details hold them now (an
        attempt that never reported its end was lost), or none if they cannot be read."""
        try:
            state: HeartbeatState | None = await workflow.execute_local_activity(
                READ_ATTEMPT_LOG,
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
        state.close_dangling(workflow.now(), LOST_LEASE, "LeaseExpired")
        return state.attempts

    # -- state ---------------------------------------------------------------------------

    def _set_status(self, status: JobStatus) -> None:
        if status != self.state:
            self.state = status
            self._list(status)
        self._show()

    def _lean_status(self) -> bool:
        """Whether this run writes JobStatus only where listings filter on it (decided once:
        runs recorded before LEAN_STATUS_PATCH upserted every state)."""
        if self.lean is None:
            marked = workflow.memo_value(SHAPE_MEMO_KEY, None) == LEAN_SHAPE
            # A job started without the memo (by hand, or by an older starter) asks the patch.
            self.lean = marked or workflow.patched(LEAN_STATUS_PATCH)
        return self.lean

    def _list(self, status: JobStatus) -> None:
        """Write ``status`` to visibility's JobStatus, if a listing needs it and it changed."""
        shown = listed_status(status) if self._lean_status() else status
        if shown is not None and shown != self.listed:
            self.listed = shown
            workflow.upsert_search_attributes([JOB_STATUS.value_set(shown.value)])

    def _when(self, moment: datetime | None) -> str:
        return "-" if moment is None else moment_text(moment, self.spec.timezone)

    def _show(self, headline: str | None = None) -> None:
        """Publish the current details: the UI's one-line status (Markdown)."""
        workflow.set_current_details(self.current_details(headline))

    def current_details(self, headline: str | None = None) -> str:
        """``**dead** · 1 of 1 attempt(s) failed · parked ...``: the status the one
        rule (workflows/jobstatus.py) computes from the facts this workflow has, from state
        only (and ``workflow.now()``), so replay rebuilds the same text."""
        now = workflow.now()
        run_at = None if self.triggered else self.spec.run_at
        execution: js.Execution = "running"
        failure = None
        if headline == JobStatus.DISCARDED or self.state == JobStatus.DISCARDED:
            execution, failure = "failed", js.DISCARDED_FAILURE
        elif self.state in (JobStatus.DONE, JobStatus.CANCELLED):
            execution = "completed" if self.state == JobStatus.DONE else "canceled"
        activity = None
        if self.state == JobStatus.RUNNING:
            waiting = self.dispatched_until is not None
            activity = js.AttemptFacts(state="started", handler_running=not waiting)
        cancelling = self.cancel_noted or workflow.cancellation_reason() is not None
        facts = js.Facts(
            execution=execution,
            attribute=self.state.value,
            run_at=run_at,
            activity=activity,
            cancel_requested=cancelling and execution == "running",
            failure_type=failure,
        )
        status = js.public_status(facts, now).status
        budget = self.spec.max_attempts
        last = js.last_attempt(self.attempts, budget)
        parts = [f"**{status.value}**"]
        match status:
            case JobStatus.SCHEDULED if self.dispatched_until is not None:
                parts.append(f"with a worker, starts {self._when(self.dispatched_until)}")
            case JobStatus.SCHEDULED | JobStatus.PENDING:
                parts.append(f"next run {self._when(self.spec.run_at)}")
                parts.append(f"up to {budget} attempt(s)")
            case JobStatus.PAUSED:
                if self.paused_until is not None:
                    parts.append(f"until {self._when(self.paused_until)}")
                else:
                    parts.append(f"until resumed (`jobs resume {self.spec.id}`)")
                parts.append(f"due {self._when(self.spec.run_at)}")
            case JobStatus.RUNNING:
                if self.triggered and self.spec.run_at and self.spec.run_at > now:
                    parts.append("triggered: runs now")
                parts.append(js.current_attempt(self.attempts, self.round, budget).label)
                parts.append("retries show on the pending activity")
            case JobStatus.DONE:
                parts.append(f"succeeded on {last.label}" if last else "done")
                parts.append(f"finished {self._when(now)}")
            case JobStatus.DEAD:
                spent = sum(1 for a in self.attempts if a.round == self.round and a.spent)
                parts.append(f"{spent} of {budget} attempt(s) failed")
                parked = f"parked {self._when(self.parked_at)}; " if self.parked_at else ""
                parts.append(f"{parked}requeue or discard it in the dead-letter queue")
            case _:  # cancelling, cancelled, discarded
                parts.append(f"{self._when(now)}, after {len(self.attempts)} attempt(s)")
        if self.round > 1:
            parts.append(f"round {self.round}")
        if self.last_error:
            parts.append(f"last error: {code(self.last_error, ERROR_BYTES)}")
        trail = audit_details(self.audit, self.spec.timezone)
        return " · ".join(parts) + (f"\n\n{trail}" if trail else "")

    def _ensure_search_attributes(self) -> None:
        """Jobs started by hand (e.g. ``temporal workflow start``) still become listable."""
        if workflow.info().typed_search_attributes.get(JOB_NAME) is None:
            attrs = start_search_attributes(self.spec, self.state)
            workflow.upsert_search_attributes([pair.key.value_set(pair.value) for pair in attrs])

    def _resume(self) -> None:
        self.paused_until = None
        # Resumed before a dispatched attempt withdrew: it runs after all.
        in_flight = self.dispatched_until is not None
        self._set_status(JobStatus.RUNNING if in_flight else JobStatus.SCHEDULED)
        self.controls_seen += 1

    def _audit(
        self, action: AuditAction, request: ControlRequest | None, detail: str | None = None
    ) -> None:
        """Record an operator action on the job itself, at the server's time."""
        append_audit(self.audit, action, request, workflow.now(), detail)
        self._show()

    def _cancel_met(self, outcome: RunJobResult) -> NoReturn:
        """End the round cancelled, keeping the attempt's record. An attempt that ended
        otherwise while the cancel was on its way (its handler finished first, say) does not
        beat the cancel: the job still ends cancelled, with a finished handler's result kept
        and the audit trail saying so."""
        self.attempts.extend(outcome.attempts)
        if not (outcome.cancelled or outcome.withdrawn or outcome.handed_over):
            self.result = outcome.result
            self.cancel_detail = "arrived after the handler had finished; its result is kept"
        raise asyncio.CancelledError()

    def _note_cancellation(self, detail: str | None) -> None:
        request = unnoted_cancellation(self.cancel_noted)
        if request is None and detail is not None:
            noted = [i for i, e in enumerate(self.audit) if e.action == "cancel"]
            if noted:  # the cancel_requested signal's entry: say how it ended
                entry = self.audit[noted[-1]]
                self.audit[noted[-1]] = entry.model_copy(update={"detail": detail})
                self._show()
                return
            request = ControlRequest()
        if request is not None:
            self._audit("cancel", request, detail)

    def report(self) -> JobReport:
        return JobReport(
            job_id=self.spec.id,
            name=self.spec.name,
            handler=self.spec.handler,
            status=self.state,
            run_at=self.spec.run_at,
            paused_until=self.paused_until,
            max_attempts=self.spec.max_attempts,
            round=self.round,
            attempts=list(self.attempts),
            result=self.result,
            last_error=self.last_error,
            idempotency_key=self.spec.key,
            parked_at=self.parked_at,
            audit=list(self.audit),
        )

    # -- queries, updates, signals ---------------------------------------------------------

    @workflow.query
    def status(self) -> JobReport:
        return self.report()

    def _waiting_in_worker(self) -> bool:
        """Dispatched, but far enough from run_at that a pause still lands before it starts."""
        until = self.dispatched_until
        return until is not None and workflow.now() < until - CONTROL_CUTOFF

    @workflow.update
    async def pause(self, request: PauseRequest) -> JobReport:
        # A dispatched attempt sees the paused status when it checks before run_at, and
        # withdraws without running the handler.
        self.paused_until = request.until
        self.controls_seen += 1
        self._audit(
            "pause", request, f"until {self._when(request.until)}" if request.until else None
        )
        self._set_status(JobStatus.PAUSED)
        return self.report()

    @pause.validator
    def _check_pause(self, request: PauseRequest) -> None:
        waiting = self.state in (JobStatus.SCHEDULED, JobStatus.PAUSED) and not self.triggered
        if not (waiting or self._waiting_in_worker()):
            raise ValueError(f"cannot pause: job is {self.state}; only a waiting job pauses")
        inbox.check_until(request.until, workflow.now())
        inbox.check_request(request)

    @workflow.update
    async def resume(self, request: ControlRequest | None = None) -> JobReport:
        self._audit("resume", request)
        self._resume()
        return self.report()

    @resume.validator
    def _check_resume(self, request: ControlRequest | None = None) -> None:
        if self.state != JobStatus.PAUSED:
            raise ValueError(f"cannot resume: job is {self.state}, not paused")
        inbox.check_request(request)

    @workflow.update
    async def trigger(self, request: ControlRequest | None = None) -> JobReport:
        self.triggered = True
        self.paused_until = None
        self.controls_seen += 1
        if self._lean_status():  # listings tell a due job by its JobRunAt: this one is due now
            workflow.upsert_search_attributes([JOB_RUN_AT.value_set(workflow.now())])
        self._audit("trigger", request, "runs now")
        return self.report()

    @trigger.validator
    def _check_trigger(self, request: ControlRequest | None = None) -> None:
        if self.dispatched_until is not None:
            raise ValueError(
                "cannot trigger: the job is already with a worker and starts at its run_at"
            )
        if self.state not in (JobStatus.SCHEDULED, JobStatus.PAUSED) or self.triggered:
            raise ValueError(f"cannot trigger: job is {self.state}; it is not waiting to run")
        inbox.check_request(request)

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
        self._audit("cancel", checked)

    @workflow.signal
    async def requeue(self, *args: Any) -> None:
        """Run a dead job again with a fresh attempt budget. Ignored unless dead.

        Takes a ReleaseRequest (who and why), or the older shapes: nothing, or the source."""
        await self._release("requeue", args)

    @workflow.signal
    async def discard(self, *args: Any) -> None:
        """End a dead job for good. Ignored unless dead."""
        await self._release("discard", args)

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """A signal this workflow does not define: recorded and dropped."""
        self._reject(inbox.unknown_signal(name))

    def _reject(self, reason: str, raw: object = None) -> None:
        """Record a dropped message in the audit trail (see workflows/inbox.py)."""
        streak = inbox.record_rejection(self.audit, workflow.now(), reason, inbox.actor_of(raw))
        if streak == 1:
            workflow.logger.warning("job %s: %s", self.spec.id, reason)
        self._show()

    async def _release(self, action: Literal["requeue", "discard"], args: tuple[Any, ...]) -> None:
        try:
            raw = inbox.one_arg(args, action, optional=True)
            request = inbox.accept(inbox.JOB_RELEASE_ARG, raw, action)
        except inbox.Invalid as err:
            self._reject(str(err), args[0] if args else None)
            return
        if not isinstance(request, ReleaseRequest):
            request = ReleaseRequest(source=request)
        via = " (via the dead-letter queue)" if request.source == DLQ_WORKFLOW_ID else ""
        if self.state == JobStatus.DEAD and self.release_request is None:
            self.release_request = action
            self.release_by = ControlRequest(actor=request.actor, note=request.note)
            if action == "requeue":
                done = f"round {self.round + 1}: {self.spec.max_attempts} fresh attempt(s)"
            else:
                done = "dead for good"
            self._audit(action, request, done + via)
            return
        # Not dead (or already released): a no-op. A request forwarded by the DLQ gets an
        # answer so the DLQ's log says what happened.
        workflow.logger.warning("%s ignored: job %s is %s", action, self.spec.id, self.state)
        under_way = self.state == JobStatus.DEAD and self.release_request is not None
        why = f"a {self.release_request} is under way" if under_way else f"job is {self.state}"
        self._audit(action, request, f"ignored: {why}{via}")
        if request.source == DLQ_WORKFLOW_ID:
            await self._report_release(action, applied=False)
