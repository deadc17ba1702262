"""``DeadLetterQueueWorkflow``: the singleton ``dead-letter-queue``.

Jobs stay the source of truth: a dead job waits on itself and decides what a requeue or
discard does, then reports back. The DLQ is the index of recently parked jobs, the audit log of
every park / requeue / discard, and the alerting point:

* ``park(DeadEntry)`` (one signal from the job; a signal-with-start through the
  ``park_in_dlq`` activity only when no DLQ runs): index it and queue an alert;
* ``requeue(job_id)`` / ``discard(job_id)`` (a human, e.g. with the bare ``temporal`` CLI):
  forwarded to the job; the job answers with ``job_released`` (one signal) and the index
  follows. A requeue or discard sent to the job itself is reported the same way;
* alerts go out in batches through the ``notify_dead_jobs`` activity, so a herd of poison jobs
  pages once per batch and a failing webhook never blocks a park or loses an entry.

The state stays small (at most MAX_ENTRIES entries and MAX_LOG log lines; listing every dead
job is the ``JobStatus="dead"`` visibility query's job) and is carried through
continue-as-new when Temporal suggests it or at EVENT_BUDGET events, after every signal handler
has finished, so nothing is lost or applied twice across the boundary.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError, FailureError

with workflow.unsafe.imports_passed_through():
    import jobctl.workflows.inbox as inbox
    from jobctl.workflows import names
    from jobctl.workflows.models import (
        DeadEntry,
        DlqLogLine,
        DlqState,
        JobRelease,
        ReleaseRequest,
    )
    from jobctl.workflows.textclip import clip_line, ellipsize
    from jobctl.workflows.uitext import code, md

MAX_ENTRIES = 1000
MAX_LOG = 500
# Alerts waiting for the notify activity (a herd of parks while the webhook is down): beyond
# this many the oldest are dropped and counted (``alert-dropped``); they stay in the index.
MAX_PENDING_ALERTS = MAX_ENTRIES
MAX_DETAIL = 1000  # characters of one log line's detail
ALERT_BATCH = 100
EVENT_BUDGET = 10_000
ALERT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)
)


@workflow.defn(name=names.DLQ_WORKFLOW)
class DeadLetterQueueWorkflow:
    @workflow.init
    def __init__(self, *args: Any) -> None:
        """Started with one DlqState (checked by inbox.start_arg)."""
        state = inbox.start_arg(args, inbox.DLQ_START, lambda _: None)
        # The caps hold for every state this workflow carries over; a state given by hand
        # (temporal workflow start) is cut to them too.
        entries = state.entries[-MAX_ENTRIES:]
        self.parked: dict[str, DeadEntry] = {entry.job_id: entry for entry in entries}
        self.log_lines = list(state.log[-MAX_LOG:])
        self.pending_alerts = list(state.pending_alerts[-MAX_PENDING_ALERTS:])
        self.totals = dict(state.totals)
        self.generation = state.generation

    @workflow.run
    async def run(self, *args: Any) -> None:
        self._show()
        while True:
            await workflow.wait_condition(
                lambda: bool(self.pending_alerts) or self._time_to_rotate()
            )
            if self.pending_alerts:
                await self._send_alerts()
            if self._time_to_rotate():
                # Signals that arrive while we wait here are handled by this run; Temporal
                # rejects the continue-as-new if any are still unprocessed, and retries.
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self.snapshot(next_generation=True))

    def _time_to_rotate(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested() or info.get_current_history_length() > EVENT_BUDGET
        )

    async def _send_alerts(self) -> None:
        batch, self.pending_alerts = (
            self.pending_alerts[:ALERT_BATCH],
            self.pending_alerts[ALERT_BATCH:],
        )
        try:
            await workflow.execute_activity(
                names.NOTIFY_DEAD_JOBS,
                batch,
                start_to_close_timeout=timedelta(seconds=30),
                schedule_to_close_timeout=timedelta(minutes=5),
                retry_policy=ALERT_RETRY,
                summary=f"alert: {len(batch)} dead job(s)",
            )
            self._record("alerted", detail=f"{len(batch)} parked job(s)")
        except ActivityError as err:
            # The entries are safe in the index; only the notification is given up.
            self._record("alert-failed", detail=f"{len(batch)} parked job(s): {err.cause or err}")

    # -- signals -------------------------------------------------------------------------

    @workflow.signal(name=names.SIGNAL_PARK)
    def park(self, *args: Any) -> None:
        """A DeadEntry, from a job that just went dead."""
        signal = names.SIGNAL_PARK
        try:
            checked = inbox.check_dead_entry(inbox.signal_arg(args, inbox.DEAD_ENTRY_ARG, signal))
        except inbox.Invalid as err:
            self._reject(str(err))
            return
        self._park(checked)

    def _park(self, entry: DeadEntry) -> None:
        self.parked.pop(entry.job_id, None)  # re-parked after a requeue: move to newest
        self.parked[entry.job_id] = entry
        while len(self.parked) > MAX_ENTRIES:
            del self.parked[next(iter(self.parked))]  # oldest; it stays listed by visibility
        self._record("parked", entry.job_id, f"after {entry.attempts} attempts: {entry.last_error}")
        self.pending_alerts.append(entry)
        dropped = len(self.pending_alerts) - MAX_PENDING_ALERTS
        if dropped > 0:
            del self.pending_alerts[:dropped]
            self.totals["alert-dropped"] = self.totals.get("alert-dropped", 0) + dropped

    @workflow.signal(name=names.SIGNAL_REQUEUE)
    async def requeue(self, *args: Any) -> None:
        """Run a dead job again with a fresh attempt budget (the job applies it only if dead).

        Takes a job id, or a ReleaseRequest (job id, who, why) that the job records."""
        await self._forward(names.SIGNAL_REQUEUE, args)

    @workflow.signal(name=names.SIGNAL_DISCARD)
    async def discard(self, *args: Any) -> None:
        """End a dead job for good (the job applies it only if dead)."""
        await self._forward(names.SIGNAL_DISCARD, args)

    @workflow.signal(name=names.SIGNAL_JOB_RELEASED)
    def job_released(self, *args: Any) -> None:
        """A JobRelease, from a job answering a forwarded requeue or discard."""
        signal = names.SIGNAL_JOB_RELEASED
        try:
            checked = inbox.check_release(inbox.signal_arg(args, inbox.JOB_RELEASED_ARG, signal))
        except inbox.Invalid as err:
            self._reject(str(err))
            return
        self._released(checked)

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """A signal this workflow does not define: recorded and dropped."""
        self._reject(inbox.unknown_signal(name))

    def _reject(self, reason: str) -> None:
        """A dropped message: a ``rejected`` log line and count (see workflows/inbox.py). Not
        logged by the worker too: a flood of thousands in one workflow task must stay cheap
        (the SDK fails a task that holds the thread over 2 s)."""
        self._record("rejected", detail=reason)

    def _released(self, release: JobRelease) -> None:
        if not release.applied:
            self._record("ignored", release.job_id, f"{release.action}: job is {release.status}")
            return
        entry = self.parked.get(release.job_id)
        if entry is not None and entry.round <= release.round:
            del self.parked[release.job_id]
        action = "requeued" if release.action == "requeue" else "discarded"
        detail = f"round {release.round}"
        if release.actor:
            detail += f" by {release.actor}"
        if release.note:
            detail += f": {release.note}"
        self._record(action, release.job_id, detail)

    async def _forward(self, action: str, args: tuple[Any, ...]) -> None:
        # The argument tells the job the request came from here, so it answers back; a
        # request keeps who and why.
        try:
            request = inbox.signal_arg(args, inbox.DLQ_RELEASE_ARG, action)
            job_id = request.job_id if isinstance(request, ReleaseRequest) else request
            if not job_id:
                raise inbox.Invalid(f"{action}: no job id given")
            inbox.check_job_ref(job_id)
        except inbox.Invalid as err:
            self._reject(str(err))
            return
        if isinstance(request, ReleaseRequest):
            forwarded = request.model_copy(update={"source": names.DLQ_WORKFLOW_ID})
        else:
            forwarded = ReleaseRequest(source=names.DLQ_WORKFLOW_ID)
        # Logged before the send: the job's answer (``job_released``) can reach this workflow
        # in the same task as the send's completion, and the log must read cause first.
        self._record("forwarded", job_id, action)
        try:
            await workflow.get_external_workflow_handle(job_id).signal(action, forwarded)
        except FailureError as err:
            self._record("ignored", job_id, f"{action}: no running job with this id ({err})")

    # -- queries ---------------------------------------------------------------------------

    @workflow.query(name=names.QUERY_ENTRIES)
    def entries(self, limit: Any = MAX_ENTRIES) -> list[DeadEntry]:
        """Recently parked jobs still dead, newest first (at most ``limit``, an integer)."""
        count = inbox.query_limit(limit, MAX_ENTRIES)
        return sorted(self.parked.values(), key=lambda e: e.parked_at, reverse=True)[:count]

    @workflow.query(name=names.QUERY_LOG)
    def log(self, limit: Any = MAX_LOG) -> list[DlqLogLine]:
        """The audit log, newest last (the last ``limit`` lines, an integer)."""
        count = inbox.query_limit(limit, MAX_LOG)
        return self.log_lines[len(self.log_lines) - count :]

    @workflow.query(name=names.QUERY_DLQ_STATE)
    def state(self) -> DlqState:
        return self.snapshot()

    # -- state -----------------------------------------------------------------------------

    def _record(self, action: str, job_id: str = "", detail: str = "") -> None:
        self.totals[action] = self.totals.get(action, 0) + 1
        line = DlqLogLine(
            at=workflow.now(),
            action=action,
            job_id=job_id,
            detail=ellipsize(detail, MAX_DETAIL),
        )
        self.log_lines.append(line)
        del self.log_lines[:-MAX_LOG]
        self._show()

    def _show(self) -> None:
        workflow.set_current_details(self.current_details())

    def current_details(self) -> str:
        """The Web UI's status (Markdown): how many dead jobs, totals, the latest action."""
        lines = [f"**{len(self.parked)} dead job(s)** indexed (newest {MAX_ENTRIES} at most)"]
        totals = ", ".join(f"{k} {v}" for k, v in sorted(self.totals.items()))
        queued = f"alerts queued: {len(self.pending_alerts)}"
        lines.append(" · ".join(p for p in (totals, queued, f"run {self.generation}") if p))
        if self.log_lines:
            last = self.log_lines[-1]
            stamp = last.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            who = f" {code(last.job_id)}" if last.job_id else ""
            lines.append(f"latest: {last.action}{who} at {stamp}: {md(clip_line(last.detail))}")
        return "\n\n".join(lines)

    def snapshot(self, next_generation: bool = False) -> DlqState:
        return DlqState(
            entries=list(self.parked.values()),
            log=self.log_lines,
            pending_alerts=self.pending_alerts,
            totals=self.totals,
            generation=self.generation + (1 if next_generation else 0),
        )
