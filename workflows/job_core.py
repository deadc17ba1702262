"""What every part of ``JobWorkflow`` shares: its spec and :class:`JobState`, and how that
state reaches visibility (``JobStatus``), the Web UI (current details), the audit trail and the
``status`` query. The parts (:mod:`workflows.job_dlq`, :mod:`workflows.job_controls`,
:mod:`workflows.job_workflow`) build on it; workflow code, deterministic."""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow

import jobctl.workflows.inbox as inbox
import jobctl.workflows.job_text as job_text
from jobctl.workflows.job_rules import listed_status, start_search_attributes, unnoted_cancellation
from jobctl.workflows.models import (
    JOB_NAME,
    JOB_STATUS,
    AuditAction,
    ControlRequest,
    JobReport,
    JobSpec,
    JobState,
    JobStatus,
    append_audit,
)


class JobCore:
    spec: JobSpec
    state: JobState

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
        """Record a dropped message in the audit trail (see workflows/inbox.py)."""
        streak = inbox.record_rejection(
            self.state.audit, workflow.now(), reason, inbox.actor_of(raw)
        )
        if streak == 1:
            workflow.logger.warning("job %s: %s", self.spec.id, reason)
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
        state = self.state
        return JobReport(
            job_id=self.spec.id,
            name=self.spec.name,
            handler=self.spec.handler,
            status=state.status,
            run_at=self.spec.run_at,
            paused_until=state.paused_until,
            max_attempts=self.spec.max_attempts,
            round=state.round,
            attempts=list(state.attempts),
            result=state.result,
            last_error=state.last_error,
            idempotency_key=self.spec.key,
            parked_at=state.parked_at,
            audit=list(state.audit),
            **self.spec.scheduling(),
        )
