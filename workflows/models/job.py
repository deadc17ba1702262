"""A one-shot job's report, and the state its workflow keeps while it runs."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from jobctl.workflows.models.attempts import AttemptRecord
from jobctl.workflows.models.audit import AuditEntry, ControlRequest
from jobctl.workflows.models.spec import SchedulingReport
from jobctl.workflows.models.status import JobStatus


class JobReport(SchedulingReport):
    """What ``status`` returns for a one-shot job (the query, enriched by the client)."""

    job_id: str
    kind: Literal["job", "cron"] = "job"
    name: str
    handler: str
    status: JobStatus
    run_at: datetime | None = None
    paused_until: datetime | None = None
    max_attempts: int
    round: int = 1
    attempts: list[AttemptRecord] = Field(default_factory=list)
    result: Any = None
    last_error: str | None = None
    idempotency_key: str
    parked_at: datetime | None = None  # when it last went dead
    waiting_for: str | None = None  # "waiting for rate limit of key K, earliest start ..."
    # Each job this one runs after, and how it stands as last heard: waiting, done, dead,
    # cancelled, discarded, not started (issue 44).
    after: dict[str, str] = Field(default_factory=dict)
    # Live state filled in from Temporal's describe by the client, not by the workflow.
    next_attempt_at: datetime | None = None
    last_heartbeat_at: datetime | None = None
    worker: str | None = None
    cancel_within: float | None = None  # cancelling: reaches the handler within this (seconds)
    audit: list[AuditEntry] = Field(default_factory=list)  # operator actions, oldest first


class JobState(BaseModel):
    """What ``JobWorkflow`` keeps while it runs (never carried across continue-as-new: a job
    does not continue-as-new). The report, the details and every decision read it."""

    status: JobStatus = JobStatus.SCHEDULED
    listed: JobStatus = JobStatus.SCHEDULED  # the JobStatus search attribute, as last written
    paused_until: datetime | None = None
    triggered: bool = False
    dispatched_until: datetime | None = None  # run_at of an attempt waiting in a worker
    dispatched_at: datetime | None = None  # when that attempt was scheduled
    controls_seen: int = 0  # bumps on every control so a wait re-evaluates
    round: int = 1
    attempts: list[AttemptRecord] = Field(default_factory=list)
    result: Any = None
    last_error: str | None = None
    release_request: Literal["requeue", "discard"] | None = None
    release_by: ControlRequest = Field(default_factory=ControlRequest)  # who asked, and why
    parked_at: datetime | None = None
    audit: list[AuditEntry] = Field(default_factory=list)  # operator actions, oldest first
    cancel_noted: bool = False  # the cancel_requested signal recorded who and why
    cancel_detail: str | None = None  # how a cancel met the running attempt
    waiting_for: str | None = None  # a rate limit's start or a concurrency permit, in words
    # The jobs named in ``after``, as last heard (workflows/dependency_rules.py); the jobs
    # that wait for this one, told whenever it settles (done, dead, cancelled).
    dependencies: dict[str, str] = Field(default_factory=dict)
    watchers: list[str] = Field(default_factory=list)


class DependencyWatch(BaseModel):
    """A job asking a job it runs after to tell it when it settles (``watch``)."""

    model_config = ConfigDict(extra="forbid")

    job_id: str = Field(min_length=1, max_length=200)
