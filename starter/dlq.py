"""Dead-letter queue operations: list, requeue, discard (one job or all matching).

Listing reads the ``JobStatus="dead"`` visibility query (with each job's DeadEntry from its
memo), so it scales with the server's visibility store, not with the DLQ workflow's state.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any, Literal
from uuid import uuid4

from pydantic import BaseModel
from temporalio.api.batch.v1 import BatchOperationSignal
from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import BatchOperationState
from temporalio.api.workflowservice.v1 import (
    DescribeBatchOperationRequest,
    StartBatchOperationRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from jobctl.starter.errors import InvalidTransition, SpecError, TemporalUnavailable
from jobctl.starter.operations.controls import require_open
from jobctl.starter.operations.pagetokens import encode_token, readable_token
from jobctl.starter.operations.readback import describe
from jobctl.starter.operations.rpc import finished_meanwhile, temporal_errors
from jobctl.starter.operations.validation import check_note
from jobctl.workflows import names
from jobctl.workflows.models import (
    HANDLER_PATTERN,
    JOB_HANDLER,
    JOB_NAME,
    JOB_STATUS,
    DeadEntry,
    DlqLogLine,
    ReleaseRequest,
)

Action = Literal["requeue", "discard"]
# The signal each action sends to a dead job (and the batch operation sends to every one).
SIGNAL_OF: dict[Action, str] = {"requeue": names.SIGNAL_REQUEUE, "discard": names.SIGNAL_DISCARD}
BATCH_TIMEOUT = 120.0


def dead_query(handler: str | None = None) -> str:
    """Jobs parked and waiting for a human (discarded ones are closed, hence excluded)."""
    query = (
        f'WorkflowType = "{names.JOB_WORKFLOW}" AND {names.SA_JOB_STATUS} = "dead" '
        'AND ExecutionStatus = "Running"'
    )
    if handler is not None:
        # Only a well-formed handler name goes into the query: nothing can be injected.
        if not re.fullmatch(HANDLER_PATTERN, handler):
            raise SpecError(
                [("handler", "must be 1-200 characters of letters, digits and . _ : -")]
            )
        query += f' AND {names.SA_JOB_HANDLER} = "{handler}"'
    return query


class DeadPage(BaseModel):
    entries: list[DeadEntry]
    next_page_token: str | None = None


async def list_dead(
    client: Client, limit: int = 50, page_token: str | None = None, handler: str | None = None
) -> DeadPage:
    """A page of parked jobs, newest parked first within the page, and the next page token.

    Temporal's SQL visibility cannot ORDER BY, so across pages the order is the server's
    (newest started first).
    """
    entries = []
    async with temporal_errors():
        query = dead_query(handler)
        token = await readable_token(client, query, page_token)
        it = client.list_workflows(query, page_size=limit, next_page_token=token)
        await it.fetch_next_page(page_size=limit)
        for wf in it.current_page or []:
            memo = await wf.memo()
            if names.MEMO_DLQ in memo:
                entries.append(DeadEntry.model_validate(memo[names.MEMO_DLQ]))
            else:  # parked a moment ago; the memo lands with the same workflow task
                attrs = wf.typed_search_attributes
                entries.append(
                    DeadEntry(
                        job_id=wf.id,
                        name=attrs.get(JOB_NAME) or "",
                        handler=attrs.get(JOB_HANDLER) or "",
                        attempts=0,
                        parked_at=wf.start_time,
                    )
                )
    entries.sort(key=lambda e: e.parked_at, reverse=True)
    return DeadPage(entries=entries, next_page_token=encode_token(it.next_page_token))


async def _query_dlq(client: Client, query: str, limit: int, result_type: type) -> Any:
    """Query the DLQ workflow; nothing parked yet (no DLQ workflow) reads as empty."""
    try:
        async with temporal_errors():
            return await client.get_workflow_handle(names.DLQ_WORKFLOW_ID).query(
                query, limit, result_type=result_type
            )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return []
        raise


async def recent_entries(client: Client, limit: int = 1000) -> list[DeadEntry]:
    """The DLQ workflow's own index of recently parked jobs (``entries`` query)."""
    entries: list[DeadEntry] = await _query_dlq(client, names.QUERY_ENTRIES, limit, list[DeadEntry])
    return entries


async def audit_log(client: Client, limit: int = 100) -> list[DlqLogLine]:
    """The DLQ's log of parks, requeues, discards, ignored requests and alerts (``log`` query)."""
    lines: list[DlqLogLine] = await _query_dlq(client, names.QUERY_LOG, limit, list[DlqLogLine])
    return lines


def release_request(note: str | None, actor: str | None) -> ReleaseRequest | None:
    """Who and why, for the job's audit trail; None keeps the signal's argument-less shape."""
    note = check_note(note)
    return ReleaseRequest(actor=actor, note=note) if note or actor else None


async def release(
    client: Client,
    job_id: str,
    action: Action,
    note: str | None = None,
    actor: str | None = None,
) -> None:
    """Requeue or discard one dead job; anything not dead is a clear error. The job records
    who and why in its audit trail when the signal reaches it."""
    request = release_request(note, actor)
    handle, desc = await describe(client, job_id)
    require_open(job_id, action, desc)
    status = desc.typed_search_attributes.get(JOB_STATUS)
    if status != "dead":
        raise InvalidTransition(f"cannot {action}: job {job_id!r} is {status}, not dead")
    async with temporal_errors(job_id), finished_meanwhile(job_id, action):
        # Straight to the job (which reports to the DLQ): one hop fewer than via the DLQ.
        await handle.signal(SIGNAL_OF[action], *([request] if request else []))


async def release_all(
    client: Client,
    action: Action,
    handler: str | None = None,
    note: str | None = None,
    actor: str | None = None,
) -> int:
    """Signal every matching dead job through a Temporal batch operation; returns how many.

    Safe to run twice: a job that is no longer dead ignores the signal. Each job records
    who and why (the signal's input) in its audit trail.
    """
    query = dead_query(handler)
    request = release_request(note, actor)
    signal_input = (
        Payloads(payloads=await client.data_converter.encode([request])) if request else None
    )
    async with temporal_errors():
        if (await client.count_workflows(query)).count == 0:
            return 0
        batch_id = f"dlq-{action}-{uuid4()}"
        await client.workflow_service.start_batch_operation(
            StartBatchOperationRequest(
                namespace=client.namespace,
                visibility_query=query,
                job_id=batch_id,
                reason=f"jobctl dlq {action} --all" + (f" --handler {handler}" if handler else ""),
                signal_operation=BatchOperationSignal(
                    signal=SIGNAL_OF[action], identity=client.identity, input=signal_input
                ),
            )
        )
        deadline = time.monotonic() + BATCH_TIMEOUT
        while time.monotonic() < deadline:
            batch = await client.workflow_service.describe_batch_operation(
                DescribeBatchOperationRequest(namespace=client.namespace, job_id=batch_id)
            )
            if batch.state == BatchOperationState.BATCH_OPERATION_STATE_COMPLETED:
                return int(batch.complete_operation_count)
            if batch.state == BatchOperationState.BATCH_OPERATION_STATE_FAILED:
                raise TemporalUnavailable(
                    f"batch {batch_id} failed after {batch.complete_operation_count} jobs"
                )
            await asyncio.sleep(0.5)
    raise TemporalUnavailable(f"batch {batch_id} still running after {BATCH_TIMEOUT:g}s")
