"""What ``BatchWorkflow`` decides, as pure functions over its :class:`BatchState`: the checks
of its start input and of each member's report, how a report settles a member, the counts,
the summary a callback's payload receives, the callback's spec, and the ``status`` report.
They take the time as an argument and call no workflow API, so tests/test_batch_rules.py
checks them without a server (docs/batches.md is the user's side of the same rules)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

from pydantic import TypeAdapter

from jobctl.workflows import inbox, names
from jobctl.workflows.models import ControlRequest, JobSpec, SlotFinished
from jobctl.workflows.models.audit import UNKNOWN_ACTOR
from jobctl.workflows.models.batch import (
    BATCH_ID_PATTERN,
    MAX_MEMBERS,
    MAX_SUMMARY_BYTES,
    NOT_STARTED,
    OUTCOMES,
    PAYLOAD_KEY,
    SETTLED,
    BatchCallback,
    BatchInput,
    BatchReport,
    BatchState,
    BatchStatus,
    CancelMark,
)
from jobctl.workflows.textclip import ellipsize

BATCH_START: TypeAdapter[BatchInput] = TypeAdapter(BatchInput)
REPORT_ARG: TypeAdapter[SlotFinished] = TypeAdapter(SlotFinished)
CANCEL_ARG: TypeAdapter[ControlRequest | None] = TypeAdapter(ControlRequest | None)
WAVE = 50  # member starts (or cancels) in flight at once
REJECTIONS_KEPT = 10
_BATCH_ID = re.compile(BATCH_ID_PATTERN)


def workflow_id(batch_id: str) -> str:
    """The batch's workflow id: ``batch/<id>`` ("/" is never in a job id)."""
    return f"{names.BATCH_ID_PREFIX}{batch_id}"


def is_batch_id(value: object) -> bool:
    return isinstance(value, str) and _BATCH_ID.fullmatch(value) is not None


# -- the start input ---------------------------------------------------------------------------


def check_start(start: BatchInput) -> None:
    """What a BatchWorkflow needs (the door guarantees it; a batch started by hand may not):
    its id, at most MAX_MEMBERS distinct member ids, the members not started yet as valid
    one-shot specs naming members[started:] in order, callbacks whose ids are no member's."""
    state = start.state
    if not is_batch_id(start.batch_id):
        raise inbox.Invalid(f"batch_id {inbox.quote(start.batch_id)} is not a batch id")
    if not 0 < len(state.members) <= MAX_MEMBERS:
        raise inbox.Invalid(f"a batch has 1-{MAX_MEMBERS} members (got {len(state.members)})")
    if len(set(state.members)) != len(state.members):
        raise inbox.Invalid("a member id appears twice")
    for job_id in state.members:
        inbox.check_job_ref(job_id, "member")
    if not 0 <= state.started <= len(state.members):
        raise inbox.Invalid(f"started {state.started} is impossible")
    if [spec.get("id") for spec in start.pending] != state.members[state.started :]:
        raise inbox.Invalid("pending must be the specs of members[started:], in order")
    for raw in start.pending:
        check_member_spec(raw)
    if not inbox.MIN_EVENT_BUDGET <= start.event_budget <= inbox.MAX_EVENT_BUDGET:
        raise inbox.Invalid(
            f"event_budget must be {inbox.MIN_EVENT_BUDGET}-{inbox.MAX_EVENT_BUDGET}"
        )
    members = set(state.members)
    for name, callback in callbacks_of(start).items():
        inbox.check_job_ref(callback.job_id, f"{name}.id")
        if callback.job_id in members:
            raise inbox.Invalid(f"{name}: its id is a member's")


def check_member_spec(raw: dict[str, Any]) -> JobSpec:
    """A member's spec as a JobWorkflow will check it: valid, one-shot, with run_at."""
    spec = JobSpec.model_validate_json(json.dumps(raw))
    inbox.check_job_start(spec)
    return spec


def callbacks_of(start: BatchInput) -> dict[str, BatchCallback]:
    found = {"on_complete": start.on_complete, "on_success": start.on_success}
    return {name: callback for name, callback in found.items() if callback is not None}


# -- members' reports ----------------------------------------------------------------------------


def accept_report(
    state: BatchState, args: tuple[Any, ...], callback_ids: set[str]
) -> tuple[str, str] | None:
    """A member's ``slot_finished`` report: the job id it settles and how, or None for a callback
    job's own report (it is no member: ignored, not an error). Invalid for a wrong shape, a
    status that is no settlement, an id that is no started member of this batch."""
    signal = names.SIGNAL_SLOT_FINISHED
    report = inbox.signal_arg(args, REPORT_ARG, signal)
    if report.job_id in callback_ids:
        return None
    if report.status not in SETTLED:
        raise inbox.Invalid(f"{signal}: {report.status} is not a settlement (job {report.job_id})")
    if report.job_id not in state.members[: state.started]:
        raise inbox.Invalid(f"{signal}: {inbox.quote(report.job_id)} is no started member")
    return report.job_id, report.status.value


def settle(state: BatchState, job_id: str, status: str) -> None:
    """Record a member's latest settlement (a requeued dead member may report again)."""
    state.outcomes[job_id] = status


def reject(state: BatchState, reason: str) -> None:
    """Count a dropped message and keep its reason among the newest REJECTIONS_KEPT."""
    state.rejected += 1
    state.rejections.append(ellipsize(reason, inbox.MAX_REASON))
    del state.rejections[:-REJECTIONS_KEPT]


def all_settled(state: BatchState) -> bool:
    return len(state.outcomes) == len(state.members)


def unsettled_started(state: BatchState) -> list[str]:
    return [job_id for job_id in state.members[: state.started] if job_id not in state.outcomes]


def cancel_mark(request: ControlRequest | None, now: datetime) -> CancelMark:
    request = request or ControlRequest()
    return CancelMark(at=now, actor=request.actor or UNKNOWN_ACTOR, note=request.note)


def drop_unstarted(state: BatchState) -> None:
    """A cancel before every member started: the rest never start, counted cancelled."""
    for job_id in state.members[state.started :]:
        state.outcomes[job_id] = "cancelled"
    state.started = len(state.members)


# -- counts, summary, callbacks --------------------------------------------------------------


def counts(state: BatchState) -> dict[str, int]:
    found = dict.fromkeys(OUTCOMES, 0)
    for outcome in state.outcomes.values():
        found[outcome] = found.get(outcome, 0) + 1
    return found


def ids_with(state: BatchState, outcome: str) -> list[str]:
    return [job_id for job_id in state.members if state.outcomes.get(job_id) == outcome]


def succeeded(state: BatchState) -> bool | None:
    if not all_settled(state):
        return None
    return all(outcome == "done" for outcome in state.outcomes.values())


def summary(batch_id: str, state: BatchState) -> dict[str, Any]:
    """What a callback's payload receives under ``batch``: the counts by outcome and the
    ids of the members that did not end done, within MAX_SUMMARY_BYTES (ids beyond it are
    left out, and ``truncated`` says so)."""
    lists = {key: ids_with(state, key) for key in ("dead", "cancelled", "discarded", NOT_STARTED)}
    found: dict[str, Any] = {
        "id": batch_id,
        "total": len(state.members),
        "counts": counts(state),
        "succeeded": bool(succeeded(state)),
        "cancelled_by": state.cancel.actor if state.cancel else None,
        **lists,
        "truncated": False,
    }
    while len(json.dumps(found)) > MAX_SUMMARY_BYTES:
        longest = max(lists, key=lambda key: len(lists[key]))
        del lists[longest][len(lists[longest]) // 2 :]
        found.update(lists, truncated=True)
    return found


def callback_spec(callback: BatchCallback, batch: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The callback job's spec: its payload with the summary under ``batch``, due ``delay``
    after now."""
    payload = {**callback.spec.get("payload", {}), PAYLOAD_KEY: batch}
    run_at = now + timedelta(seconds=callback.delay)
    return {**callback.spec, "payload": payload, "run_at": run_at.isoformat()}


# -- what the batch shows ------------------------------------------------------------------------


def status_of(state: BatchState) -> BatchStatus:
    if state.completed_at is not None:
        return "cancelled" if state.cancel is not None else "done"
    return "cancelling" if state.cancel is not None else "running"


def report(batch_id: str, state: BatchState) -> BatchReport:
    return BatchReport(
        batch_id=batch_id,
        status=status_of(state),
        total=len(state.members),
        started=state.started,
        settled=len(state.outcomes),
        unsettled=len(state.members) - len(state.outcomes),
        counts=counts(state),
        succeeded=succeeded(state),
        dead=ids_with(state, "dead"),
        cancelled=ids_with(state, "cancelled"),
        not_started=ids_with(state, NOT_STARTED),
        callbacks={name: record.model_copy() for name, record in state.callbacks.items()},
        cancel=state.cancel,
        created_at=state.created_at,
        completed_at=state.completed_at,
        generation=state.generation,
        rejected=state.rejected,
        rejections=list(state.rejections),
    )


def details_text(batch_id: str, state: BatchState) -> str:
    """The Web UI's current details: ``**running** · 312/500 settled · done 300, dead 12``."""
    parts = [f"**{status_of(state)}**", f"{len(state.outcomes)}/{len(state.members)} settled"]
    if state.started < len(state.members):
        parts.append(f"{state.started} started")
    shown = ", ".join(f"{key} {n}" for key, n in counts(state).items() if n)
    if shown:
        parts.append(shown)
    for name, record in state.callbacks.items():
        parts.append(f"{name} {record.job_id}: {record.state}")
    if state.rejected:
        parts.append(f"{state.rejected} message(s) rejected")
    return f"batch {batch_id}: " + " · ".join(parts)
