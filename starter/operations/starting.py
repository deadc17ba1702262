"""Starting jobs: a one-shot as a delayed ``JobWorkflow``, a cron as a ``CronJobWorkflow``.

:func:`schedule` is the one entry for callers holding a submission (parsed once by
:func:`~.validation.submission`); :func:`start` starts an already validated spec.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field
from temporalio.client import Client
from temporalio.common import (
    Priority,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from jobctl.connection import build
from jobctl.connection.client import task_queue as default_task_queue
from jobctl.starter.errors import JobExists, SpecError
from jobctl.starter.operations.dependencies import check_after
from jobctl.starter.operations.handler_watch import schedule_warnings
from jobctl.starter.operations.handlers import HandlerCatalog, known_handlers
from jobctl.starter.operations.rpc import temporal_errors
from jobctl.starter.operations.validation import Submission, check_handler, submission
from jobctl.starter.operations.wakeplan import (
    MAX_AUTO_LEAD,
    MIN_DISPATCH_LEAD,
    WakePlan,
    covering_lead,
)
from jobctl.workflows import cronmath, names
from jobctl.workflows.cron_rules import (
    bounded_next_slot,
    cron_details,
    cron_memo,
    cron_search_attributes,
    cron_summary,
)
from jobctl.workflows.job_rules import activity_priority, start_search_attributes
from jobctl.workflows.models import JOB_RUN_AT, CronInput, CronState, JobSpec, JobStatus
from jobctl.workflows.uitext import job_details, job_summary

__all__ = ["MIN_DISPATCH_LEAD", "Scheduled", "schedule", "start"]

# This process's planned wakes: a herd it schedules is spread over its notice (wakeplan.py).
WAKES = WakePlan()


class Scheduled(BaseModel):
    """The answer to a schedule: the job's id and its next run (``created`` False when an
    identical request had already created it)."""

    job_id: str
    next_run_at: datetime | None
    created: bool = True
    warnings: list[str] = Field(
        default_factory=list,
        description="What the job may wait for: e.g. no live worker serves its handler.",
    )


async def schedule(
    client: Client,
    data: dict[str, Any] | JobSpec | Submission,
    handlers: Iterable[str] | None = None,
    now: datetime | None = None,
    task_queue: str | None = None,
    siblings: Collection[str] = (),
) -> Scheduled:
    """Validate and start a job. Nothing starts if anything is wrong.

    ``data`` is what the caller sent, or the :class:`~.validation.Submission` it already
    parsed (then it is not parsed again). ``handlers`` defaults to
    :func:`~.handlers.known_handlers`. ``now`` (default: this machine's clock) anchors
    ``delay``; tests pass the server's time. ``task_queue`` None is ``JOBS_TASK_QUEUE``.
    ``after`` must name existing jobs, or ``siblings`` (ids of the same request's other jobs).
    See :func:`start` for ids and retries.
    """
    now = now or datetime.now(UTC)
    checked = submission(data, now)  # every spec problem, before asking the server anything
    queue = task_queue or default_task_queue()
    known = handlers if handlers is not None else await known_handlers(client, queue)
    check_handler(checked.spec.handler, known, checked.spec.payload)
    await check_after(client, checked.spec, siblings)
    scheduled = await start(client, checked.spec, now, checked.request, queue)
    if isinstance(known, HandlerCatalog) and known.advisory:
        scheduled.warnings = await schedule_warnings(client, queue, checked.spec, known)
    return scheduled


async def start(
    client: Client,
    spec: JobSpec,
    now: datetime,
    request: str | None = None,
    task_queue: str | None = None,
) -> Scheduled:
    """Start an already validated spec (see :func:`~.validation.validate_spec`).

    One-shots start with ``start_delay`` so they cost the server nothing until due. Job ids
    are unique for good. Sending the same request (same ``request`` fingerprint) again
    answers with the existing job (``created=False``); a different one with a taken id
    raises JobExists. ``task_queue`` None is ``JOBS_TASK_QUEUE``.
    """
    memo: dict[str, Any] = {}
    if request:
        memo[names.MEMO_REQUEST] = request
    queue = task_queue or default_task_queue()
    async with temporal_errors():
        try:
            if spec.cron is not None:
                return await _start_cron(client, spec, now, memo, queue)
            await _start_job(client, spec, now, memo, queue)
        except WorkflowAlreadyStartedError as err:
            existing = await client.get_workflow_handle(spec.id).describe()
            if request and (await existing.memo()).get(names.MEMO_REQUEST) == request:
                run_at = existing.typed_search_attributes.get(JOB_RUN_AT)
                return Scheduled(job_id=spec.id, next_run_at=run_at, created=False)
            raise JobExists(f"a job with id {spec.id!r} already exists") from err
    return Scheduled(job_id=spec.id, next_run_at=spec.run_at)


async def _start_cron(
    client: Client, spec: JobSpec, now: datetime, memo: dict[str, Any], queue: str
) -> Scheduled:
    assert spec.cron is not None
    # The first slot at or after start (and not before now), under the DST policy.
    try:
        first = bounded_next_slot(
            spec, cronmath.parse(spec.cron), cronmath.zone(spec.timezone), now
        )
    except cronmath.SkippedByGapError as err:  # every time it names falls in a DST gap
        raise SpecError([("dst_gap", str(err))]) from err
    if first is None:
        raise SpecError([("end", "the cron has no slot between now (or start) and end")])
    await _start_with_build_ids(
        client,
        names.CRON_WORKFLOW,
        # Slots count from the instant `first` was computed from, so the slot promised here
        # runs even if the cron's first workflow task comes after it (or is recorded missed).
        CronInput(spec=spec, state=CronState(last_slot=now)),
        id=spec.id,
        task_queue=queue,
        memo={**memo, names.MEMO_SCHEDULE: cron_memo(spec)},
        search_attributes=cron_search_attributes(spec, JobStatus.SCHEDULED, first),
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        static_summary=cron_summary(spec),
        static_details=cron_details(spec),
        # Its workflow tasks, and each slot's job (a child inherits it), go by the job's
        # priority and fairness key on the task queue.
        priority=activity_priority(spec) or Priority.default,
    )
    return Scheduled(job_id=spec.id, next_run_at=first)


async def _start_job(
    client: Client, spec: JobSpec, now: datetime, memo: dict[str, Any], queue: str
) -> None:
    run_at = spec.run_at
    assert run_at is not None
    # Wake ahead of run_at by the lead rule (wakeplan.py): 15-30 s for a lone job; a herd
    # this process schedules fills its notice backwards at the rate the cluster carries.
    auto = "dispatch_lead" not in spec.model_fields_set
    lead, second = WAKES.lead(
        run_at.timestamp(),
        now.timestamp(),
        floor=min(MIN_DISPATCH_LEAD, spec.dispatch_lead),
        first=spec.dispatch_lead,
        bound=MAX_AUTO_LEAD if auto and spec.dispatch_lead else spec.dispatch_lead,
    )
    if (covering := covering_lead(lead, spec.dispatch_lead)) is not None:
        spec = spec.model_copy(update={"dispatch_lead": covering})  # hand over at the wake
    delay = run_at - now - timedelta(seconds=lead)
    try:
        await _start_delayed(client, spec, delay, memo, queue)
    except BaseException:
        WAKES.release(second)
        raise


async def _start_delayed(
    client: Client, spec: JobSpec, delay: timedelta, memo: dict[str, Any], queue: str
) -> None:
    """Start the job's workflow ``delay`` from now (at once if not positive).

    A job that starts now asks for its first workflow task in the start's answer (eager
    start), for a worker this process runs on the same client: ``jobctl dev``, or a program
    that runs a worker and schedules. That task then skips the task queue, a write and a
    dispatch fewer on the server. The SDK asks only when such a worker has a free slot;
    otherwise the start is the ordinary one. A job with a priority or fairness key goes
    through the queue, where backlogged tasks are ordered by them: an eager start would pass
    the backlog.
    """
    priority = activity_priority(spec)
    await _start_with_build_ids(
        client,
        names.JOB_WORKFLOW,
        spec,
        id=spec.id,
        task_queue=queue,
        memo=memo,
        start_delay=delay if delay > timedelta(0) else None,
        request_eager_start=delay <= timedelta(0) and priority is None,
        search_attributes=start_search_attributes(spec, JobStatus.SCHEDULED),
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        static_summary=job_summary(spec),
        static_details=job_details(spec),
        # The job's workflow tasks wait on the task queue by its priority and fairness key
        # too, not only its run_job attempts: an urgent job is not stuck behind a backlog's.
        priority=priority or Priority.default,
    )


async def _start_with_build_ids(
    client: Client,
    workflow: str,
    arg: Any,
    *,
    search_attributes: TypedSearchAttributes,
    **options: Any,
) -> None:
    """``start_workflow`` with this build's ``BuildIds`` preset (connection.build), so the
    workflow's first task costs the server no visibility write; again without it if the
    server refuses the preset."""
    try:
        await client.start_workflow(
            workflow, arg, search_attributes=build.preset(search_attributes), **options
        )
    except RPCError as err:
        if not build.refused(err):
            raise
        await client.start_workflow(workflow, arg, search_attributes=search_attributes, **options)
