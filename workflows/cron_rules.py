"""The pure rules of ``CronJobWorkflow``: a cron's :class:`Schedule` (its spec, parsed), how a
slot's child ended, the search attributes and memo a cron starts with, a cron's next run read
from its memo (for listings), the spec of one slot's job, the checks of the ``update`` and
``backfill`` updates and the texts the Web UI shows. No workflow state here; the starters read
these too. What the workflow does with its :class:`CronState` is in
:mod:`workflows.cron_state`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError, TerminatedError, is_cancelled_exception

import jobctl.workflows.cronmath as cronmath
import jobctl.workflows.inbox as inbox
import jobctl.workflows.jobstatus as js
from jobctl.workflows.models import (
    CONTROL_CUTOFF,
    JOB_HANDLER,
    JOB_NAME,
    JOB_RUN_AT,
    JOB_STATUS,
    ControlRequest,
    CronUpdate,
    JobReport,
    JobSpec,
    JobStatus,
)
from jobctl.workflows.models.cron import BackfillOverlap, BackfillRequest
from jobctl.workflows.uitext import job_details, job_summary, moment_text

RECENT_SLOTS = 20
NEXT_SLOTS = 5
# Slots that came due while paused or while no worker ran are recorded one by one up to
# this many; beyond it the cron jumps ahead and records one summary line.
MAX_BACKLOG_RECORDS = 100
# A run waiting for the children it tracks before continuing-as-new rotates anyway beyond
# this many times its event budget.
FORCED_ROTATION = 2
# A backfill covers at most this many slots (a day of a per-minute cron): the workflow counts
# them in one task (the update), and 10,000 took over the SDK's 2 s deadlock limit on a busy
# machine, failing that task again and again; backfills start their slots this many per
# workflow task; at most this many wait in one cron.
MAX_BACKFILL_SLOTS = 2_000
BACKFILL_BATCH = 50
MAX_QUEUED_BACKFILLS = 10
# "at or after t" as "strictly after t - 1 µs": slots are whole seconds.
_TICK = timedelta(microseconds=1)


class BackfillTooLarge(ValueError):
    """A backfill range with more than MAX_BACKFILL_SLOTS slots."""


@dataclass(frozen=True)
class Schedule:
    """A cron's spec with its expression and zone parsed (replaced whole by ``update``)."""

    spec: JobSpec
    cron: cronmath.Cron
    zone: ZoneInfo

    @classmethod
    def of(cls, spec: JobSpec) -> Schedule:
        assert spec.cron is not None
        return cls(spec, cronmath.parse(spec.cron), cronmath.zone(spec.timezone))

    def next_slot(self, after: datetime) -> datetime | None:
        """The next slot within the bounds (see bounded_next_slot: CronError when none at all)."""
        return bounded_next_slot(self.spec, self.cron, self.zone, after)

    def slot_after(self, after: datetime) -> datetime | None:
        """The next slot within the bounds, or None when there is none (for display and for
        walking a backlog; the run loop lets CronError through and fails the cron)."""
        try:
            return self.next_slot(after)
        except cronmath.CronError:
            return None


def bounded_next_slot(
    spec: JobSpec, cron: cronmath.Cron, zone: ZoneInfo, after: datetime
) -> datetime | None:
    """The cron's next slot strictly after ``after`` within its bounds (never before
    ``start``; None past ``end``), under its DST policy. Raises CronError when the schedule
    has no slot at all (dates end with year 9999)."""
    if spec.start is not None:
        after = max(after, spec.start - _TICK)
    slot = cronmath.next_slot(cron, zone, after, gap=spec.dst_gap, repeat=spec.dst_repeat)
    return None if spec.end is not None and slot > spec.end else slot


def backfill_slots(
    spec: JobSpec,
    cron: cronmath.Cron,
    zone: ZoneInfo,
    first: datetime,
    last: datetime,
    limit: int = MAX_BACKFILL_SLOTS,
) -> list[datetime]:
    """Every slot in [first, last] within the cron's bounds; BackfillTooLarge beyond
    ``limit`` slots (counting stops at limit + 1)."""
    slots: list[datetime] = []
    after = first - _TICK
    while True:
        try:
            slot = bounded_next_slot(spec, cron, zone, after)
        except cronmath.CronError:
            slot = None
        if slot is None or slot > last:
            return slots
        if len(slots) == limit:
            raise BackfillTooLarge(
                f"the range holds more than {limit:,} slots; backfill a shorter range "
                "(several backfills run one after another)"
            )
        slots.append(slot)
        after = slot


def backfill_start(first: datetime) -> datetime:
    """A backfill's cursor: its slots are those strictly after this instant."""
    return first - _TICK


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


def child_end(task: asyncio.Future[Any]) -> datetime | None:
    """When a slot's child that completed with its report ran its handler last (None when it
    ended otherwise, or ran none)."""
    if task.cancelled() or task.exception() is not None:
        return None
    report: JobReport = task.result()
    return max((a.ended_at for a in report.attempts if a.ended_at is not None), default=None)


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
    memo = {"cron": spec.cron, "timezone": spec.timezone}
    # Bounds and DST policy only when set: a default cron's memo is what it always was.
    for name in ("start", "end", "dst_gap", "dst_repeat"):
        value = getattr(spec, name)
        if value != JobSpec.model_fields[name].default:
            memo[name] = value.isoformat() if isinstance(value, datetime) else str(value)
    return memo


def spec_from_memo(schedule: Any) -> JobSpec | None:
    """The schedule a cron's memo holds (expression, zone, bounds, DST policy) as a spec, or
    None when the memo has none or it is not valid (e.g. a cron started before it was set)."""
    if not isinstance(schedule, dict) or not {"cron", "timezone"} <= schedule.keys():
        return None
    fields = {str(key): str(value) for key, value in schedule.items()}
    try:
        return JobSpec.model_validate({"name": "memo", "handler": "memo", **fields})
    except ValueError:  # ValidationError is a ValueError
        return None


def next_run_from_memo(schedule: Any, after: datetime) -> datetime | None:
    """A cron's next slot after ``after`` from its memo's schedule (None when the memo has
    none, or the schedule has no next slot). Paused crons have no next run: callers check
    JobStatus first."""
    spec = spec_from_memo(schedule)
    if spec is None or spec.cron is None:
        return None
    try:
        return bounded_next_slot(
            spec, cronmath.parse(spec.cron), cronmath.zone(spec.timezone), after
        )
    except ValueError:  # CronError is a ValueError
        return None


def start_ahead(spec: JobSpec) -> timedelta:
    """How long before its fire time a slot's job may start when no other slot runs: the
    last 10 s before a job's run_at, in which the job refuses pause and trigger anyway, and
    never more than its dispatch lead, so the job hands its attempt to a worker at once and
    needs no timer of its own (the cron needs none either when the previous slot ended
    that close to this one: a frequent cron's slot costs one timer less)."""
    return min(CONTROL_CUTOFF, timedelta(seconds=spec.dispatch_lead))


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
        rate_key=spec.rate_key,
        rate=spec.rate,
        rate_burst=spec.rate_burst,
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


def lazy_overlap(spec: JobSpec) -> bool:
    """``skip`` and ``buffer_one`` decide a slot that comes due while another runs when that
    one ends (free: its completion), exactly as at the slot's time (a timer), so a running
    slot costs no timer; ``allow_all`` and ``cancel_other`` act at the slot's time."""
    return spec.overlap in ("skip", "buffer_one")


def check_update(change: CronUpdate, schedule: Schedule, now: datetime) -> None:
    """The ``update`` validator: a new expression or zone must parse and have a next slot."""
    # CronError is a ValueError: raising it rejects the update, leaving no trace in history.
    cron = cronmath.parse(change.cron) if change.cron is not None else schedule.cron
    zone = cronmath.zone(change.timezone) if change.timezone is not None else schedule.zone
    inbox.check_request(ControlRequest(actor=change.actor, note=change.note))
    gap, repeat = schedule.spec.dst_gap, schedule.spec.dst_repeat
    cronmath.next_slot(cron, zone, now, gap=gap, repeat=repeat)  # none: refused


def check_backfill(request: BackfillRequest, ended: str | None, queued: int, now: datetime) -> None:
    """The ``backfill`` validator's cheap checks (a ValueError rejects the update)."""
    if not isinstance(request, BackfillRequest):  # a null argument decodes as None
        raise ValueError("cannot backfill: the argument must be an object with from and to")
    inbox.check_request(ControlRequest(actor=request.actor, note=request.note))
    if ended is not None:
        raise ValueError(f"cannot backfill: the cron is done ({ended})")
    if queued >= MAX_QUEUED_BACKFILLS:
        raise ValueError(f"cannot backfill: {MAX_QUEUED_BACKFILLS} backfills are already waiting")
    if request.from_ > request.to:
        raise ValueError("cannot backfill: from is after to")
    if request.to > now:
        raise ValueError(
            "cannot backfill: to is in the future (a backfill runs past slots; the cron "
            "runs the coming ones itself)"
        )


def backfill_plan(
    schedule: Schedule, request: BackfillRequest
) -> tuple[list[datetime], BackfillOverlap]:
    """The slots a backfill covers and how they start (an ApplicationError, which fails the
    update alone, for a range beyond the cap)."""
    spec = schedule.spec
    try:
        slots = backfill_slots(spec, schedule.cron, schedule.zone, request.from_, request.to)
    except BackfillTooLarge as err:
        raise ApplicationError(f"cannot backfill: {err}", non_retryable=True) from None
    default: BackfillOverlap = "allow_all" if spec.overlap == "allow_all" else "buffer_all"
    return slots, request.overlap or default
