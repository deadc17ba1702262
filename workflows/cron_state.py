"""What ``CronJobWorkflow`` does with its :class:`CronState` (carried across continue-as-new),
as pure functions: how a slot is recorded, which slots come next and which are shown, how a
backlog (an outage, a pause, slots due while one ran) is recorded, how a slot's end settles,
and the ``status`` report and Web UI details built from the state. They take the time
(``workflow.now()``) and the run's own bookkeeping as arguments and call no workflow API, so
tests/test_cron_state.py checks them without a server."""

from __future__ import annotations

from datetime import datetime, timedelta

import jobctl.workflows.cronmath as cronmath
from jobctl.workflows.cron_rules import MAX_BACKLOG_RECORDS, NEXT_SLOTS, RECENT_SLOTS, Schedule
from jobctl.workflows.models import (
    CronReport,
    CronState,
    JobSpec,
    JobStatus,
    SlotOutcome,
    SlotRecord,
    SlotTime,
)
from jobctl.workflows.uitext import audit_details, moment_text


def runs_left(spec: JobSpec, state: CronState) -> int | None:
    """Slots still allowed to start a job under ``max_runs`` (None: no limit). Only
    scheduled slots count ("ran"); manual runs and backfills do not (as in Temporal)."""
    if spec.max_runs is None:
        return None
    return max(0, spec.max_runs - state.counts.get("ran", 0))


def end_reason(spec: JobSpec, state: CronState) -> str:
    """Why a cron whose bounds allow no further slot is done."""
    if runs_left(spec, state) == 0:
        return f"max_runs reached ({spec.max_runs} slots ran)"
    assert spec.end is not None
    return f"no slot before end {moment_text(spec.end, spec.timezone)}"


def record(
    state: CronState,
    slot: datetime,
    outcome: SlotOutcome,
    job_id: str | None = None,
    status: JobStatus | None = None,
    detail: str = "",
) -> None:
    """Count the slot's outcome and keep its record among the RECENT_SLOTS newest."""
    state.counts[outcome] = state.counts.get(outcome, 0) + 1
    state.recent.append(
        SlotRecord(slot=slot, outcome=outcome, job_id=job_id, status=status, detail=detail)
    )
    del state.recent[:-RECENT_SLOTS]


def settle(state: CronState, job_id: str, status: JobStatus) -> bool:
    """A slot's job settled: it runs no more and its records show ``status``. True if it was
    still counted as running."""
    running = state.running.pop(job_id, None) is not None
    for entry in state.recent:
        if entry.job_id == job_id:
            entry.status = status
    return running


def upcoming(schedule: Schedule, state: CronState) -> list[datetime]:
    """The next slots within the bounds (at most NEXT_SLOTS and the runs left)."""
    assert state.last_slot is not None
    left = runs_left(schedule.spec, state)
    slots: list[datetime] = []
    after = state.last_slot
    for _ in range(NEXT_SLOTS if left is None else min(NEXT_SLOTS, left)):
        slot = schedule.slot_after(after)
        if slot is None:
            break
        slots.append(slot)
        after = slot
    return slots


def shown_next(
    schedule: Schedule, state: CronState, now: datetime, overlap_wait: bool
) -> list[datetime]:
    """The next slots as shown: a slot whose job started ahead (and waits for its time)
    first; while the running slot's end decides the slots already due, only those ahead."""
    slots = upcoming(schedule, state)
    if overlap_wait:
        slots = [slot for slot in slots if slot > now]
    started_ahead = sorted(slot for slot in state.running.values() if slot > now)
    return (started_ahead + slots)[:NEXT_SLOTS]


def skip_backlog(
    schedule: Schedule, state: CronState, until: datetime, outcome: SlotOutcome, detail: str
) -> None:
    """Record the slots up to ``until`` that will not run (missed, paused or skipped)."""
    assert state.last_slot is not None
    for _ in range(MAX_BACKLOG_RECORDS):
        slot = schedule.slot_after(state.last_slot)
        if slot is None or slot > until:
            return
        state.last_slot = slot
        record(state, slot, outcome, detail=detail)
    # A long outage of a frequent cron: jump ahead rather than walk every slot.
    state.last_slot = until
    record(state, until, outcome, detail=f"and more slots up to this time ({detail})")


def missed(
    schedule: Schedule, state: CronState, slot: datetime, fire_at: datetime, now: datetime
) -> bool:
    """A due slot later than the catch-up window is recorded as missed (with every slot due
    before it that is as late); True if it was."""
    spec = schedule.spec
    if now - fire_at <= timedelta(seconds=spec.catchup_window):
        return False
    detail = f"beyond the {spec.catchup_window:g}s catch-up window"
    # Every slot at or before this threshold is late by more than the window.
    threshold = now - timedelta(seconds=spec.catchup_window + spec.schedule_jitter)
    if slot <= threshold:
        skip_backlog(schedule, state, threshold, "missed", detail)
    else:
        state.last_slot = slot
        record(state, slot, "missed", detail=detail)
    return True


def held(spec: JobSpec, state: CronState, slot: datetime) -> bool:
    """A due slot while another runs, under ``skip`` or ``buffer_one``: recorded as skipped,
    or buffered (it runs when the running slot finishes); True if so (it does not start)."""
    if not state.running:
        return False
    if spec.overlap == "skip":
        record(state, slot, "skipped", detail=f"{len(state.running)} slot(s) still running")
        return True
    if spec.overlap == "buffer_one":
        if state.buffered is None:
            state.buffered = slot
            record(state, slot, "buffered", detail="runs when the running slot finishes")
        else:
            record(state, slot, "skipped", detail="one slot is already buffered")
        return True
    return False


def decide_overlapped(schedule: Schedule, state: CronState, until: datetime) -> None:
    """Record the slots due up to ``until`` while a slot ran (the first may be buffered), as
    the overlap policy would have at their time."""
    assert state.last_slot is not None
    slot = schedule.slot_after(state.last_slot)
    if slot is None or slot > until:
        return
    state.last_slot = slot
    detail = "a slot was still running"
    if schedule.spec.overlap == "buffer_one" and state.buffered is None:
        state.buffered = slot
        record(state, slot, "buffered", detail="runs when the running slot finishes")
        detail = "one slot is already buffered"
    else:
        record(state, slot, "skipped", detail=detail)
    skip_backlog(schedule, state, until, "skipped", detail)


def snapshot(state: CronState, untracked: set[str]) -> CronState:
    """The state the next run starts with (one generation on). A forced rotation leaves out
    the children this run tracks (``untracked``): the next run cannot hear their end."""
    carried = state.model_copy(update={"generation": state.generation + 1}, deep=True)
    for job_id in untracked:
        carried.running.pop(job_id, None)
    return carried


def status_of(state: CronState, cancelled: bool, ended: str | None) -> JobStatus:
    if cancelled:
        return JobStatus.CANCELLED
    if ended is not None:
        return JobStatus.DONE
    return JobStatus.PAUSED if state.paused else JobStatus.SCHEDULED


def details_text(
    schedule: Schedule,
    state: CronState,
    now: datetime,
    *,
    cancelled: bool,
    ended: str | None,
    triggers: int,
    overlap_wait: bool,
    planned: datetime | None,
) -> str:
    """``**scheduled** · next slot ... · running: 1 · last slot ... ran (done) · ran 12``,
    from state only, so replay rebuilds the same text (``planned``: the slot the run waits
    for, if any)."""
    zone = schedule.spec.timezone
    assert state.last_slot is not None
    if cancelled:
        parts = ["**cancelled**", "no further slots"]
    elif ended is not None:
        parts = ["**done**", ended]
    elif state.paused:
        until = state.paused_until
        parts = ["**paused**", f"until {moment_text(until, zone)}" if until else "until resumed"]
    else:
        if overlap_wait or state.running:  # a slot started ahead shows first
            shown = shown_next(schedule, state, now, overlap_wait)
            nxt = shown[0] if shown else None
        else:  # the planned slot when there is one (no cron computation per wait)
            nxt = planned or schedule.slot_after(state.last_slot)
        parts = ["**scheduled**", f"next slot {moment_text(nxt, zone) if nxt else 'none'}"]
    if triggers:
        parts.append(f"{triggers} manual run(s) queued")
    if state.running:
        parts.append(f"running: {len(state.running)}")
    if state.buffered is not None:
        parts.append(f"buffered: {moment_text(state.buffered, zone)}")
    if state.recent:
        last = state.recent[-1]
        settled = f" ({last.status})" if last.status else ""
        parts.append(f"last slot {moment_text(last.slot, zone)} {last.outcome}{settled}")
    if state.counts:
        parts.append(", ".join(f"{k} {v}" for k, v in sorted(state.counts.items())))
    trail = audit_details(state.audit, zone)
    return " · ".join(parts) + (f"\n\n{trail}" if trail else "")


def report(
    schedule: Schedule,
    state: CronState,
    now: datetime,
    *,
    cancelled: bool,
    ended: str | None,
    overlap_wait: bool,
) -> CronReport:
    """What the ``status`` query answers (and every control returns)."""
    spec = schedule.spec
    shown = [] if ended is not None else shown_next(schedule, state, now, overlap_wait)
    return CronReport(
        job_id=spec.id,
        name=spec.name,
        handler=spec.handler,
        status=status_of(state, cancelled, ended),
        cron=schedule.cron.expression,
        timezone=spec.timezone,
        overlap=spec.overlap,
        run_at=None if cancelled or not shown else shown[0],
        paused_until=state.paused_until,
        next_slots=[
            SlotTime(local=local, utc=utc)
            for local, utc in cronmath.slot_times(shown, schedule.zone)
        ],
        recent_slots=list(reversed(state.recent)),
        running=sorted(state.running),
        counts=dict(state.counts),
        generation=state.generation,
        audit=list(state.audit),
        **spec.scheduling(),
    )
