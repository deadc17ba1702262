"""Crons: their slots, the state carried across continue-as-new, updates and reports."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from workflows.models.attempts import AttemptRecord
from workflows.models.audit import AuditEntry
from workflows.models.spec import CronBoundsReport, JobSpec, Overlap
from workflows.models.status import JobStatus

SlotOutcome = Literal["ran", "skipped", "missed", "paused", "manual", "duplicate", "buffered"]


class SlotRecord(BaseModel):
    """What became of one slot. ``status`` follows the slot's job (ran/manual slots)."""

    slot: datetime
    outcome: SlotOutcome
    job_id: str | None = None
    status: JobStatus | None = None
    detail: str = ""


class SlotTime(BaseModel):
    local: str  # ISO-8601 with the zone's offset
    utc: str  # ISO-8601, Z


class CronState(BaseModel):
    """What a cron carries across continue-as-new: small and capped."""

    last_slot: datetime | None = None  # the latest slot handled (any outcome)
    paused: bool = False
    paused_until: datetime | None = None
    running: dict[str, datetime] = Field(default_factory=dict)  # slot job id -> slot
    buffered: datetime | None = None  # buffer_one: the slot waiting for the running one
    recent: list[SlotRecord] = Field(default_factory=list)  # newest last, capped
    counts: dict[str, int] = Field(default_factory=dict)
    generation: int = 0
    audit: list[AuditEntry] = Field(default_factory=list)  # oldest first, capped


class CronInput(BaseModel):
    spec: JobSpec
    state: CronState = Field(default_factory=CronState)
    event_budget: int = 10_000  # continue-as-new beyond this many history events


class CronUpdate(BaseModel):
    """Change a running cron; omitted fields stay as they are."""

    model_config = ConfigDict(extra="forbid")

    cron: str | None = None
    timezone: str | None = None
    overlap: Overlap | None = None
    # Who and why, for the cron's audit trail (not part of the schedule).
    actor: str | None = None
    note: str | None = None

    def schedule_changes(self) -> dict[str, Any]:
        """The schedule fields this update sets."""
        return self.model_dump(exclude={"actor", "note"}, exclude_none=True)


class SlotFinished(BaseModel):
    """A slot's job telling its cron how it ended (done, dead or cancelled)."""

    job_id: str
    status: JobStatus


class CronReport(CronBoundsReport):
    """What ``status`` returns for a cron job."""

    job_id: str
    kind: Literal["job", "cron"] = "cron"
    name: str
    handler: str
    status: JobStatus
    cron: str
    timezone: str
    overlap: Overlap
    run_at: datetime | None = None  # the next slot
    paused_until: datetime | None = None
    next_slots: list[SlotTime] = Field(default_factory=list)
    recent_slots: list[SlotRecord] = Field(default_factory=list)  # newest first
    running: list[str] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    generation: int = 0  # continue-as-new count
    attempts: list[AttemptRecord] = Field(default_factory=list)  # always empty: see the slots
    audit: list[AuditEntry] = Field(default_factory=list)  # operator actions, oldest first
