"""Crons: their slots, the state carried across continue-as-new, updates and reports."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from jobctl.workflows.models.attempts import AttemptRecord
from jobctl.workflows.models.audit import MAX_NOTE, AuditEntry
from jobctl.workflows.models.instants import Instant
from jobctl.workflows.models.spec import CronBoundsReport, JobSpec, Overlap
from jobctl.workflows.models.status import JobStatus

SlotOutcome = Literal[
    "ran", "skipped", "missed", "paused", "manual", "duplicate", "buffered", "backfilled"
]
# How a backfill's slots start: all at once, or one after another (each when no slot of the
# cron is running). Temporal's names for the same two schedule overlap policies.
BackfillOverlap = Literal["allow_all", "buffer_all"]


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


class Backfill(BaseModel):
    """A backfill being worked through: its slots strictly after ``after`` up to ``to``."""

    after: datetime
    to: datetime
    overlap: BackfillOverlap


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
    backfills: list[Backfill] = Field(default_factory=list)  # queued, oldest first


class BackfillRequest(BaseModel):
    """Run every slot of the cron in [``from``, ``to``] (both past instants) that has not run:
    each slot's job has the slot's usual id, so one that already exists is recorded as
    ``duplicate`` and not run again. ``overlap`` None: ``allow_all`` for a cron whose own
    policy is ``allow_all``, else ``buffer_all``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    from_: Instant = Field(alias="from")
    to: Instant
    overlap: BackfillOverlap | None = None
    # Who and why, for the cron's audit trail.
    actor: str | None = None
    note: str | None = Field(default=None, max_length=MAX_NOTE)


class BackfillAnswer(BaseModel):
    """What a backfill queued: the number of slots in range (within the cron's bounds) and
    the first and last of them. Whether each ran or was a ``duplicate`` shows in the cron's
    slot records and counts as it is worked through."""

    job_id: str
    slots: int
    first: datetime | None = None
    last: datetime | None = None
    overlap: BackfillOverlap
    queued: int = 1  # backfills waiting in this cron, this one included


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
