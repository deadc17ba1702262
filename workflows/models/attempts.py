"""Attempts: the record of each run of the ``run_job`` activity, its heartbeat details, and the
activity's input and result."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from jobctl.workflows.models.spec import JobSpec


class AttemptRecord(BaseModel):
    """One execution attempt of the ``run_job`` activity."""

    attempt: int  # counts across requeue rounds: 1, 2, ...
    round: int = 1  # 1 for the first budget of attempts, +1 per requeue
    started_at: datetime
    ended_at: datetime | None = None
    worker: str = ""
    # handed_over: a worker shutting down cleanly gave the attempt back; it costs no budget.
    outcome: Literal["running", "succeeded", "failed", "lost", "cancelled", "handed_over"] = (
        "running"
    )
    error: str | None = None
    error_type: str | None = None
    retry_delay: float | None = None  # seconds chosen by the backoff formula, if retried

    @property
    def spent(self) -> bool:
        """Whether this attempt used up one of the round's ``max_attempts``."""
        return self.outcome != "handed_over"

    def close(
        self,
        outcome: Literal["succeeded", "failed", "lost", "cancelled", "handed_over"],
        ended_at: datetime,
        error: str | None = None,
        error_type: str | None = None,
        retry_delay: float | None = None,
    ) -> AttemptRecord:
        return self.model_copy(
            update={
                "outcome": outcome,
                "ended_at": ended_at,
                "error": error,
                "error_type": error_type,
                "retry_delay": retry_delay,
            }
        )


class HeartbeatState(BaseModel):
    """Heartbeat details of ``run_job``: the round's attempt log survives across attempts."""

    attempts: list[AttemptRecord] = Field(default_factory=list)
    progress: Any = None
    # While the handler runs: the most a cancel takes to reach it, in seconds (its worker's
    # heartbeat cadence), for ``jobctl status`` to promise while a cancel is on its way.
    cancel_within: float | None = None

    def close_dangling(self, ended_at: datetime, error: str, error_type: str) -> None:
        """Mark an attempt that never reported its end (its worker died or it timed out)."""
        if self.attempts and self.attempts[-1].outcome == "running":
            self.attempts[-1] = self.attempts[-1].close("lost", ended_at, error, error_type)


class RunJobInput(BaseModel):
    """What the workflow hands to one round of the ``run_job`` activity."""

    spec: JobSpec
    round: int = 1
    attempt_offset: int = 0  # attempt records so far (numbering continues from here)
    spent: int = 0  # attempts of this round already used (before a handover)
    not_before: datetime | None = None  # pre-dispatched: wait in the worker until then

    @property
    def budget(self) -> int:
        """Attempts this activity may still make: the round's max minus those spent."""
        return self.spec.max_attempts - self.spent


class RunJobResult(BaseModel):
    attempts: list[AttemptRecord]
    result: Any = None
    cancelled: bool = False  # the attempt stopped because the job was cancelled
    handed_over: bool = False  # the worker shut down cleanly: run it elsewhere, no cost
    withdrawn: bool = False  # pre-dispatched, but paused before run_at: the handler never ran
