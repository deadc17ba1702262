"""``JobWorkflow``: one delayed job, from its durable wait to done, dead or cancelled.

Cheapest correct shape (see README, "Server work per job"): the starter passes ``start_delay``
so no workflow task runs until the job is due; the first task schedules ``run_job``. Retries
are the activity's RetryPolicy, so a failed attempt costs the workflow nothing. An update
(pause, trigger, ...) wakes a delayed workflow early; from then on the wait is a timer raced
against the controls.

Visibility carries ``JobStatus`` only where a listing must filter on it (:func:`listed_status`):
``scheduled`` from the start, ``paused``, ``dead`` and ``discarded``. Running, done and
cancelled are Temporal's own state (a started pending activity, the execution status).

One class, in sections: the run loop and the attempts; the state and how it shows; a rate
key's start and a concurrency key's permit; the jobs it runs after; the dead-letter path; the
query, updates and signals. Its decisions are pure functions (:mod:`workflows.job_rules`,
:mod:`workflows.job_text`, :mod:`workflows.dependency_rules`), tested without a server.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal, NoReturn, TypeVar

from pydantic import TypeAdapter
from temporalio import workflow
from temporalio.common import Priority, RawValue
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    is_cancelled_exception,
)

with workflow.unsafe.imports_passed_through():
    import jobctl.workflows.dependency_calls as dependency_calls
    import jobctl.workflows.dependency_rules as dependency_rules
    import jobctl.workflows.inbox as inbox
    import jobctl.workflows.job_signals as job_signals
    import jobctl.workflows.job_text as job_text
    import jobctl.workflows.jobstatus as js
    import jobctl.workflows.limiter_calls as limiter_calls
    from jobctl.workflows import controls, names
    from jobctl.workflows.durations import format_duration
    from jobctl.workflows.job_rules import (
        LOST_LEASE,
        LOST_LEASE_TYPE,
        READ_LOG_RETRY,
        READ_LOG_TIMEOUT,
        activity_priority,
        attempt_allowance,
        attempts_from_failure,
        failure_message,
        job_report,
        listed_status,
        permit_request,
        rate_request,
        release_decision,
        retry_policy,
        start_search_attributes,
        unnoted_cancellation,
        waiting_in_worker,
        within_budget,
    )
    from jobctl.workflows.models import (
        JOB_NAME,
        JOB_RUN_AT,
        JOB_STATUS,
        AttemptRecord,
        AuditAction,
        ControlRequest,
        DeadEntry,
        HeartbeatState,
        JobReport,
        JobSpec,
        JobState,
        JobStatus,
        PauseRequest,
        ReleaseRequest,
        RunJobInput,
        RunJobResult,
        append_audit,
    )
    from jobctl.workflows.models.concurrency import PermitGrant, concurrency_workflow_id
    from jobctl.workflows.models.ratelimit import RateGrant, rate_workflow_id
    from jobctl.workflows.textclip import clip_line

Outcome = Literal["done", "exhausted", "withdrawn"]
G = TypeVar("G", PermitGrant, RateGrant)

GRANT_ARG: TypeAdapter[PermitGrant] = TypeAdapter(PermitGrant)
RATE_GRANT_ARG: TypeAdapter[RateGrant] = TypeAdapter(RateGrant)

Release = Literal["requeue", "discard"]


@workflow.defn(name=names.JOB_WORKFLOW)
class JobWorkflow:
    spec: JobSpec
    state: JobState
    _permit_ticket: str | None = None  # the round's permit request, from asking until released
    _permit_granted: bool = False
    _rate_ticket: str | None = None  # the round's rate request, from asking until the round ends
    _rate_grant: RateGrant | None = None

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
            await self._await_dependencies()
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
                await job_signals.tell_settled(self.spec, self.state)
            raise
        self._set_status(JobStatus.DONE)
        await job_signals.tell_settled(self.spec, self.state)
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
        start_at = self._rate_grant.start_at if self._rate_grant else None
        if start_at is not None and start_at > (not_before or workflow.now()):
            not_before = start_at  # the rate limit's start: the worker waits for it
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
                self._record(attempts_from_failure(err, workflow.now()))
                self.state.last_error = failure_message(err, self.spec)
                return "exhausted"
            finally:
                self.state.dispatched_until = self.state.dispatched_at = None
            if outcome.cancelled or workflow.cancellation_reason() is not None:
                self._cancel_met(outcome)  # the workflow was cancelled; the record is kept
            self._record(outcome.attempts)
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
            summary=clip_line(f"{self.spec.handler} · round {state.round} · {tries} of {last}"),
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
                self._record(live)
            else:  # the round ended otherwise while the cancel was on its way (a retry
                # failure carries no log: then the log read first is what remains)
                self._record(attempts_from_failure(err, workflow.now()) or live)
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

    def _record(self, attempts: list[AttemptRecord]) -> None:
        """Add an activity's attempts to the log, never more than the round's budget."""
        state = self.state
        state.attempts = within_budget(
            [*state.attempts, *attempts], state.round, self.spec.max_attempts
        )

    def _cancel_met(self, outcome: RunJobResult) -> NoReturn:
        """End the round cancelled, keeping the attempt's record. An attempt that ended
        otherwise while the cancel was on its way (its handler finished first, say) does not
        beat the cancel: the job still ends cancelled, with a finished handler's result kept
        and the audit trail saying so."""
        self._record(outcome.attempts)
        if not (outcome.cancelled or outcome.withdrawn or outcome.handed_over):
            self.state.result = outcome.result
            self.state.cancel_detail = "arrived after the handler had finished; its result is kept"
        raise asyncio.CancelledError()

    # -- state and how it shows ------------------------------------------------------------
    def _set_status(self, status: JobStatus) -> None:
        if status != self.state.status:
            self.state.status = status
            self._list(status)
        self._show()

    def _list(self, status: JobStatus) -> None:
        """Write ``status`` to visibility's JobStatus, if a listing needs it and it changed."""
        shown = listed_status(status)
        if shown is not None and shown != self.state.listed:
            self.state.listed = shown
            workflow.upsert_search_attributes([JOB_STATUS.value_set(shown.value)])

    def _when(self, moment: datetime | None) -> str:
        return job_text.when(moment, self.spec)

    def _show(self, headline: str | None = None) -> None:
        """Publish the current details: the UI's one-line status (Markdown)."""
        workflow.set_current_details(self.current_details(headline))

    def current_details(self, headline: str | None = None) -> str:
        """The status the one rule (workflows/jobstatus.py) computes from the facts this
        workflow has, from state only (and ``workflow.now()``): see workflows/job_text.py."""
        cancelling = self.state.cancel_noted or workflow.cancellation_reason() is not None
        return job_text.current_details(self.spec, self.state, workflow.now(), cancelling, headline)

    def _ensure_search_attributes(self) -> None:
        """Jobs started by hand (e.g. ``temporal workflow start``) still become listable."""
        if workflow.info().typed_search_attributes.get(JOB_NAME) is None:
            attrs = start_search_attributes(self.spec, self.state.status)
            workflow.upsert_search_attributes([pair.key.value_set(pair.value) for pair in attrs])

    def _resume(self) -> None:
        self.state.paused_until = None
        # Resumed before a dispatched attempt withdrew: it runs after all.
        in_flight = self.state.dispatched_until is not None
        self._set_status(JobStatus.RUNNING if in_flight else JobStatus.SCHEDULED)
        self.state.controls_seen += 1

    def _audit(
        self, action: AuditAction, request: ControlRequest | None, detail: str | None = None
    ) -> None:
        """Record an operator action on the job itself, at the server's time."""
        append_audit(self.state.audit, action, request, workflow.now(), detail)
        self._show()

    def _reject(self, reason: str, raw: object = None) -> None:
        controls.reject(self.state.audit, f"job {self.spec.id}", reason, raw)
        self._show()

    def _note_cancellation(self, detail: str | None) -> None:
        request = unnoted_cancellation(self.state.cancel_noted)
        if request is None and detail is not None:
            audit = self.state.audit
            noted = [i for i, e in enumerate(audit) if e.action == "cancel"]
            if noted:  # the cancel_requested signal's entry: say how it ended
                audit[noted[-1]] = audit[noted[-1]].model_copy(update={"detail": detail})
                self._show()
                return
            request = ControlRequest()
        if request is not None:
            self._audit("cancel", request, detail)

    def report(self) -> JobReport:
        return job_report(self.spec, self.state)

    # -- a rate key's start and a concurrency key's permit ----------------------------------

    async def _permitted_round(self) -> Outcome:
        """One round (see JobWorkflow._run_round): at run_at, a start from the rate key's
        limiter, then a permit from the concurrency key's semaphore, when the job has them."""
        spec = self.spec
        if spec.concurrency_key is None and spec.rate_key is None:
            return await self._run_round()
        try:
            passed = await self._await_rate()  # a start given is never before run_at
            passed = passed and (self._rate_grant is not None or await self._await_run_at())
            if not (passed and await self._hold_permit()):
                return "withdrawn"  # paused while waiting for a start, run_at or a permit
            self._wait_text(None)
            return await self._run_round()
        finally:
            self._wait_text(None)
            await self._release_permit()
            await self._withdraw_rate()

    async def _await_run_at(self) -> bool:
        """Wait for run_at in the workflow (no pre-dispatch): True unless paused first."""
        run_at, state = self.spec.run_at, self.state
        then = "a concurrency permit" if self.spec.rate_key is None else "a rate limit's start"
        if run_at is not None and run_at > workflow.now() and not state.triggered:
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: state.triggered or self._paused(),
                    timeout=run_at - workflow.now(),
                    timeout_summary=f"wait for run_at, then for {then}",
                )
        return not self._paused()

    async def _await_rate(self) -> bool:
        """Ask the rate key's limiter (from dispatch_lead before run_at: a herd's asks are in
        before it is due) for a start no earlier than run_at: True once it answers (or
        without a key), False if paused first. The round goes to a worker at once and waits
        there for that start (_run_round), as a job does for its run_at."""
        spec, info, run_at = self.spec, workflow.info(), self.spec.run_at
        if spec.rate_key is None:
            return True
        ticket = str(workflow.uuid4())
        due = run_at if run_at and run_at > workflow.now() and not self.state.triggered else None
        request = rate_request(spec, info.workflow_id, info.run_id, ticket, due)
        self._rate_ticket, self._rate_grant = ticket, None
        self._wait_text(f"waiting for rate limit of key {spec.rate_key}")
        await limiter_calls.await_start(request, lambda: self._rate_grant is not None, self._paused)
        return self._rate_grant is not None and not self._paused()

    async def _withdraw_rate(self) -> None:
        """An ask the limiter has not answered leaves its queue (a start given is spent)."""
        ticket, key, granted = self._rate_ticket, self.spec.rate_key, self._rate_grant
        self._rate_ticket, self._rate_grant = None, None
        if ticket is not None and key is not None and granted is None:
            await limiter_calls.withdraw(rate_workflow_id(key), ticket)

    @workflow.signal(name=names.SIGNAL_RATE_GRANTED)
    def rate_granted(self, *args: Any) -> None:
        """The rate limiter's answer: this round may start at ``start_at``."""
        grant = self._accept_grant(args, RATE_GRANT_ARG, self.spec.rate_key, self._rate_ticket)
        if grant is not None:
            self._rate_grant = self._rate_grant or grant  # a second grant changes nothing

    def _wait_text(self, text: str | None) -> None:
        if text != self.state.waiting_for:
            self.state.waiting_for = text
            self._show()

    async def _hold_permit(self) -> bool:
        """A permit of the concurrency key: True once granted (or without a key), False if
        paused first."""
        spec, info = self.spec, workflow.info()
        if spec.concurrency_key is None:
            return True
        ticket = str(workflow.uuid4())
        request = permit_request(spec, info.workflow_id, info.run_id, ticket)
        self._permit_ticket, self._permit_granted = ticket, False
        self._wait_text(f"waiting for a permit of concurrency key {spec.concurrency_key}")
        await limiter_calls.await_permit(request, lambda: self._permit_granted, self._paused)
        return self._permit_granted

    def _paused(self) -> bool:
        return self.state.status == JobStatus.PAUSED

    async def _release_permit(self) -> None:
        """Give the round's permit (or request) back; a semaphore that no longer runs holds
        nothing."""
        ticket, key = self._permit_ticket, self.spec.concurrency_key
        self._permit_ticket, self._permit_granted = None, False
        if ticket is not None and key is not None:
            await limiter_calls.withdraw(concurrency_workflow_id(key), ticket)

    @workflow.signal(name=names.SIGNAL_PERMIT_GRANTED)
    def permit_granted(self, *args: Any) -> None:
        """The semaphore's answer (or its check that this holder still runs)."""
        key, ticket = self.spec.concurrency_key, self._permit_ticket
        if self._accept_grant(args, GRANT_ARG, key, ticket) is not None:
            self._permit_granted = True

    def _accept_grant(
        self, args: tuple[Any, ...], adapter: TypeAdapter[G], key: str | None, ticket: str | None
    ) -> G | None:
        """A limiter's grant for this round's request, or None (recorded and dropped)."""
        signal = names.SIGNAL_PERMIT_GRANTED if adapter is GRANT_ARG else names.SIGNAL_RATE_GRANTED
        try:
            grant = inbox.signal_arg(args, adapter, signal)
            if grant.key != key or grant.ticket != ticket:
                raise inbox.Invalid(f"{signal}: not for this round's request: dropped")
        except inbox.Invalid as err:
            self._reject(str(err), args[0] if len(args) == 1 else None)
            return None
        return grant

    # -- the jobs it runs after (workflows/dependency_calls.py) -----------------------------
    async def _await_dependencies(self) -> None:
        """Wait until the jobs in ``after`` let this one run (or cancel it: dependency_rules)."""
        spec, state = self.spec, self.state
        asked: set[str] = set()
        tries, since = 0, workflow.now()
        while spec.after:
            if workflow.now() - since > dependency_rules.MISSING_AFTER:
                dependency_rules.give_up_on_unstarted(state.dependencies)
            await dependency_calls.ask(spec.after, state.dependencies, asked, spec.id)
            decision = dependency_calls.decide(spec, state.dependencies)
            if decision.action == "run":
                self._wait_text(None)
                return
            if decision.action == "cancel" and not state.cancel_noted:
                # As a person's cancel would (Temporal's status too): it ends the wait below.
                self._audit(
                    "cancel", ControlRequest(actor=names.DEPENDENCY_ACTOR, note=decision.text)
                )
                state.cancel_noted = True
                await dependency_calls.cancel_self()
            self._wait_text(decision.text)
            unstarted = dependency_rules.NOT_STARTED in state.dependencies.values()
            timeout = timedelta(seconds=dependency_rules.backoff(tries)) if unstarted else None
            tries, seen = tries + unstarted, state.controls_seen
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    self._controls_changed_since(seen),
                    timeout=timeout,
                    timeout_summary="ask again for the jobs it runs after",
                )

    @workflow.signal(name=names.SIGNAL_WATCH)
    async def watch(self, *args: Any) -> None:
        """A job that runs after this one asks to be told when this one settles."""
        try:
            watcher = dependency_calls.accept_watch(args, self.state.watchers)
        except inbox.Invalid as err:
            self._reject(str(err), args[0] if len(args) == 1 else None)
            return
        status = self.state.status
        if status in (JobStatus.DONE, JobStatus.DEAD, JobStatus.CANCELLED):
            await dependency_calls.tell([watcher], self.spec.id, status)  # settled already

    @workflow.signal(name=names.SIGNAL_DEPENDENCY_SETTLED)
    def dependency_settled(self, *args: Any) -> None:
        """A job this one runs after tells how it settled."""
        try:
            job_id, status = dependency_calls.accept_settled(args, self.spec.after)
        except inbox.Invalid as err:
            self._reject(str(err), args[0] if len(args) == 1 else None)
            return
        self.state.dependencies[job_id] = status
        self.state.controls_seen += 1
        self._show()

    # -- the dead-letter path -------------------------------------------------------------
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
        await job_signals.park(entry)
        await job_signals.tell_settled(self.spec, self.state)

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
        await job_signals.report_release(self.spec, self.state, action, applied=True)
        if action == "discard":
            self._list(JobStatus.DISCARDED)  # the run ends Failed: listings tell it by this
            self._show(JobStatus.DISCARDED)
            await job_signals.tell_watchers(self.spec, self.state, JobStatus.DISCARDED)
            await workflow.wait_condition(workflow.all_handlers_finished)
            raise ApplicationError(
                f"discarded after {len(self.state.attempts)} attempts: {self.state.last_error}",
                type=js.DISCARDED_FAILURE,
                non_retryable=True,
            )
        self.state.round += 1
        self.state.release_request = None

    async def _release(self, action: Release, args: tuple[Any, ...]) -> None:
        """A requeue or discard sent to the job (by a person, or forwarded by the DLQ): taken
        when the job is dead and no other is under way; otherwise recorded as ignored."""
        try:
            request = inbox.signal_arg(args, inbox.JOB_RELEASE_ARG, action, optional=True)
        except inbox.Invalid as err:
            self._reject(str(err), args[0] if args else None)
            return
        request = request or ReleaseRequest()
        from_dlq = request.source == names.DLQ_WORKFLOW_ID
        taken, detail = release_decision(action, self.state, self.spec.max_attempts, from_dlq)
        if taken:
            self.state.release_request = action
            self.state.release_by = ControlRequest(actor=request.actor, note=request.note)
            self._audit(action, request, detail)
            return
        self._audit(action, request, detail)
        # A no-op. A request forwarded by the DLQ gets an answer so the DLQ's log says it.
        workflow.logger.warning("%s ignored: job %s is %s", action, self.spec.id, self.state.status)
        if from_dlq:
            await job_signals.report_release(self.spec, self.state, action, applied=False)

    # -- controls: query, updates, signals ------------------------------------------------
    @workflow.query(name=names.QUERY_STATUS)
    def status(self) -> JobReport:
        return self.report()

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
        if not (waiting or waiting_in_worker(self.state, workflow.now())):
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
        if state.dispatched_until is not None or self._rate_ticket is not None:
            where = "with a worker" if self._rate_ticket is None else "queued for its rate limit"
            raise ValueError(f"cannot trigger: the job is already {where}; it starts at run_at")
        if state.status not in (JobStatus.SCHEDULED, JobStatus.PAUSED) or state.triggered:
            raise ValueError(f"cannot trigger: job is {state.status}; it is not waiting to run")
        inbox.check_request(request)

    @workflow.signal(name=names.SIGNAL_CANCEL_REQUESTED)
    def cancel_requested(self, *args: Any) -> None:
        """Who cancels the job and why (see controls.accept_cancel)."""
        request = controls.accept_cancel(args, self._reject)
        if not isinstance(request, controls.Rejected):
            self.state.cancel_noted = True
            self._audit("cancel", request)

    @workflow.signal(name=names.SIGNAL_REQUEUE)
    async def requeue(self, *args: Any) -> None:
        """Run a dead job again with a fresh attempt budget. Ignored unless dead.

        Takes nothing, or a ReleaseRequest (who and why)."""
        await self._release("requeue", args)

    @workflow.signal(name=names.SIGNAL_DISCARD)
    async def discard(self, *args: Any) -> None:
        """End a dead job for good. Ignored unless dead."""
        await self._release("discard", args)

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """A signal this workflow does not define: recorded and dropped."""
        self._reject(inbox.unknown_signal(name))
