"""Activities between jobs and the dead-letter queue workflow.

A workflow cannot signal-with-start another workflow. A job signals the running DLQ directly
(one signal); only when that fails (first park ever, or after someone terminated the DLQ) does
it park through ``park_in_dlq``, which starts the DLQ and signals it in one call.

``jobs_dead`` is counted by the DLQ's alert activity, once per parked entry (on the batch's
first attempt), whichever way the park arrived.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError

from jobctl.activities.metrics import record_dead
from jobctl.activities.notify import Notifier
from jobctl.workflows import names
from jobctl.workflows.models import DeadEntry, DlqState

# Two signal-with-starts racing to start the DLQ can be answered "already started" (seen on the
# time-skipping server: two jobs parked at once with no DLQ running); the next call signals the
# run that won.
START_RACE_TRIES = 3


async def signal_dlq(signal: str, arg: Any) -> None:
    for tries_left in reversed(range(START_RACE_TRIES)):
        try:
            await activity.client().start_workflow(
                names.DLQ_WORKFLOW,
                DlqState(),
                id=names.DLQ_WORKFLOW_ID,
                task_queue=activity.info().task_queue,
                start_signal=signal,
                start_signal_args=[arg],
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
            return
        except WorkflowAlreadyStartedError as err:
            if not tries_left:
                # Raised as it is, the SDK could not report the failure (the server wants an
                # application failure), and the attempt would hang until its timeout.
                raise ApplicationError(f"dead-letter queue start raced: {err}") from None


@activity.defn(name=names.PARK_IN_DLQ)
async def park_in_dlq(entry: DeadEntry) -> None:
    """Signal-with-start ``park`` on the DLQ."""
    await signal_dlq(names.SIGNAL_PARK, entry)


class AlertActivities:
    def __init__(self, notifier: Notifier):
        self.notifier = notifier

    @activity.defn(name=names.NOTIFY_DEAD_JOBS)
    async def notify_dead_jobs(self, entries: list[DeadEntry]) -> None:
        """Alert about a batch of parked jobs (and count them in ``jobs_dead``, once)."""
        if activity.info().attempt == 1:
            for entry in entries:
                record_dead(entry.handler)
        await self.notifier.notify(entries)
