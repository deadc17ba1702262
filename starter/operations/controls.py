"""Controls of a job or cron: pause, resume, trigger, update (updates), cancel (a signal and
the cancellation). Requeue and discard of a dead job live in :mod:`starter.dlq`.

A control is checked (:mod:`.validation`) before anything is sent, refused on a closed job with
its final status, and answered with the workflow's report once a worker processed it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError

from jobctl.starter import jobviews
from jobctl.starter.errors import InvalidTransition, SpecError, TemporalUnavailable
from jobctl.starter.operations.readback import Report, describe
from jobctl.starter.operations.rpc import finished_meanwhile, temporal_errors
from jobctl.starter.operations.validation import (
    check_not_reserved,
    check_note,
    control_request,
    pause_request,
)
from jobctl.workflows import cronmath, names
from jobctl.workflows.cron_rules import BackfillTooLarge, backfill_slots, spec_from_memo
from jobctl.workflows.jobstatus import Facts, execution_of, public_status
from jobctl.workflows.models import JOB_STATUS, ControlRequest, CronReport, CronUpdate, JobReport
from jobctl.workflows.models.cron import BackfillAnswer, BackfillRequest

# How long a control waits for a worker to process it before telling the user why.
CONTROL_TIMEOUT = 30.0
T = TypeVar("T")


async def _control(job_id: str, action: str, call: Callable[[], Awaitable[T]]) -> T:
    """Run an update on a job just described as open; a rejected or unprocessable one becomes
    a clear InvalidTransition."""
    try:
        async with temporal_errors(job_id), finished_meanwhile(job_id, action):
            return await asyncio.wait_for(call(), CONTROL_TIMEOUT)
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        reason = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
        raise InvalidTransition(reason) from err
    except TimeoutError as err:
        raise TemporalUnavailable(
            f"no worker processed {action} within {CONTROL_TIMEOUT:g}s; is `jobctl worker` running?"
        ) from err


def require_open(job_id: str, action: str, desc: WorkflowExecutionDescription) -> None:
    """A closed job answers no control: say so instead of letting the RPC fail obscurely."""
    if desc.status != WorkflowExecutionStatus.RUNNING:
        facts = Facts(
            execution=execution_of(desc.status),
            attribute=desc.typed_search_attributes.get(JOB_STATUS),
            kind=jobviews.kind_of(desc.workflow_type),
        )
        state = public_status(facts, datetime.now(UTC)).status
        raise InvalidTransition(f"cannot {action}: job {job_id!r} has finished ({state})")


async def _update(client: Client, job_id: str, name: str, arg: BaseModel | None = None) -> Report:
    """Send the update ``name`` (its name is the action's) to a job or cron."""
    handle, desc = await describe(client, job_id)
    require_open(job_id, name, desc)
    is_cron = desc.workflow_type == names.CRON_WORKFLOW
    if name == names.UPDATE_SCHEDULE and not is_cron:
        raise InvalidTransition(f"cannot update: job {job_id!r} is not a cron job")
    result_type = CronReport if is_cron else JobReport
    args = [arg] if arg is not None else []
    return await _control(
        job_id, name, lambda: handle.execute_update(name, args=args, result_type=result_type)
    )


async def pause(
    client: Client,
    job_id: str,
    until: datetime | str | None = None,
    note: str | None = None,
    actor: str | None = None,
) -> Report:
    """Hold a job; ``until`` (ISO-8601 text or an aware datetime) is checked against the date
    range with this machine's clock, like ``run_at``."""
    check_not_reserved(job_id)
    return await _update(client, job_id, names.UPDATE_PAUSE, pause_request(until, note, actor))


async def resume(
    client: Client, job_id: str, note: str | None = None, actor: str | None = None
) -> Report:
    return await _update(client, job_id, names.UPDATE_RESUME, control_request(note, actor))


async def trigger(
    client: Client, job_id: str, note: str | None = None, actor: str | None = None
) -> Report:
    return await _update(client, job_id, names.UPDATE_TRIGGER, control_request(note, actor))


async def update_cron(
    client: Client,
    job_id: str,
    change: CronUpdate,
    note: str | None = None,
    actor: str | None = None,
) -> Report:
    """Change a cron's expression, zone or overlap policy (validated by the workflow)."""
    if note is not None or actor is not None:
        change = change.model_copy(update={"note": check_note(note), "actor": actor})
    return await _update(client, job_id, names.UPDATE_SCHEDULE, change)


def backfill_request(
    start: datetime | str,
    end: datetime | str,
    overlap: str | None = None,
    note: str | None = None,
    actor: str | None = None,
) -> BackfillRequest:
    """A validated backfill: ``from`` <= ``to`` <= now (this machine's clock), both in the
    date range; ``overlap`` allow_all or buffer_all (None: from the cron's own policy)."""
    data = {"from": start, "to": end, "overlap": overlap, "note": check_note(note), "actor": actor}
    now = datetime.now(UTC)
    try:
        request = BackfillRequest.model_validate(data, context={"now": now})
    except ValidationError as err:
        raise SpecError.from_validation(err) from err
    if request.from_ > request.to:
        raise SpecError([("from", "must not be after to")])
    if request.to > now:
        raise SpecError([("to", "must not be in the future (a backfill runs past slots)")])
    return request


async def backfill(
    client: Client,
    job_id: str,
    start: datetime | str,
    end: datetime | str,
    overlap: str | None = None,
    note: str | None = None,
    actor: str | None = None,
) -> BackfillAnswer:
    """Run every slot of a cron in [start, end] that has no job yet (each by its slot id).
    A range of more than MAX_BACKFILL_SLOTS slots is refused before anything is sent."""
    request = backfill_request(start, end, overlap, note, actor)
    check_not_reserved(job_id)
    handle, desc = await describe(client, job_id)
    require_open(job_id, "backfill", desc)
    if desc.workflow_type != names.CRON_WORKFLOW:
        raise InvalidTransition(f"cannot backfill: job {job_id!r} is not a cron job")
    spec = spec_from_memo((await desc.memo()).get(names.MEMO_SCHEDULE))
    if spec is not None and spec.cron is not None:  # else the workflow's validator counts
        cron, zone = cronmath.parse(spec.cron), cronmath.zone(spec.timezone)
        try:
            backfill_slots(spec, cron, zone, request.from_, request.to)
        except BackfillTooLarge as err:
            raise SpecError([("to", str(err))]) from err
    return await _control(
        job_id,
        names.UPDATE_BACKFILL,
        lambda: handle.execute_update(names.UPDATE_BACKFILL, request, result_type=BackfillAnswer),
    )


async def cancel(
    client: Client, job_id: str, note: str | None = None, actor: str | None = None
) -> None:
    """Request cancellation; a running attempt is cancelled through its heartbeat (within
    ``JOBS_CANCEL_LATENCY`` of its worker, 10 s by default). Until the job settles its status
    is ``cancelling``.

    The ``cancel_requested`` signal goes first, so the job's audit trail has who and why
    (recorded at the server's time) before the cancellation reaches it; like the
    cancellation itself it needs no worker to be accepted."""
    request = ControlRequest(actor=actor, note=check_note(note))
    handle, desc = await describe(client, job_id)
    require_open(job_id, "cancel", desc)
    if jobviews.cancel_requested(desc):
        return  # already on its way: the first cancel's who and why stand
    async with temporal_errors(job_id):
        await handle.signal(names.SIGNAL_CANCEL_REQUESTED, request)
        why = f": {request.note}" if request.note else ""
        await handle.cancel(reason=f"cancelled by {request.actor or 'unknown'}{why}")
