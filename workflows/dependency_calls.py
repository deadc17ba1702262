"""How a job talks to the jobs it runs after, and to those that run after it (issue 44).

A job that runs after others sends each a ``watch`` signal; a running dependency keeps the
watcher and tells it every settlement (``dependency_settled``: done, dead, cancelled,
discarded), at once if it has already settled. A dependency that does not run any more (it
closed before it was asked) cannot take a signal: ``read_job_outcomes``, a local activity,
reads how its run closed. One that does not exist yet (a later member of the same batch) is
asked again later. Cloud actions: two signals per dependency, a local activity per read.

Used from ``JobWorkflow`` only; keeps no state (the sandbox passes it through).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import FailureError
from temporalio.service import RPCError, RPCStatusCode

from jobctl.workflows import dependency_rules as rules
from jobctl.workflows import inbox, names
from jobctl.workflows.dependency_rules import (
    MAX_WATCHERS,
    NOT_STARTED,
    WAITING,
    Decision,
    settled_as,
)
from jobctl.workflows.jobstatus import Facts, execution_of, public_status
from jobctl.workflows.models import JOB_STATUS, JobSpec, JobStatus, SlotFinished
from jobctl.workflows.models.job import DependencyWatch

READ_TIMEOUT = timedelta(seconds=10)
READ_RETRY = RetryPolicy(maximum_attempts=5)


@activity.defn(name=names.READ_JOB_OUTCOMES)
async def read_job_outcomes(job_ids: list[str]) -> dict[str, str]:
    """How each job stands by Temporal's own record: its public status once its run closed
    (done, cancelled, discarded, dead), ``waiting`` while it runs, ``not started`` if there
    is no such workflow (yet). The jobs are described together."""
    client = activity.client()
    # A closed run's status needs no clock: the activity's start stands for now.
    now = activity.info().started_time

    async def one(job_id: str) -> str:
        try:
            desc = await client.get_workflow_handle(job_id).describe()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            return NOT_STARTED
        execution = execution_of(desc.status)
        if execution == "running":
            return WAITING
        facts = Facts(execution=execution, attribute=desc.typed_search_attributes.get(JOB_STATUS))
        return public_status(facts, now).status.value

    return dict(zip(job_ids, await asyncio.gather(*(one(i) for i in job_ids)), strict=True))


@activity.defn(name=names.CANCEL_OWN_JOB)
async def cancel_own_job() -> None:
    """Ask Temporal to cancel the calling job's run (a workflow cannot cancel itself by a
    command: the server refuses a cancel of its own id)."""
    info = activity.info()
    assert info.workflow_id is not None  # a local activity always runs for a workflow
    handle = activity.client().get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
    await handle.cancel()


async def ask(after: Sequence[str], known: dict[str, str], asked: set[str], me: str) -> None:
    """Send ``watch`` to each job of ``after`` not ``asked`` yet that has not settled (as
    ``known`` has it); read how those that do not run ended, or that they have not started
    yet (``known`` and ``asked`` are updated)."""
    for job_id in after:
        known.setdefault(job_id, WAITING)
    unsettled = (WAITING, NOT_STARTED)
    todo = [job_id for job_id in after if job_id not in asked and known[job_id] in unsettled]
    if not todo:
        return
    gone = await watch(todo, me)
    asked.update(job_id for job_id in todo if job_id not in gone)
    if gone:
        for job_id, status in (await read(gone)).items():
            if known.get(job_id) in unsettled:  # a report may have come meanwhile
                known[job_id] = NOT_STARTED if status == WAITING else status  # running now: ask


def decide(spec: JobSpec, known: dict[str, str]) -> Decision:
    return rules.decide(spec.after, known, spec.on_failed_dependency)


def accept_watch(args: tuple[object, ...], watchers: list[str]) -> str:
    """A ``watch`` signal's watcher, added to ``watchers`` (inbox.Invalid if malformed, or if
    MAX_WATCHERS jobs already wait)."""
    watcher = inbox.signal_arg(args, inbox.WATCH_ARG, names.SIGNAL_WATCH).job_id
    if watcher not in watchers:
        if len(watchers) >= MAX_WATCHERS:
            raise inbox.Invalid(f"watch: {watcher} dropped: {MAX_WATCHERS} jobs already wait")
        watchers.append(watcher)
    return watcher


def accept_settled(args: tuple[object, ...], after: Sequence[str]) -> tuple[str, str]:
    """A ``dependency_settled`` report: the job (one of ``after``) and how it stands."""
    signal = names.SIGNAL_DEPENDENCY_SETTLED
    report = inbox.signal_arg(args, inbox.SLOT_FINISHED_ARG, signal)
    status = settled_as(report.status.value)
    if report.job_id not in after or status is None:
        raise inbox.Invalid(
            f"{signal}: {report.job_id} {report.status}: not a settlement of a job it runs after"
        )
    return report.job_id, status


async def watch(job_ids: Sequence[str], me: str) -> list[str]:
    """Send ``watch`` to each job; the ids that do not run (closed, or not started yet)."""

    async def one(job_id: str) -> str | None:
        try:
            handle = workflow.get_external_workflow_handle(job_id)
            await handle.signal(names.SIGNAL_WATCH, DependencyWatch(job_id=me))
        except FailureError:
            return job_id
        return None

    answers = await asyncio.gather(*(one(job_id) for job_id in job_ids))
    return [job_id for job_id in answers if job_id is not None]


async def read(job_ids: list[str]) -> dict[str, str]:
    """``read_job_outcomes`` for jobs that do not run; unread ones stay ``not started``."""
    try:
        found: dict[str, str] = await workflow.execute_local_activity(
            names.READ_JOB_OUTCOMES,
            job_ids,
            result_type=dict[str, str],
            start_to_close_timeout=READ_TIMEOUT,
            retry_policy=READ_RETRY,
            summary="read how the jobs it runs after ended",
        )
        return found
    except FailureError as err:
        workflow.logger.warning("dependencies %s unreadable: %s", job_ids, err)
        return dict.fromkeys(job_ids, NOT_STARTED)


async def cancel_self() -> None:
    await workflow.execute_local_activity(
        names.CANCEL_OWN_JOB,
        start_to_close_timeout=READ_TIMEOUT,
        retry_policy=READ_RETRY,
        summary="cancel this job: a job it runs after failed",
    )


async def tell(watchers: Sequence[str], me: str, status: JobStatus) -> None:
    """Tell each watcher how this job settled (one that is gone needs nothing)."""
    report = SlotFinished(job_id=me, status=status)

    async def one(job_id: str) -> None:
        with contextlib.suppress(FailureError):
            handle = workflow.get_external_workflow_handle(job_id)
            await handle.signal(names.SIGNAL_DEPENDENCY_SETTLED, report)

    await asyncio.gather(*(one(job_id) for job_id in watchers))
