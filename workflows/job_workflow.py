"""``JobWorkflow``: one delayed job, from its durable wait to done, dead or cancelled.

Cheapest correct shape (see README, "Server work per job"): the starter passes ``start_delay``
so no workflow task runs until the job is due; the first task upserts ``JobStatus=running``
and schedules ``run_job`` in one go. Retries are the activity's RetryPolicy, so a failed
attempt costs the workflow nothing. An update (pause, trigger, ...) wakes a delayed workflow
early; from then on the wait is a timer raced against the controls.
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
    from workflows.durations import format_duration
    from workflows.models import (
        CONTROL_CUTOFF,
        DLQ_MEMO_KEY,
        DLQ_WORKFLOW_ID,
        JOB_HANDLER,
        JOB_NAME,
        JOB_RUN_AT,
        JOB_STATUS,
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
# Reaching the DLQ must not fail the job: keep trying, at most every 30 s.
DLQ_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=30))
# A cancel accepted while an attempt ran ends the job cancelled even when the attempt ended
# otherwise (its handler finished first): before this patch such a job went on to done.
CANCEL_WINS_PATCH = "cancel-wins-over-a-finished-attempt"


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
            state.close_dangling(now, "lease lost: no heartbeat within the lease", "LeaseExpired")
        else:
            kind = cause.type.name if cause.type else "unknown"
            state.close_dangling(now, f"attempt timed out ({kind})", "AttemptTimeout")
        return state.attempts
    return []


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
        await self._tell_dlq(
            PARK_IN_DLQ, entry, f"park in the dead-letter queue after {entry.attempts} attempt(s)"
        )
        await self._tell_parent()

    async def _tell_parent(self) -> None:
        """A cron's slot job reports how it settled (done, dead, cancelled) to its cron."""
        parent = workflow.info().parent
        if parent is None:
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
        await self._tell_dlq(
            REPORT_TO_DLQ, release, f"tell the dead-letter queue: {action} {outcome}"
        )

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
            self.dispatched_until = not_before
            self._show()
            first, last = job.spent + 1, self.spec.max_attempts
            tries = f"attempt {first}" if first == last else f"attempts {first}-{last}"
            attempt = workflow.start_activity(
                RUN_JOB,
                job,
                summary=clip(f"{self.spec.handler} · round {self.round} · {tries} of {last}"),
                result_type=RunJobResult,
                activity_id=f"round-{self.round}{suffix}",
                start_to_close_timeout=attempt_allowance(self.spec),
                heartbeat_timeout=timedelta(seconds=self.spec.lease),
                retry_policy=retry_policy(self.spec, job.budget),
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
            try:
                outcome = await attempt
            except ActivityError as err:
                if is_cancelled_exception(err):
                    raise
                self.attempts.extend(attempts_from_failure(err, workflow.now()))
                self.last_error = failure_message(err)
                return "exhausted"
            except asyncio.CancelledError:
                # Cancelled in the very task that brought the attempt's end: keep its record.
                if not attempt.done() or attempt.cancelled() or attempt.exception() is not None:
                    raise
                self._cancel_met(attempt.result())
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

    # -- state ---------------------------------------------------------------------------

    def _set_status(self, status: JobStatus) -> None:
        if status != self.state:
            self.state = status
            workflow.upsert_search_attributes([JOB_STATUS.value_set(status.value)])
        self._show()

    def _when(self, moment: datetime | None) -> str:
        return "-" if moment is None else moment_text(moment, self.spec.timezone)

    def _show(self, headline: str | None = None) -> None:
        """Publish the current details: the UI's one-line status (Markdown)."""
        workflow.set_current_details(self.current_details(headline))

    def current_details(self, headline: str | None = None) -> str:
        """``**dead** · 1 of 1 attempts failed · last error: `...` · ...``, from state only
        (and ``workflow.now()``), so replay rebuilds the same text."""
        spent = sum(1 for a in self.attempts if a.round == self.round and a.spent)
        budget = self.spec.max_attempts
        parts = [f"**{headline or self.state.value}**"]
        match self.state:
            case JobStatus.SCHEDULED:
                if self.triggered:
                    parts.append("triggered: runs now")
                else:
                    parts.append(f"next run {self._when(self.spec.run_at)}")
                parts.append(f"up to {budget} attempt(s)")
            case JobStatus.PAUSED:
                if self.paused_until is not None:
                    parts.append(f"until {self._when(self.paused_until)}")
                else:
                    parts.append(f"until resumed (`jobs resume {self.spec.id}`)")
                parts.append(f"due {self._when(self.spec.run_at)}")
            case JobStatus.RUNNING:
                if self.dispatched_until is not None:
                    parts.append(f"with a worker, starts {self._when(self.dispatched_until)}")
                parts.append(f"attempt {spent + 1} of {budget}")
                if spent + 1 < budget:
                    parts.append("later retries show on the pending activity")
            case JobStatus.DONE:
                parts.append(f"succeeded on attempt {spent} of {budget}")
                parts.append(f"finished {self._when(workflow.now())}")
            case JobStatus.DEAD:
                parts.append(f"{spent} of {budget} attempt(s) failed")
                if headline is None:
                    parked = f"parked {self._when(self.parked_at)}; " if self.parked_at else ""
                    parts.append(f"{parked}requeue or discard it in the dead-letter queue")
            case _:
                parts.append(f"{self._when(workflow.now())}, after {len(self.attempts)} attempt(s)")
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
