"""A job's side of its concurrency limit: hold a permit of its key for each round.

A job with ``concurrency_key`` waits for run_at (a trigger cuts that short), asks the key's
semaphore (:mod:`workflows.concurrency_workflow`) for a permit, runs its round, and gives the
permit back when the round ends, whichever way (done, exhausted, withdrawn, cancelled). While
it waits it shows ``pending`` once due, may be paused (its request is withdrawn until it is
resumed) and asks again every REASK_EVERY (a semaphore that ended or was terminated is started
again). A job without a key runs exactly as before: no command of this module is issued.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any, Literal

from pydantic import TypeAdapter
from temporalio import workflow
from temporalio.exceptions import FailureError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    import jobctl.workflows.inbox as inbox
    from jobctl.workflows import names
    from jobctl.workflows.job_core import JobCore
    from jobctl.workflows.models import JobStatus
    from jobctl.workflows.models.concurrency import (
        Permit,
        PermitGrant,
        PermitRelease,
        PermitRequest,
        SemaphoreState,
        concurrency_workflow_id,
    )

Outcome = Literal["done", "exhausted", "withdrawn"]
REASK_EVERY = timedelta(minutes=5)
START_TRIES = 3  # signal, or start the semaphore if it does not run, this many times per ask
GRANT_ARG: TypeAdapter[PermitGrant] = TypeAdapter(PermitGrant)


class JobPermit(JobCore):
    _permit_ticket: str | None = None  # the round's request, from asking until released
    _permit_granted: bool = False

    async def _run_round(self) -> Outcome:
        raise NotImplementedError  # JobWorkflow's

    async def _permitted_round(self) -> Outcome:
        """One round (see JobWorkflow._run_round), under a permit when the job has a key."""
        if self.spec.concurrency_key is None:
            return await self._run_round()
        try:
            if not await self._hold_permit():
                return "withdrawn"  # paused while waiting for run_at or a permit
            return await self._run_round()
        finally:
            await self._release_permit()

    async def _hold_permit(self) -> bool:
        """Wait for run_at, then for a permit: True once granted, False if paused first."""
        spec, state = self.spec, self.state
        assert spec.concurrency_key is not None and spec.concurrency_limit is not None
        run_at = spec.run_at
        if run_at is not None and run_at > workflow.now() and not state.triggered:
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: state.triggered or self._paused(),
                    timeout=run_at - workflow.now(),
                    timeout_summary="wait for run_at, then for a concurrency permit",
                )
        if self._paused():
            return False
        info = workflow.info()
        request = PermitRequest(
            key=spec.concurrency_key,
            limit=spec.concurrency_limit,
            holder=info.workflow_id,
            run_id=info.run_id,
            ticket=str(workflow.uuid4()),
            priority=spec.priority,
        )
        self._permit_ticket, self._permit_granted = request.ticket, False
        while not self._paused() and not self._permit_granted:
            self._show(f"waiting for a permit of concurrency key {spec.concurrency_key}")
            await self._ask(request)
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._permit_granted or self._paused(),
                    timeout=REASK_EVERY,
                    timeout_summary="wait for a concurrency permit",
                )
        return self._permit_granted

    def _paused(self) -> bool:
        return self.state.status == JobStatus.PAUSED

    async def _ask(self, request: PermitRequest) -> None:
        """Signal ``acquire`` to the key's semaphore; start it (an abandoned child carrying the
        request) if it does not run."""
        sem_id = concurrency_workflow_id(request.key)
        for _ in range(START_TRIES):
            with contextlib.suppress(FailureError):
                handle = workflow.get_external_workflow_handle(sem_id)
                await handle.signal(names.SIGNAL_ACQUIRE, request)
                return
            now = workflow.now()
            first = Permit(request=request, seq=0, arrived_at=now)
            with contextlib.suppress(WorkflowAlreadyStartedError):
                await workflow.start_child_workflow(
                    names.CONCURRENCY_WORKFLOW,
                    SemaphoreState(key=request.key, waiters=[first], next_seq=1),
                    id=sem_id,
                    parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                    static_summary=f"concurrency limit of key {request.key}",
                )
                return
        workflow.logger.warning("job %s: semaphore %s unreachable", self.spec.id, sem_id)

    async def _release_permit(self) -> None:
        """Give the round's permit (or request) back; shielded from a cancellation arriving
        meanwhile. A semaphore that no longer runs holds nothing."""
        ticket, key = self._permit_ticket, self.spec.concurrency_key
        if ticket is None or key is None:
            return
        self._permit_ticket, self._permit_granted = None, False
        info = workflow.info()
        release = PermitRelease(holder=info.workflow_id, run_id=info.run_id, ticket=ticket)
        handle = workflow.get_external_workflow_handle(concurrency_workflow_id(key))
        sent = asyncio.ensure_future(handle.signal(names.SIGNAL_RELEASE_PERMIT, release))
        with contextlib.suppress(FailureError, asyncio.CancelledError):
            await asyncio.shield(sent)

    @workflow.signal(name=names.SIGNAL_PERMIT_GRANTED)
    def permit_granted(self, *args: Any) -> None:
        """The semaphore's answer (or its check that this holder still runs)."""
        signal = names.SIGNAL_PERMIT_GRANTED
        try:
            grant = inbox.signal_arg(args, GRANT_ARG, signal)
            if grant.key != self.spec.concurrency_key or grant.ticket != self._permit_ticket:
                raise inbox.Invalid(f"{signal}: not for this round's request: dropped")
        except inbox.Invalid as err:
            self._reject(str(err), args[0] if len(args) == 1 else None)
            return
        self._permit_granted = True
