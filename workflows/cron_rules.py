"""The pure rules of ``CronJobWorkflow``: how a slot's child ended, the search attributes and
memo a cron starts with, a cron's next run read from its memo (for listings), the spec of one
slot's job and the texts the Web UI shows. No workflow state here; the starters read these
too."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError, TerminatedError, is_cancelled_exception

import workflows.cronmath as cronmath
import workflows.jobstatus as js
from workflows.models import (
    JOB_HANDLER,
    JOB_NAME,
    JOB_RUN_AT,
    JOB_STATUS,
    JobSpec,
    JobStatus,
)
from workflows.uitext import job_details, job_summary, moment_text

RECENT_SLOTS = 20
NEXT_SLOTS = 5
# Slots that came due while paused or while no worker ran are recorded one by one up to
# this many; beyond it the cron jumps ahead and records one summary line.
MAX_BACKLOG_RECORDS = 100
# A run waiting for the children it tracks before continuing-as-new rotates anyway beyond
# this many times its event budget.
FORCED_ROTATION = 2


def drop_outcome(task: asyncio.Future[Any]) -> None:
    """Read a child's end only to drop it (a cancelled slot would otherwise log "exception
    never retrieved")."""
    if not task.cancelled():
        task.exception()


def child_outcome(task: asyncio.Future[Any]) -> JobStatus:
    """How a slot's child ended, from its completion: done, cancelled, discarded or dead."""
    if task.cancelled():
        return JobStatus.CANCELLED
    err = task.exception()
    if err is None:
        return JobStatus.DONE
    cause = getattr(err, "cause", None)
    if is_cancelled_exception(err) or isinstance(cause, TerminatedError):
        return JobStatus.CANCELLED
    if isinstance(cause, ApplicationError) and cause.type == js.DISCARDED_FAILURE:
        return JobStatus.DISCARDED
    return JobStatus.DEAD


def cron_search_attributes(
    spec: JobSpec, status: JobStatus, next_run: datetime
) -> TypedSearchAttributes:
    return TypedSearchAttributes(
        [
            SearchAttributePair(JOB_STATUS, status.value),
            SearchAttributePair(JOB_NAME, spec.name),
            SearchAttributePair(JOB_HANDLER, spec.handler),
            SearchAttributePair(JOB_RUN_AT, next_run),
        ]
    )


def cron_memo(spec: JobSpec) -> dict[str, str]:
    """The memo value under names.MEMO_SCHEDULE: set by the starter at start, kept by
    ``update``."""
    assert spec.cron is not None
    return {"cron": spec.cron, "timezone": spec.timezone}


def next_run_from_memo(schedule: Any, after: datetime) -> datetime | None:
    """A cron's next slot after ``after`` from its memo's schedule (None when the memo has
    none, e.g. a cron started before it was set, or the schedule has no next slot). Paused
    crons have no next run: callers check JobStatus first."""
    if not isinstance(schedule, dict):
        return None
    try:
        cron = cronmath.parse(str(schedule["cron"]))
        return cronmath.next_slot(cron, cronmath.zone(str(schedule["timezone"])), after)
    except (KeyError, ValueError):  # CronError is a ValueError
        return None


def tick_spec(spec: JobSpec, job_id: str, slot: datetime, fire_at: datetime) -> JobSpec:
    """The spec of one slot's job: the cron's, due at the slot's fire time (never before the
    slot), with an idempotency key of its own."""
    key = spec.idempotency_key or spec.id
    return JobSpec(
        id=job_id,
        name=spec.name,
        handler=spec.handler,
        payload=spec.payload,
        run_at=max(fire_at, slot),
        timezone=spec.timezone,
        max_attempts=spec.max_attempts,
        backoff_base=spec.backoff_base,
        backoff_max=spec.backoff_max,
        jitter=spec.jitter,
        lease=spec.lease,
        timeout=spec.timeout,
        idempotency_key=f"{key}@{cronmath.iso_utc(slot)}",
        dispatch_lead=spec.dispatch_lead,
        # Each slot's job inherits where it queues and what it shares (issue 18).
        priority=spec.priority,
        fairness_key=spec.fairness_key,
        fairness_weight=spec.fairness_weight,
        concurrency_key=spec.concurrency_key,
        concurrency_limit=spec.concurrency_limit,
    )


def cron_summary(spec: JobSpec) -> str:
    """``send-report · http.post · cron 0 9 * * 1-5 Europe/Paris``"""
    return job_summary(spec)


def cron_details(spec: JobSpec) -> str:
    return job_details(spec, "each slot runs as its own job, id `<cron id>@<slot in UTC>`")


def tick_summary(spec: JobSpec, slot: datetime, cron: str) -> str:
    """A slot's job: ``send-report · http.post · slot 2026-12-01 09:00 Europe/Paris (08:00
    UTC) of cron 0 9 * * 1-5``."""
    return job_summary(spec, f"slot {moment_text(slot, spec.timezone)} of cron {cron}")
