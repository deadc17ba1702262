"""Human-readable output for the CLI (``--json`` prints the models instead)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from jobctl.workflows import cronmath
from jobctl.workflows.durations import format_duration
from jobctl.workflows.jobstatus import current_attempt, last_attempt, ran_at
from jobctl.workflows.models import AuditEntry, CronReport, JobReport, JobStatus

# Statuses of a job that has ended (a dead job waiting for requeue has not).
ENDED = (JobStatus.DONE, JobStatus.CANCELLED, JobStatus.DISCARDED)


def when(moment: datetime | None, now: datetime | None = None) -> str:
    """``2026-11-30T10:00:00Z (in 5m)``; blank for None."""
    if moment is None:
        return "-"
    now = now or datetime.now(UTC)
    stamp = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    delta = (moment - now).total_seconds()
    relative = f"in {format_duration(delta)}" if delta >= 0 else f"{format_duration(-delta)} ago"
    return f"{stamp} ({relative})"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [
        max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)
    ]
    lines = [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=False))
        for row in [headers, *rows]
    ]
    return "\n".join(line.rstrip() for line in lines)


def status_line(report: JobReport, now: datetime) -> str:
    """The one-line status: the status the rule computed, with its attempt numbering
    (:mod:`workflows.jobstatus`, the one home of "attempt n of m")."""
    current = current_attempt(report.attempts, report.round, report.max_attempts)
    ended = last_attempt(report.attempts, report.max_attempts)
    total = len([a for a in report.attempts if a.spent])
    detail = getattr(report, "status_detail", None)
    match report.status:
        case JobStatus.SCHEDULED:
            worker = f" ({detail})" if detail else ""
            return f"scheduled: runs at {when(report.run_at, now)}{worker}"
        case JobStatus.PAUSED:
            until = f" until {when(report.paused_until, now)}" if report.paused_until else ""
            return f"paused{until}"
        case JobStatus.PENDING if getattr(report, "waiting_for", None):
            return f"pending: due, {report.waiting_for}"
        case JobStatus.PENDING:
            nxt = f"{current.label} " if report.attempts else ""
            return f"pending: {nxt}due, waiting for a worker"
        case JobStatus.RUNNING:
            beat = f", last heartbeat {when(report.last_heartbeat_at, now)}"
            return (
                f"running on {report.worker or '?'}, {current.label}"
                f"{beat if report.last_heartbeat_at else ''}"
            )
        case JobStatus.RETRYING:
            failed = f"{ended.label} failed; " if ended else ""
            return f"retrying: {failed}next attempt {when(report.next_attempt_at, now)}"
        case JobStatus.DEAD if detail:
            return f"dead: {detail}"
        case JobStatus.DEAD:
            last = f" (last: {ended.label})" if ended else ""
            return f"dead after {total} attempt(s){last}: waiting for requeue or discard"
        case JobStatus.DISCARDED:
            return f"discarded after {total} attempt(s): ended for good, it cannot be requeued"
        case JobStatus.DONE:
            return f"done: succeeded on {ended.label}" if ended else "done"
        case JobStatus.CANCELLING:
            return cancelling_line(report, now)
        case _:
            return f"{report.status} ({detail})" if detail else str(report.status)


def time_line(report: JobReport, now: datetime) -> str:
    """``run at:`` while the job is ahead or under way; once it has ended, when it ran (a
    finished job never shows a future run time)."""
    closed_dead = report.status == JobStatus.DEAD and getattr(report, "status_detail", None)
    if report.status not in ENDED and not closed_dead:
        return f"run at:  {when(report.run_at, now)}"
    first = ran_at(report.attempts)
    return f"ran at:  {when(first, now)}" if first else "ran at:  never ran"


def cancelling_line(report: JobReport, now: datetime) -> str:
    """``cancelling: requested ... ago; the cancel reaches the handler within ~10s``."""
    asked = [e.at for e in report.audit if e.action == "cancel"]
    since = f"requested {when(asked[-1], now)}; " if asked else ""
    if report.cancel_within is not None:
        bound = format_duration(report.cancel_within)
        return f"cancelling: {since}the cancel reaches the handler within ~{bound} of the request"
    return f"cancelling: {since}no handler is running, it settles without one"


def report_text(report: JobReport, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    lines = [
        f"{report.job_id}  {report.name}  (handler {report.handler})",
        f"status:  {status_line(report, now)}",
        time_line(report, now),
        f"key:     {report.idempotency_key}",
    ]
    if getattr(report, "after", None):
        lines.append("after:   " + ", ".join(f"{i} ({s})" for i, s in report.after.items()))
    if report.last_error:
        lines.append(f"error:   {report.last_error}")
    if report.attempts:
        rows = [
            [
                str(a.attempt),
                str(a.round),
                when(a.started_at, now),
                f"{(a.ended_at - a.started_at).total_seconds():.2f}s" if a.ended_at else "-",
                a.worker,
                a.outcome,
                f"{a.error_type}: {a.error}" if a.error else "",
            ]
            for a in report.attempts
        ]
        lines += ["", table(["#", "round", "started", "took", "worker", "outcome", "error"], rows)]
    lines += audit_table(report.audit, now)
    return "\n".join(lines)


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())


def audit_table(entries: Sequence[AuditEntry], now: datetime) -> list[str]:
    """The audit trail, oldest first: when (server time), action, who, note, detail."""
    if not entries:
        return []
    rows = [
        [when(e.at, now), e.action, e.actor, _one_line(e.note), _one_line(e.detail)]
        for e in entries
    ]
    return ["", table(["audit trail", "action", "by", "note", "detail"], rows)]


def dst_text(report: CronReport) -> str:
    """``gap shift, repeat first (default for a fixed time)``: the DST policy in force."""
    if report.dst_repeat is not None:
        return f"gap {report.dst_gap}, repeat {report.dst_repeat}"
    try:
        every_hour = cronmath.parse(report.cron).every_hour
    except cronmath.CronError:
        return f"gap {report.dst_gap}, repeat default"
    kind = "an interval" if every_hour else "a fixed time"
    repeat = cronmath.repeat_rule(None, every_hour)
    return f"gap {report.dst_gap}, repeat {repeat} (default for {kind})"


def cron_text(report: CronReport, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    state = str(report.status)
    if report.paused_until:
        state += f" until {when(report.paused_until, now)}"
    lines = [
        f"{report.job_id}  {report.name}  (handler {report.handler})",
        f"status:  {state}",
        f"cron:    {report.cron}  in {report.timezone}, overlap {report.overlap}",
        f"dst:     {dst_text(report)}",
        f"next:    {when(report.run_at, now)}",
        "",
        table(["next slots (local)", "utc"], [[s.local, s.utc] for s in report.next_slots]),
    ]
    if report.recent_slots:
        rows = [
            [when(r.slot, now), r.outcome, r.job_id or "", str(r.status or ""), r.detail]
            for r in report.recent_slots
        ]
        lines += ["", table(["recent slots", "outcome", "job", "status", "detail"], rows)]
    if report.counts:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(report.counts.items()))
        lines += ["", f"counts:  {counts}"]
    lines += audit_table(report.audit, now)
    return "\n".join(lines)


def any_report_text(report: JobReport | CronReport) -> str:
    return cron_text(report) if isinstance(report, CronReport) else report_text(report)
