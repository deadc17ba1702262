"""The dead-letter queue: parked jobs' entries, release requests and reports, and its state."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from jobctl.workflows.models.audit import ControlRequest
from jobctl.workflows.models.status import JobStatus
from jobctl.workflows.textclip import ellipsize

MAX_ERROR_CHARS = 500


class DeadEntry(BaseModel):
    """The compact record of a parked job; the full history stays on the job."""

    job_id: str
    name: str
    handler: str
    attempts: int
    last_error: str | None = None
    parked_at: datetime
    round: int = 1

    @field_validator("last_error")
    @classmethod
    def _truncate(cls, value: str | None) -> str | None:
        return None if value is None else ellipsize(value, MAX_ERROR_CHARS)


class ReleaseRequest(ControlRequest):
    """A requeue or discard with who and why. The DLQ's ``requeue`` / ``discard`` also take a
    bare job id, the job's own nothing (both what a person types with the ``temporal`` CLI)."""

    job_id: str | None = None  # required by the DLQ's signals; the job's own ignore it
    source: str | None = None  # DLQ_WORKFLOW_ID when the DLQ forwards it (the job answers)


class JobRelease(BaseModel):
    """A job telling the DLQ what became of a requeue or discard (the job decides)."""

    job_id: str
    action: Literal["requeue", "discard"]
    applied: bool  # False: the job was not dead, nothing happened
    status: JobStatus  # the job's status when the request arrived
    round: int
    actor: str | None = None  # who asked (None from jobs older than the audit trail)
    note: str | None = None


class DlqLogLine(BaseModel):
    at: datetime
    action: str  # parked, requeued, discarded, forwarded, ignored, alerted, alert-failed
    job_id: str = ""
    detail: str = ""


class DlqState(BaseModel):
    """Everything the DLQ workflow carries across continue-as-new."""

    entries: list[DeadEntry] = Field(default_factory=list)  # newest last
    log: list[DlqLogLine] = Field(default_factory=list)  # newest last
    pending_alerts: list[DeadEntry] = Field(default_factory=list)
    totals: dict[str, int] = Field(default_factory=dict)
    generation: int = 0  # runs so far: +1 per continue-as-new
