"""How a job talks to its keys' limiter workflows (a concurrency key's semaphore, a rate key's
limiter): signal the limiter, starting it first if it does not run; tell it a request is
withdrawn. Used from ``JobWorkflow`` only, inside a workflow; keeps no state (the sandbox
passes it through)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import Priority
from temporalio.exceptions import FailureError, WorkflowAlreadyStartedError

from jobctl.workflows import names
from jobctl.workflows.models.concurrency import (
    Permit,
    PermitRelease,
    PermitRequest,
    SemaphoreState,
    concurrency_workflow_id,
)
from jobctl.workflows.models.ratelimit import RateRequest, RateState, Waiter, rate_workflow_id

START_TRIES = 3  # signal, or start the limiter if it does not run, this many times per ask
REASK_EVERY = timedelta(minutes=5)  # a job waiting this long without an answer asks again
# A rate limiter's workflow tasks go before the jobs' on the task queue: a late wake would
# cost the key starts (the schedule cannot start anything in the past).
LIMITER_PRIORITY = Priority(priority_key=1)


async def ask(
    limiter_id: str,
    limiter_type: str,
    signal: str,
    request: Any,
    start_input: Callable[[], Any],
    summary: str,
    priority: Priority | None = None,
) -> bool:
    """Signal ``request`` to the limiter ``limiter_id``; if it does not run, start it (an
    abandoned child whose input, ``start_input()`` at that moment, already carries the
    request). False if neither worked after START_TRIES (the caller asks again later)."""
    for _ in range(START_TRIES):
        with contextlib.suppress(FailureError):
            await workflow.get_external_workflow_handle(limiter_id).signal(signal, request)
            return True
        with contextlib.suppress(WorkflowAlreadyStartedError):
            await workflow.start_child_workflow(
                limiter_type,
                start_input(),
                id=limiter_id,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                static_summary=summary,
                priority=priority or Priority.default,
            )
            return True
    workflow.logger.warning("%s unreachable", limiter_id)
    return False


async def tell(limiter_id: str, signal: str, message: Any) -> None:
    """One signal to a limiter, shielded from a cancellation arriving meanwhile; a limiter
    that no longer runs holds nothing, so a failure is ignored."""
    handle = workflow.get_external_workflow_handle(limiter_id)
    sent = asyncio.ensure_future(handle.signal(signal, message))
    with contextlib.suppress(FailureError, asyncio.CancelledError):
        await asyncio.shield(sent)


async def wait_for_answer(
    limiter_id: str,
    limiter_type: str,
    request: Any,
    start_input: Callable[[], Any],
    summary: str,
    answered: Callable[[], bool],
    stop: Callable[[], bool],
    priority: Priority | None = None,
) -> None:
    """Ask the limiter (signal ``acquire``) and wait until ``answered()`` or ``stop()``;
    ask again every REASK_EVERY without an answer (the limiter ignores a request it
    already has)."""
    while not stop() and not answered():
        signal = names.SIGNAL_ACQUIRE
        await ask(limiter_id, limiter_type, signal, request, start_input, summary, priority)
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: answered() or stop(),
                timeout=REASK_EVERY,
                timeout_summary=f"wait for an answer from the {summary}",
            )


async def withdraw(limiter_id: str, ticket: str) -> None:
    """Signal ``release`` for this run's request ``ticket`` (see :func:`tell`)."""
    info = workflow.info()
    release = PermitRelease(holder=info.workflow_id, run_id=info.run_id, ticket=ticket)
    await tell(limiter_id, names.SIGNAL_RELEASE_PERMIT, release)


async def await_permit(
    request: PermitRequest, granted: Callable[[], bool], stop: Callable[[], bool]
) -> None:
    """Wait for a permit of ``request.key``'s semaphore (started with the request if it
    does not run)."""

    def first() -> SemaphoreState:
        now = workflow.now()
        waiter = Permit(request=request, seq=0, arrived_at=now)
        return SemaphoreState(key=request.key, waiters=[waiter], next_seq=1)

    limiter = concurrency_workflow_id(request.key)
    summary = f"concurrency limit of key {request.key}"
    await wait_for_answer(
        limiter, names.CONCURRENCY_WORKFLOW, request, first, summary, granted, stop
    )


async def await_start(
    request: RateRequest, granted: Callable[[], bool], stop: Callable[[], bool]
) -> None:
    """Wait for a start from ``request.key``'s rate limiter (started with the request if it
    does not run)."""

    def first() -> RateState:
        waiter = Waiter(request=request, seq=0, arrived_at=workflow.now())
        return RateState(key=request.key, waiters=[waiter], next_seq=1)

    limiter = rate_workflow_id(request.key)
    summary = f"rate limit of key {request.key}"
    await wait_for_answer(
        limiter, names.RATE_WORKFLOW, request, first, summary, granted, stop, LIMITER_PRIORITY
    )
