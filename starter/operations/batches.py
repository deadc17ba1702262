"""Batches on the client side: start one (after :mod:`.batch_check`), read its status, cancel
it. The batch itself is a ``BatchWorkflow`` with id ``batch/<batch id>``
(:mod:`workflows.batch_workflow`); docs/batches.md is the user's guide."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from jobctl.connection.client import task_queue as default_task_queue
from jobctl.starter.errors import (
    InvalidTransition,
    JobExists,
    JobNotFound,
    SpecError,
    TemporalUnavailable,
)
from jobctl.starter.operations.batch_check import (
    CheckedBatch,
    check_batch_handlers,
    check_batch_request,
)
from jobctl.starter.operations.dependencies import check_members_after
from jobctl.starter.operations.handlers import known_handlers
from jobctl.starter.operations.rpc import QUERY_TIMEOUT, temporal_errors
from jobctl.starter.operations.validation import control_request
from jobctl.workflows import batch_rules, names
from jobctl.workflows.models.batch import MAX_BATCH_ID, BatchInput, BatchReport, BatchState

CONTROL_TIMEOUT = 30.0


class BatchScheduled(BaseModel):
    """The answer to a batch's schedule: its id, members and callbacks (``created`` False
    when an identical request had already created it)."""

    batch_id: str
    created: bool = True
    total: int
    job_ids: list[str]
    callbacks: dict[str, str] = Field(default_factory=dict)  # on_complete / on_success -> id
    next_run_at: list[datetime | None] = Field(default_factory=list)  # per member


async def schedule_batch(
    client: Client,
    batch: Any,
    specs: Any,
    handlers: Iterable[str] | None = None,
    now: datetime | None = None,
    task_queue: str | None = None,
    event_budget: int | None = None,
) -> BatchScheduled:
    """Check a batch request (every problem at once, nothing started) and start it."""
    now = now or datetime.now(UTC)
    checked = check_batch_request(batch, specs, now)
    return await start_batch(client, checked, handlers, task_queue, event_budget)


async def start_batch(
    client: Client,
    checked: CheckedBatch,
    handlers: Iterable[str] | None = None,
    task_queue: str | None = None,
    event_budget: int | None = None,
) -> BatchScheduled:
    """Start a checked batch: its handlers checked, its callback ids free, its id new (the
    identical request again answers ``created=False``; another request with a taken id
    raises JobExists)."""
    queue = task_queue or default_task_queue()
    known = handlers if handlers is not None else await known_handlers(client, queue)
    check_batch_handlers(checked, known)
    answer = _answer(checked)
    ids = [spec.id for spec in checked.members]
    start = BatchInput(
        batch_id=checked.batch_id,
        pending=checked.compact_members(),
        on_complete=checked.callbacks.get("on_complete"),
        on_success=checked.callbacks.get("on_success"),
        state=BatchState(members=ids),
        **({"event_budget": event_budget} if event_budget is not None else {}),
    )
    workflow_id = batch_rules.workflow_id(checked.batch_id)
    async with temporal_errors():
        try:
            await _check_callback_ids(client, checked)
            await check_members_after(client, checked.members, set(ids))
            await client.start_workflow(
                names.BATCH_WORKFLOW,
                start,
                id=workflow_id,
                task_queue=queue,
                memo={names.MEMO_REQUEST: checked.request},
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                static_summary=f"batch {checked.batch_id}: {len(ids)} jobs",
            )
        except WorkflowAlreadyStartedError as err:
            existing = await client.get_workflow_handle(workflow_id).describe()
            if (await existing.memo()).get(names.MEMO_REQUEST) == checked.request:
                return answer.model_copy(update={"created": False})
            raise JobExists(f"a batch with id {checked.batch_id!r} already exists") from err
    return answer


def _answer(checked: CheckedBatch) -> BatchScheduled:
    return BatchScheduled(
        batch_id=checked.batch_id,
        total=len(checked.members),
        job_ids=[spec.id for spec in checked.members],
        callbacks={name: cb.job_id for name, cb in checked.callbacks.items()},
        next_run_at=[spec.run_at for spec in checked.members],
    )


async def _check_callback_ids(client: Client, checked: CheckedBatch) -> None:
    """A callback's id must be free now (the batch starts it later, once): a taken one is
    refused at the door rather than found taken when the batch settles. Skipped for a
    retried identical request (its batch's callbacks may have run)."""
    for name, callback in checked.callbacks.items():
        try:
            desc = await client.get_workflow_handle(callback.job_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                continue
            raise
        parent = desc.parent_id
        if parent == batch_rules.workflow_id(checked.batch_id):
            continue  # this batch's own callback: the identical request again
        raise JobExists(f"batch.{name}.id: a job with id {callback.job_id!r} already exists")


def _check_id(batch_id: str) -> None:
    if not batch_rules.is_batch_id(batch_id):
        reason = f"must be 1-{MAX_BATCH_ID} characters of letters, digits and . _ : -"
        raise SpecError([("batch_id", reason)])


async def _describe(client: Client, batch_id: str) -> tuple[WorkflowHandle[Any, Any], Any]:
    _check_id(batch_id)
    handle = client.get_workflow_handle(batch_rules.workflow_id(batch_id), result_type=BatchReport)
    try:
        async with temporal_errors():
            desc = await handle.describe()
    except RPCError as err:
        if err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
            raise JobNotFound(f"no batch with id {batch_id!r}") from err
        raise
    if desc.workflow_type != names.BATCH_WORKFLOW:
        raise JobNotFound(f"no batch with id {batch_id!r}")
    return handle, desc


async def batch_status(client: Client, batch_id: str) -> BatchReport:
    """The batch's report: its final one once completed, else its ``status`` query (or, with
    no worker answering, the state its current run started with)."""
    handle, desc = await _describe(client, batch_id)
    async with temporal_errors():
        if desc.status == WorkflowExecutionStatus.COMPLETED:
            final: BatchReport = await handle.result()
            return final
        try:
            report: BatchReport = await handle.query(
                names.QUERY_STATUS, result_type=BatchReport, rpc_timeout=QUERY_TIMEOUT
            )
            return report
        except (WorkflowQueryFailedError, WorkflowQueryRejectedError, RPCError):
            return await _report_from_start(client, handle, batch_id)


async def _report_from_start(
    client: Client, handle: WorkflowHandle[Any, Any], batch_id: str
) -> BatchReport:
    """The report as of the current run's start input (no worker answered the query)."""
    async for event in handle.fetch_history_events():
        payloads = event.workflow_execution_started_event_attributes.input.payloads
        [start] = await client.data_converter.decode(payloads, [BatchInput])
        return batch_rules.report(batch_id, start.state)
    raise TemporalUnavailable(f"batch {batch_id!r}: no history to read")


async def cancel_batch(
    client: Client, batch_id: str, note: str | None = None, actor: str | None = None
) -> BatchReport:
    """Cancel every unsettled member (the ``cancel`` update); the callbacks then run with
    them counted cancelled. A batch that has completed raises InvalidTransition."""
    request = control_request(note, actor)
    handle, desc = await _describe(client, batch_id)
    if desc.status != WorkflowExecutionStatus.RUNNING:
        raise InvalidTransition(f"cannot cancel: batch {batch_id!r} has completed")
    args = [request] if request is not None else []
    try:
        async with temporal_errors():
            return await asyncio.wait_for(
                handle.execute_update(names.UPDATE_CANCEL, args=args, result_type=BatchReport),
                CONTROL_TIMEOUT,
            )
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        reason = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
        raise InvalidTransition(reason) from err
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND or "completed" in err.message.lower():
            raise InvalidTransition(f"cannot cancel: batch {batch_id!r} has completed") from err
        raise
    except TimeoutError as err:
        raise TemporalUnavailable(
            f"no worker processed cancel within {CONTROL_TIMEOUT:g}s; is `jobctl worker` running?"
        ) from err
