"""Operator controls and the audit trail jobs and crons keep of them."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, field_validator

from jobctl.workflows.models.instants import OffsetDatetime
from jobctl.workflows.prestart_check import SHORT_WAIT_CUTOFF
from jobctl.workflows.textclip import ellipsize

# Pause acts on a job already dispatched to a worker only up to this long before run_at (10 s;
# longer for an attempt dispatched more than 30 s ahead: workflows.prestart_check).
CONTROL_CUTOFF = timedelta(seconds=SHORT_WAIT_CUTOFF)

MAX_NOTE = 500  # characters of an operator's note (longer is refused by the CLI and the API)
AUDIT_LIMIT = 50  # trail entries a job or cron keeps (newest); a cron carries them over
UNKNOWN_ACTOR = "unknown"  # a control sent without one (e.g. with the bare temporal CLI)

# "rejected": a message dropped by the workflow as invalid (workflows/inbox.py).
AuditAction = Literal[
    "pause",
    "resume",
    "trigger",
    "cancel",
    "requeue",
    "discard",
    "update",
    "backfill",
    "rejected",
]


class AuditEntry(BaseModel):
    """One operator action on a job or cron, recorded by the workflow when it applies it."""

    action: AuditAction
    actor: str  # an API token's name, ``cli:<os user>``, or ``unknown``
    at: datetime  # the workflow's ``workflow.now()``: the server's time, not the caller's
    note: str | None = None
    detail: str | None = None  # what it did, e.g. "until 2026-12-01T09:00:00Z", "ignored: ..."

    @field_validator("note")
    @classmethod
    def _clip_note(cls, value: str | None) -> str | None:
        return None if value is None else ellipsize(value, MAX_NOTE)


class ControlRequest(BaseModel):
    """Who asks for a control and why. Every field is optional, so the argument itself is
    too: ``resume``, ``trigger`` and ``cancel_requested`` also accept no argument."""

    actor: str | None = None
    note: str | None = None


def append_audit(
    trail: list[AuditEntry],
    action: AuditAction,
    request: ControlRequest | None,
    at: datetime,
    detail: str | None = None,
) -> None:
    """Add one operator action to a job's or cron's trail, keeping the newest AUDIT_LIMIT."""
    request = request or ControlRequest()
    actor = request.actor or UNKNOWN_ACTOR
    trail.append(AuditEntry(action=action, actor=actor, at=at, note=request.note, detail=detail))
    del trail[:-AUDIT_LIMIT]


class PauseRequest(ControlRequest):
    until: OffsetDatetime = None
