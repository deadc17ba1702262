"""``jobctl limits`` / ``GET /limits``: every limiter running now, rate keys and concurrency
keys alike, with its limit, recent starts, waiting jobs and the earliest next start.

Visibility lists the running limiter workflows (``RateLimitWorkflow``,
``ConcurrencyLimitWorkflow``); each answers one query (``reservations`` / ``permits``). A
limiter that does not answer (no worker running) is listed with ``error`` set. A key's
limiter ends after 10 idle minutes, so a key not used lately is not listed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import BaseModel
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
)
from temporalio.service import RPCError

from jobctl.starter import jobviews
from jobctl.starter.operations.rpc import temporal_errors
from jobctl.workflows import names
from jobctl.workflows.models.concurrency import SemaphoreState
from jobctl.workflows.models.ratelimit import RECENT, RateState, recent_starts
from jobctl.workflows.rates import describe, parse_rate

MAX_LIMITERS = 1000  # listed at most (the most recently started first)
QUERY_CONCURRENCY = 20
QUERY_TIMEOUT = timedelta(seconds=10)  # a limiter whose workers are gone answers nothing
LIMITER_TYPES = f'WorkflowType IN ("{names.RATE_WORKFLOW}", "{names.CONCURRENCY_WORKFLOW}")'


class LimitInfo(BaseModel):
    """One key's limiter, as ``jobctl limits --json`` and ``GET /limits`` show it."""

    kind: Literal["rate", "concurrency"]
    key: str
    workflow_id: str
    limit: str | None = None  # "20/s", "20/s burst 5"; a concurrency limit: "3"
    running: int | None = None  # concurrency: permits held now
    recent_starts: int | None = None  # rate: starts reserved for the last minute
    waiting: int = 0  # jobs queued for a start or a permit
    next_start: datetime | None = None  # rate: the earliest start a job asking now would get
    granted: int = 0  # starts or permits handed out since the key's limiter began
    rejected: int = 0  # invalid messages dropped
    error: str | None = None  # the limiter did not answer its query


class Limits(BaseModel):
    limits: list[LimitInfo]
    recent_seconds: int = RECENT


def rate_info(workflow_id: str, state: RateState, now: datetime) -> LimitInfo:
    """A rate limiter's row from its state (``now``: the caller's clock)."""
    next_start = now
    if state.tat is not None and state.rate is not None:
        spacing = parse_rate(state.rate).spacing
        next_start = max(now, state.tat - timedelta(seconds=spacing * (state.burst - 1)))
    return LimitInfo(
        kind="rate",
        key=state.key,
        workflow_id=workflow_id,
        limit=describe(state.rate, state.burst) if state.rate else None,
        recent_starts=recent_starts(state, now),
        waiting=len(state.waiters),
        next_start=next_start,
        granted=state.granted,
        rejected=state.rejected,
    )


def concurrency_info(workflow_id: str, state: SemaphoreState) -> LimitInfo:
    holders = state.holders
    return LimitInfo(
        kind="concurrency",
        key=state.key,
        workflow_id=workflow_id,
        limit=str(holders[0].request.limit) if holders else None,
        running=len(holders),
        waiting=len(state.waiters),
        granted=state.granted,
        rejected=state.rejected,
    )


async def limiter_info(client: Client, execution: WorkflowExecution, now: datetime) -> LimitInfo:
    kind: Literal["rate", "concurrency"]
    if execution.workflow_type == names.RATE_WORKFLOW:
        kind, prefix, query = "rate", names.RATE_ID_PREFIX, names.QUERY_RESERVATIONS
    else:
        kind, prefix, query = "concurrency", names.CONCURRENCY_ID_PREFIX, names.QUERY_PERMITS
    handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
    try:
        if kind == "rate":
            rate = await handle.query(query, result_type=RateState, rpc_timeout=QUERY_TIMEOUT)
            return rate_info(execution.id, rate, now)
        sem = await handle.query(query, result_type=SemaphoreState, rpc_timeout=QUERY_TIMEOUT)
        return concurrency_info(execution.id, sem)
    except (RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError) as err:
        key = execution.id.removeprefix(prefix)
        return LimitInfo(kind=kind, key=key, workflow_id=execution.id, error=str(err)[:200])


async def list_limits(client: Client) -> Limits:
    """Every running limiter: rate keys first, then concurrency keys, each by key."""
    query = f'{LIMITER_TYPES} AND ExecutionStatus = "Running"'
    async with temporal_errors():
        executions = [wf async for wf in client.list_workflows(query, limit=MAX_LIMITERS)]
    now = datetime.now(UTC)
    rows = await jobviews.gathered(
        [limiter_info(client, wf, now) for wf in executions], QUERY_CONCURRENCY
    )
    return Limits(limits=sorted(rows, key=lambda r: (r.kind != "rate", r.key)))
