"""Batches: a group of one-shot jobs started together, counted as they settle, with callback
jobs run once when every member has settled (docs/batches.md).

The members travel as compact JSON (a spec's fields that differ from their defaults): a
batch's start input and each continue-as-new carry the members not yet started, and
Temporal refuses a payload over 2 MiB.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from jobctl.workflows.models.status import JobStatus

MAX_BATCH_ID = 180  # leaves room for ".on_complete" (and ".<index>") within a job id's 200
BATCH_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,180}$"
MAX_MEMBERS = 1000  # as many as one bulk request
# What a batch's members may weigh together as compact JSON (Temporal refuses 2 MiB).
MAX_MEMBER_BYTES = 1024 * 1024
# The summary merged into a callback's payload is kept under this (ids are dropped beyond it,
# with truncated: true); a callback's own payload may use the rest of the 256 KiB.
MAX_SUMMARY_BYTES = 64 * 1024
PAYLOAD_KEY = "batch"  # the key of a callback's payload that receives the summary
CALLBACKS = ("on_complete", "on_success")
Callback = Literal["on_complete", "on_success"]
# What a member's report may say (a settlement); "not_started": its id belonged to another
# workflow when the batch started it, so nothing of this batch ran under that id.
SETTLED = (JobStatus.DONE, JobStatus.DEAD, JobStatus.CANCELLED, JobStatus.DISCARDED)
NOT_STARTED = "not_started"
OUTCOMES = ("done", "dead", "cancelled", "discarded", NOT_STARTED)

BatchStatus = Literal["running", "cancelling", "done", "cancelled"]
CallbackState = Literal["waiting", "started", "skipped", "id_taken", "invalid"]


class BatchCallback(BaseModel):
    """A callback job: its spec (compact JSON, without ``run_at``) and how long after the
    batch settles it runs."""

    spec: dict[str, Any]
    delay: float = 0.0  # seconds after the last member settled

    @property
    def job_id(self) -> str:
        return str(self.spec.get("id", ""))


class CallbackRecord(BaseModel):
    job_id: str
    state: CallbackState = "waiting"
    started_at: datetime | None = None


class CancelMark(BaseModel):
    """Who cancelled the batch, when and why."""

    at: datetime
    actor: str
    note: str | None = None


class BatchState(BaseModel):
    """What a batch carries across continue-as-new: member ids and their outcomes."""

    members: list[str]  # every member's job id, in start order
    started: int = 0  # members[:started] were started (or refused as not_started)
    outcomes: dict[str, str] = Field(default_factory=dict)  # job id -> latest settlement
    cancel: CancelMark | None = None
    cancel_sent: bool = False  # the started, unsettled members were asked to cancel
    callbacks: dict[str, CallbackRecord] = Field(default_factory=dict)
    created_at: datetime | None = None
    completed_at: datetime | None = None
    rejected: int = 0  # messages dropped as invalid
    rejections: list[str] = Field(default_factory=list)  # the newest reasons, capped
    generation: int = 0


class BatchInput(BaseModel):
    """A batch's start (and continue-as-new) input."""

    batch_id: str
    pending: list[dict[str, Any]]  # members not started yet (members[state.started:])
    on_complete: BatchCallback | None = None
    on_success: BatchCallback | None = None
    state: BatchState
    event_budget: int = 10_000  # continue-as-new beyond this many history events


class BatchReport(BaseModel):
    """What the batch's ``status`` query answers (and its run returns)."""

    batch_id: str
    status: BatchStatus
    total: int
    started: int
    settled: int
    unsettled: int
    counts: dict[str, int]
    succeeded: bool | None  # all members done (None until every member settled)
    dead: list[str]
    cancelled: list[str]
    not_started: list[str]
    callbacks: dict[str, CallbackRecord]
    cancel: CancelMark | None
    created_at: datetime | None
    completed_at: datetime | None
    generation: int
    rejected: int
    rejections: list[str]
