"""The board's answer: its columns and cards (``GET /board``'s response model)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from jobctl.workflows.models import JobStatus

Column = Literal["scheduled", "pending", "running", "retrying", "dead", "done", "cancelled"]
COLUMNS: tuple[Column, ...] = (
    "scheduled",
    "pending",
    "running",
    "retrying",
    "dead",
    "done",
    "cancelled",
)
# The column of each public status (a cancelling job stays where it is until it settles).
COLUMN_OF: dict[JobStatus, Column] = {
    JobStatus.SCHEDULED: "scheduled",
    JobStatus.PAUSED: "scheduled",
    JobStatus.PENDING: "pending",
    JobStatus.RUNNING: "running",
    JobStatus.RETRYING: "retrying",
    JobStatus.DEAD: "dead",
    JobStatus.DONE: "done",
    JobStatus.CANCELLED: "cancelled",
    JobStatus.DISCARDED: "cancelled",
}


class Card(BaseModel):
    """One job on the board. Absent fields are unknown or do not apply to its column."""

    job_id: str
    kind: Literal["job", "cron"]
    name: str
    handler: str
    status: JobStatus = Field(description="the public status (workflows/jobstatus.py)")
    detail: str | None = Field(None, description="what the status rule adds, if anything")
    run_at: datetime | None = Field(
        None, description="the job's time: when it runs; a closed job's never after it closed"
    )
    started_at: datetime | None = Field(None, description="when the workflow started")
    closed_at: datetime | None = None
    attempt: int | None = Field(None, description="the attempt running or due next (from 1)")
    attempt_label: str | None = Field(None, description='e.g. "attempt 2 of 4"')
    attempts: int | None = Field(None, description="dead: attempts made in all (from 1)")
    round: int | None = None
    next_attempt_at: datetime | None = None
    last_heartbeat_at: datetime | None = None
    lease: float | None = Field(None, description="heartbeat timeout, seconds")
    heartbeat_late: bool = False
    worker: str | None = None
    progress: Any = None
    cancelling: bool = Field(False, description="status is cancelling: not settled yet")
    cancel_within: float | None = Field(
        None, description="cancelling: reaches the running handler within this (seconds)"
    )
    last_error: str | None = None
    parked_at: datetime | None = None


class BoardColumn(BaseModel):
    count: int
    exact: bool = True
    cards: list[Card]


class Cost(BaseModel):
    rpcs: int = Field(description="Temporal RPCs this snapshot took")
    described: int
    ms: float
    cached: bool = False


class Board(BaseModel):
    at: datetime = Field(description="the snapshot's time (the API's clock)")
    namespace: str
    web_ui: str = Field(description="Temporal Web UI base: cards link to web_ui/namespaces/...")
    limit: int
    in_flight: int = Field(description="jobs due and open (pending+running+retrying+cancelling)")
    columns: dict[Column, BoardColumn]
    cost: Cost
