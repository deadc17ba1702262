"""Text for the Temporal Web UI (user metadata): pure functions, passed through the sandbox.

Static summary and details are set by whoever starts a job (starter/operations.py, or the
cron for its slots); current details are set by the workflows as a job's state changes. The
server caps a summary at 400 bytes of serialized payload (a JSON string), so summaries stay
below.
"""

from __future__ import annotations

from datetime import UTC, datetime

from jobctl.workflows import cronmath
from jobctl.workflows.durations import format_duration
from jobctl.workflows.models import AuditEntry, JobSpec
from jobctl.workflows.textclip import SUMMARY_BYTES
from jobctl.workflows.textclip import clip_line as clip

ERROR_BYTES = 300
AUDIT_LINES = 3  # the newest trail entries the current details show
NOTE_BYTES = 160


def md(text: str) -> str:
    """Plain text in Markdown: one line, with Markdown's punctuation escaped."""
    out = " ".join(text.split())
    for char in "\\`*_[]<>#|~":
        out = out.replace(char, "\\" + char)
    return out


def code(text: str, limit: int = SUMMARY_BYTES) -> str:
    """An inline code span (a backtick inside would end it early)."""
    return "`" + clip(text, limit).replace("`", "'") + "`"


def moment_text(moment: datetime, timezone: str = "UTC") -> str:
    """``2026-12-01 09:00 UTC``; in another zone ``2026-12-01 10:00 Europe/Paris (09:00 UTC)``.
    Seconds only when there are any."""
    utc = moment.astimezone(UTC)
    clock = "%H:%M" if utc.second == 0 and utc.microsecond == 0 else "%H:%M:%S"
    text = utc.strftime(f"%Y-%m-%d {clock}")
    if timezone == "UTC":
        return f"{text} UTC"
    local = moment.astimezone(cronmath.zone(timezone))
    utc_part = utc.strftime(clock if local.date() == utc.date() else f"%Y-%m-%d {clock}")
    return f"{local.strftime(f'%Y-%m-%d {clock}')} {timezone} ({utc_part} UTC)"


def job_summary(spec: JobSpec, when: str | None = None) -> str:
    """The one-line static summary: ``send-report · http.post · at 2026-12-01 09:00 UTC``
    (a cron: ``... · cron 0 9 * * 1-5 Europe/Paris``)."""
    if when is None:
        if spec.cron is not None:
            when = f"cron {spec.cron} {spec.timezone}"
        else:
            assert spec.run_at is not None
            when = f"at {moment_text(spec.run_at, spec.timezone)}"
    return clip(f"{clip(spec.name, 150)} · {clip(spec.handler, 100)} · {when}")


def job_details(spec: JobSpec, origin: str | None = None) -> str:
    """The static details (Markdown): what the job runs, when, and how hard it tries."""
    if spec.cron is not None:
        schedule = f"cron {code(spec.cron)} in {md(spec.timezone)}"
    else:
        assert spec.run_at is not None
        schedule = f"once, at {moment_text(spec.run_at, spec.timezone)}"
    backoff = (
        f"backoff from {format_duration(spec.backoff_base)} doubling to at most "
        f"{format_duration(spec.backoff_max)}, jitter {spec.jitter:g}"
    )
    lines = [
        f"**{md(clip(spec.name))}** runs handler {code(spec.handler)}",
        "",
        f"- job id: {code(spec.id)}",
        f"- schedule: {schedule}",
    ]
    if origin:
        lines.append(f"- {origin}")
    if spec.cron is not None:
        lines.append(
            f"- overlap {spec.overlap}, catch-up window {format_duration(spec.catchup_window)}"
            f", schedule jitter {format_duration(spec.schedule_jitter)}"
        )
    lines += [
        f"- attempts: up to {spec.max_attempts} ({backoff})",
        f"- lease {format_duration(spec.lease)} · timeout {format_duration(spec.timeout)} "
        "per attempt",
        f"- idempotency key: {code(spec.key)}",
    ]
    return "\n".join(lines)


def audit_text(entry: AuditEntry, timezone: str = "UTC") -> str:
    """``pause by `cli:ana` at 2026-12-01 09:00 UTC (until ...): "disk full"`` (Markdown)."""
    text = f"{entry.action} by {code(entry.actor, 100)} at {moment_text(entry.at, timezone)}"
    if entry.detail:
        text += f" ({md(clip(entry.detail, NOTE_BYTES))})"
    if entry.note:
        text += f": “{md(clip(entry.note, NOTE_BYTES))}”"
    return text


def audit_details(entries: list[AuditEntry], timezone: str = "UTC") -> str:
    """The tail of the audit trail for the current details: a Markdown list, newest last;
    empty when nobody has acted on the job."""
    if not entries:
        return ""
    shown = entries[-AUDIT_LINES:]
    head = f"operator actions (last {len(shown)} of {len(entries)}):"
    return "\n".join([head, *(f"- {audit_text(entry, timezone)}" for entry in shown)])
