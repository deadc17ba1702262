"""Concurrency limits per key: what a job and its key's semaphore workflow say to each other,
and the semaphore's state (carried across continue-as-new, answered by the ``permits`` query).

A job with ``concurrency_key`` K asks the workflow ``concurrency/K`` for a permit (signal
``acquire``: a :class:`PermitRequest`), waits for its answer (signal ``permit_granted``: a
:class:`PermitGrant` echoing the request's ticket), runs its round and gives the permit back
(signal ``release``: a :class:`PermitRelease`). The ticket is a fresh uuid per round, so a
grant meant for an earlier round, or forged, does not let a round run.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, Strict

from jobctl.workflows import names
from jobctl.workflows.models.spec import DEFAULT_PRIORITY, MAX_CONCURRENCY_LIMIT, PRIORITY_LEVELS

Count = Annotated[int, Strict()]
Text = Annotated[str, Strict(), Field(min_length=1, max_length=200)]
Ticket = Annotated[str, Strict(), Field(min_length=1, max_length=64)]
Key = Annotated[str, Strict(), Field(min_length=1, max_length=200)]
# A Temporal run id (a UUID): anything else would make the server refuse the grant's signal
# command, failing the semaphore's workflow task instead of failing the signal.
RunId = Annotated[
    str, Strict(), Field(pattern=r"^[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$")
]

MAX_WAITERS = 2_000  # requests one key queues (beyond: refused, the job asks again later)
DEFAULT_PROBE_EVERY = 60.0  # seconds between checks that blocked holders still run
MAX_PROBE_SPACING = 10  # a holder is checked at most every 10 probe intervals
MIN_PROBE_EVERY, MAX_PROBE_EVERY = 1.0, 3600.0


def concurrency_workflow_id(key: str) -> str:
    """The semaphore's workflow id: ``concurrency/<key>`` (a ``/`` never occurs in a job id,
    so no job can take it)."""
    return f"{names.CONCURRENCY_ID_PREFIX}{key}"


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PermitRequest(_Message):
    """Signal ``acquire``, job -> semaphore: hold one of ``limit`` permits of ``key``."""

    key: Key
    limit: Count = Field(ge=1, le=MAX_CONCURRENCY_LIMIT)
    holder: Text  # the job's workflow id
    run_id: RunId  # the job's run: a terminated job's successor is another holder
    ticket: Ticket  # this round's request
    priority: Count = Field(default=DEFAULT_PRIORITY, ge=1, le=PRIORITY_LEVELS)


class PermitRelease(_Message):
    """Signal ``release``, job -> semaphore: the round with ``ticket`` ended (or gave up
    waiting)."""

    holder: Text
    run_id: RunId
    ticket: Ticket


class PermitGrant(_Message):
    """Signal ``permit_granted``, semaphore -> job (sent again to check a holder still runs)."""

    key: Key
    ticket: Ticket


class Permit(BaseModel):
    """A request the semaphore keeps: waiting (``granted_at`` None) or holding a permit."""

    request: PermitRequest
    seq: Count = Field(ge=0)  # arrival order: waiters go by (priority, seq)
    arrived_at: datetime
    granted_at: datetime | None = None
    checks: Count = Field(default=0, ge=0)  # times the holder was checked (see probe_due)


def probe_due(permit: Permit, now: datetime, probe_every: float) -> bool:
    """Whether a holder is checked now: after 1, 2, 4, ... probe intervals of holding (at most
    MAX_PROBE_SPACING apart), so a long holder costs a few signals, not one per interval."""
    if permit.granted_at is None:
        return False
    spacing = [min(2**i, MAX_PROBE_SPACING) for i in range(permit.checks + 1)]
    return now >= permit.granted_at + timedelta(seconds=probe_every * sum(spacing))


class SemaphoreState(BaseModel):
    """A key's semaphore: its holders and waiters (also its start input and its continue-as-new
    input; a test or an operator may start it with a shorter ``probe_every``)."""

    key: Key
    holders: list[Permit] = Field(default_factory=list)
    waiters: list[Permit] = Field(default_factory=list)
    next_seq: Count = Field(default=0, ge=0)
    probe_every: float = Field(default=DEFAULT_PROBE_EVERY, ge=MIN_PROBE_EVERY, le=MAX_PROBE_EVERY)
    granted: Count = Field(default=0, ge=0)  # permits granted, over every run
    reclaimed: Count = Field(default=0, ge=0)  # permits taken back from holders gone
    rejected: Count = Field(default=0, ge=0)  # invalid messages dropped
    last_rejection: str | None = None
