"""Rate limits per key: what a job and its key's limiter workflow say to each other, and the
limiter's state (carried across continue-as-new, answered by the ``reservations`` query).

A job with ``rate_key`` K asks the workflow ``ratelimit/K`` for a start (signal ``acquire``: a
:class:`RateRequest`). The limiter answers with a reservation (signal ``rate_granted``: a
:class:`RateGrant` echoing the request's ticket and carrying ``start_at``, the earliest moment
the rate allows), and the job waits until then. A job that stops waiting before its grant
(paused, cancelled) withdraws its request (signal ``release``: a :class:`PermitRelease`).

The limiter schedules with the generic cell rate algorithm (virtual scheduling): ``tat``, the
theoretical arrival time, moves on by the rate's spacing with each reservation; a request is
placed at ``max(now, tat - tolerance)``, the tolerance being ``(burst - 1) * spacing``. It
reserves at most RESERVE_AHEAD ahead of now, so a more urgent request that arrives later
still goes before everything not yet reserved.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict

from jobctl.workflows import names
from jobctl.workflows.models.concurrency import Count, Key, RunId, Text, Ticket
from jobctl.workflows.models.spec import DEFAULT_PRIORITY, PRIORITY_LEVELS
from jobctl.workflows.rates import MAX_BURST, parse_rate

MAX_WAITERS = 4_000  # requests one key queues (beyond: refused, the job asks again later)
# Reservations are handed out at most RESERVE_AHEAD ahead (a more urgent job waits at most
# that long behind less urgent ones), and at least REFILL_AT ahead when the rate is the bound:
# the time a grant has to reach its job and the job's round to reach a worker, which then
# waits for the start itself. Each wake reserves the starts of the difference (1 s).
RESERVE_AHEAD = timedelta(seconds=5)
REFILL_AT = timedelta(seconds=4)
RECENT = 60  # seconds of starts kept per second, for "recent starts"

RateText = Annotated[
    str, Strict(), Field(max_length=12), AfterValidator(lambda v: str(parse_rate(v)))
]


def rate_workflow_id(key: str) -> str:
    """The limiter's workflow id: ``ratelimit/<key>`` (no job id holds a ``/``)."""
    return f"{names.RATE_ID_PREFIX}{key}"


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RateRequest(_Message):
    """Signal ``acquire``, job -> limiter: one start of ``key`` at ``rate`` (with ``burst``)."""

    key: Key
    rate: RateText
    burst: Count = Field(default=1, ge=1, le=MAX_BURST)
    holder: Text  # the job's workflow id
    run_id: RunId
    ticket: Ticket  # this round's request
    priority: Count = Field(default=DEFAULT_PRIORITY, ge=1, le=PRIORITY_LEVELS)
    # No start before this (the job's run_at: a job asks up to its dispatch_lead early).
    not_before: datetime | None = None


class RateGrant(_Message):
    """Signal ``rate_granted``, limiter -> job: the round with ``ticket`` may start at
    ``start_at`` (server time), not before."""

    key: Key
    ticket: Ticket
    start_at: datetime


class Waiter(BaseModel):
    """A request the limiter keeps until it can reserve it a start."""

    request: RateRequest
    seq: Count = Field(ge=0)  # arrival order: waiters go by (priority, seq)
    arrived_at: datetime


class RateState(BaseModel):
    """A key's limiter (also its start and continue-as-new input)."""

    key: Key
    waiters: list[Waiter] = Field(default_factory=list)
    next_seq: Count = Field(default=0, ge=0)
    tat: datetime | None = None  # theoretical arrival time of the next start (GCRA)
    rate: str | None = None  # of the latest reservation (each job's own rate applies)
    burst: Count = Field(default=1, ge=1, le=MAX_BURST)
    last_start: datetime | None = None  # the latest start_at handed out
    # Starts handed out per second of start_at: [epoch second, count], the last RECENT seconds.
    recent: list[tuple[int, int]] = Field(default_factory=list)
    granted: Count = Field(default=0, ge=0)  # reservations handed out, over every run
    lost: Count = Field(default=0, ge=0)  # grants whose job was gone
    rejected: Count = Field(default=0, ge=0)  # invalid messages dropped
    last_rejection: str | None = None
    # Continue as new beyond this many events (a test or an operator may start it lower).
    event_budget: Count = Field(default=10_000, ge=100, le=40_000)


def reserve(
    tat: datetime | None, now: datetime, spacing: float, burst: int
) -> tuple[datetime, datetime]:
    """One reservation: (start_at, the next tat). Pure (the GCRA's virtual scheduling)."""
    step = timedelta(seconds=spacing)
    start = now if tat is None else max(now, tat - step * (burst - 1))
    return start, max(tat or start, start) + step


def next_start(state: RateState, request: RateRequest, now: datetime) -> datetime:
    """When ``request`` would start if reserved now."""
    rate = parse_rate(request.rate)
    return reserve(state.tat, now, rate.spacing, request.burst)[0]


def recent_starts(state: RateState, now: datetime, seconds: int = RECENT) -> int:
    """Starts reserved for the ``seconds`` before ``now`` (now included)."""
    last = int(now.timestamp())
    return sum(count for second, count in state.recent if last - seconds < second <= last)


def count_start(state: RateState, start_at: datetime) -> None:
    """Add a start to the per-second tally; forget seconds older than RECENT before it."""
    second = int(start_at.timestamp())
    recent = [
        (s, c)
        for s, c in state.recent
        if s > second - RECENT - int(RESERVE_AHEAD.total_seconds()) - 1
    ]
    if recent and recent[-1][0] == second:
        recent[-1] = (second, recent[-1][1] + 1)
    else:
        recent.append((second, 1))
        recent.sort()
    state.recent = recent
