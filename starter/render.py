"""Human-readable output for the CLI (``--json`` prints the models instead)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from workflows.durations import format_duration
from workflows.models import AuditEntry, CronReport, JobReport, JobStatus


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
    done = [a for a in report.attempts if a.round == report.round]
    match report.status:
        case JobStatus.SCHEDULED:
            return f"scheduled: runs at {when(report.run_at, now)}"
        case JobStatus.PAUSED:
            until = f" until {when(report.paused_until, now)}" if report.paused_until else ""
            return f"paused{until}"
        case JobStatus.PENDING:
            return "pending: due, waiting for a worker"
        case JobStatus.RUNNING:
            beat = f", last heartbeat {when(report.last_heartbeat_at, now)}"
            return (
                f"running on {report.worker or '?'}, attempt {len(done)} of "
                f"{report.max_attempts}{beat if report.last_heartbeat_at else ''}"
            )
        case JobStatus.RETRYING:
            return (
                f"retrying: attempt {len(done)} of {report.max_attempts} failed; next attempt "
                f"{when(report.next_attempt_at, now)}"
            )
        case JobStatus.DEAD:
            return f"dead after {len(report.attempts)} attempts: waiting for requeue or discard"
        case JobStatus.CANCELLING:
            return cancelling_line(report, now)
        case _:
            return str(report.status)


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
        f"run at:  {when(report.run_at, now)}",
        f"key:     {report.idempotency_key}",
    ]
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


def cron_text(report: CronReport, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    state = str(report.status)
    if report.paused_until:
        state += f" until {when(report.paused_until, now)}"
    lines = [
        f"{report.job_id}  {report.name}  (handler {report.handler})",
        f"status:  {state}",
        f"cron:    {report.cron}  in {report.timezone}, overlap {report.overlap}",
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
