"""The status vocabulary shared by workflows, listings and reports."""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    """The status vocabulary. ``JobStatus`` search attributes carry these values."""

    SCHEDULED = "scheduled"  # waiting for run_at
    PENDING = "pending"  # due, waiting for a worker
    RUNNING = "running"
    RETRYING = "retrying"  # backing off until the next attempt
    PAUSED = "paused"
    DONE = "done"
    DEAD = "dead"  # exhausted; parked in the dead-letter queue
    CANCELLED = "cancelled"
    CANCELLING = "cancelling"  # cancel accepted, not settled yet (live state; never upserted)
    DISCARDED = "discarded"  # a dead job discarded by a human: ended for good

    @property
    def finished(self) -> bool:
        return self in (JobStatus.DONE, JobStatus.CANCELLED)
