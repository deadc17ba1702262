"""The Temporal workers one worker process runs: the job task queue's, and one per handler.

A job's attempts wait on a queue of their handler's own (``names.handler_task_queue``),
which only the workers serving that handler poll: Temporal hands an attempt only to a worker
that can run it, and while none runs, the attempt waits in the queue (the job's status says
so) for up to the spec's ``handler_wait``. The job task queue keeps the workflows and the
dead-letter queue's bookkeeping; every worker of it may run those. All of one process's
workers share one set of handler slots, one thread pool and one server-liveness check
(:class:`activities.run_job.JobActivities`), and start and stop together.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from temporalio.client import Client
from temporalio.worker import (
    FixedSizeSlotSupplier,
    PollerBehaviorAutoscaling,
    Worker,
    WorkerTuner,
)

from jobctl.activities.attempt_slots import AttemptSlots
from jobctl.activities.run_job import JobActivities
from jobctl.workflows import names

# The most pollers one handler's queue gets in one worker (fixed 10 measured as well as
# autoscaling in the herd; more let a busy worker take attempts it could not start in time).
HANDLER_POLLERS_MAX = 10


def handler_workers(
    client: Client, task_queue: str, jobs: JobActivities, **options: Any
) -> list[Worker]:
    """One activity worker per handler ``jobs`` serves, each on that handler's queue of
    ``task_queue``, running ``run_job`` only; ``options`` as for the job queue's worker.

    Their pollers scale with the queue's backlog (the SDK's autoscaling, 1 to
    HANDLER_POLLERS_MAX, 5 at first): an idle handler costs one long poll, and a herd's
    attempts, which no longer come back eagerly with the workflow task that scheduled them
    (another queue), get pollers enough. With the SDK's fixed 5, a 2,000 herd with one core
    busy ran late by up to 24 s in 3 of 4 runs (docs/PERFORMANCE.md). The cap: with the
    SDK's 100, a loaded worker took attempts faster than its event loop could start them,
    and in a retry storm 30 of 200 jobs lost an attempt by lease while it waited in the
    worker's buffer.

    Their slots are one process-wide set of ``max_concurrent_activities``, reserved on the
    event loop (:class:`activities.attempt_slots.AttemptSlots`): a process whose loop a
    handler blocked stops polling instead of taking attempts it could only die holding."""
    options = dict(options)
    slots = AttemptSlots(options.pop("max_concurrent_activities"))
    unused = FixedSizeSlotSupplier(1)  # these workers run no workflow, local activity, nexus
    tuner = WorkerTuner.create_composite(
        workflow_supplier=unused,
        activity_supplier=slots,
        local_activity_supplier=unused,
        nexus_supplier=unused,
    )
    return [
        Worker(
            client,
            task_queue=names.handler_task_queue(task_queue, handler),
            activities=[jobs.run_job],
            activity_task_poller_behavior=PollerBehaviorAutoscaling(maximum=HANDLER_POLLERS_MAX),
            tuner=tuner,
            **options,
        )
        for handler in jobs.registry.names()
    ]


@dataclass
class JobWorker:
    """A process's workers with what they share: the thread pool its sync handlers run in
    and its activities (whose server-liveness check runs in the background)."""

    worker: Worker  # the job task queue's
    executor: ThreadPoolExecutor
    activities: JobActivities
    handler_workers: list[Worker] = field(default_factory=list)

    @property
    def workers(self) -> list[Worker]:
        return [self.worker, *self.handler_workers]

    def close(self) -> None:
        self.activities.liveness.stop()
        self.executor.shutdown(wait=False, cancel_futures=True)

    async def run(self) -> None:
        """Run every worker until :meth:`shutdown`; if one of them stops on its own (a
        fatal error), the others shut down too and its error is raised."""
        runs = [asyncio.ensure_future(w.run()) for w in self.workers]
        try:
            done, _ = await asyncio.wait(runs, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await self.shutdown()
            await asyncio.gather(*runs, return_exceptions=True)
        for run in done:
            run.result()

    async def shutdown(self) -> None:
        """Shut every worker down gracefully, together (each a no-op once it is down)."""
        await asyncio.gather(*(w.shutdown() for w in self.workers))

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Worker]:
        """Every worker polling for the ``async with`` block (the job queue's is yielded);
        then all shut down, and what they share closed."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                for worker in self.workers:
                    await stack.enter_async_context(worker)
                yield self.worker
        finally:
            self.close()
