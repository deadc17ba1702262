"""The health check a handler waits for at run_at (activities/predispatch.py ``heard_by``):
asked ahead of run_at, within FRESH_ANSWER of it, shared by the attempts due together, and
never letting a handler start before run_at. The health check itself is a stand-in with a
fixed round trip: what is tested is when it is asked and how often."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

from jobctl.activities.predispatch import FRESH_ANSWER, ServerLiveness, heard_by
from jobctl.activities.server_clock import ServerClock

ROUND_TRIP = 0.02


class CountingLiveness(ServerLiveness):
    """A liveness whose health check takes ROUND_TRIP and records when each was sent."""

    def __init__(self) -> None:
        super().__init__()
        self.last_ok = 0.0  # nothing heard recently
        self.sent: list[float] = []

    async def _check(self) -> bool:
        sent = time.monotonic()
        self.sent.append(sent)
        await asyncio.sleep(ROUND_TRIP)
        self.last_ok = max(self.last_ok, sent)
        return True


async def test_one_probe_asked_before_run_at_serves_the_attempts_due_together() -> None:
    liveness = CountingLiveness()
    clock = ServerClock(datetime.now(UTC))  # begun at once: reads the wall clock
    run_at = clock.now() + timedelta(seconds=0.5)
    run_at_here = time.monotonic() + 0.5

    async def attempt() -> float:
        await heard_by(run_at, clock, liveness)
        return time.monotonic()

    # Called early (well before run_at - FRESH_ANSWER), as a caller that woke too soon would.
    ended = await asyncio.gather(*(attempt() for _ in range(5)))
    assert len(liveness.sent) == 1  # one probe for the five
    (sent,) = liveness.sent
    assert run_at_here - FRESH_ANSWER - 0.01 <= sent < run_at_here  # fresh, and ahead of run_at
    assert min(ended) >= run_at_here - 0.01  # no handler before run_at


async def test_an_attempt_past_its_run_at_waits_for_a_fresh_answer() -> None:
    liveness = CountingLiveness()
    clock = ServerClock(datetime.now(UTC))
    asked = time.monotonic()
    waited = await heard_by(clock.now() - timedelta(seconds=5), clock, liveness)
    assert len(liveness.sent) == 1 and liveness.sent[0] >= asked - FRESH_ANSWER
    assert waited >= ROUND_TRIP * 0.9  # it waited for the answer, not for an old one
