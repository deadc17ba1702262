"""What a worker keeps per job, per attempt or per key stays bounded (issue 45: a worker that
runs for a month). Each structure is driven through its own functions for thousands of
distinct jobs, keys or priorities, in two equal halves; the memory still held by allocations
made in its module (tracemalloc, any frame) after the second half must be no more than after
the first. A structure that kept even a few bytes per id would hold 10,000 of them more.
``python -m bench.soak`` measures the same of a whole worker, by RSS, under a steady load."""

from __future__ import annotations

import asyncio
import gc
import random
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from jobctl.activities.context import HandlerRegistry, JobContext
from jobctl.activities.gc_pause import OldCollections, StartWindow
from jobctl.activities.run_job import JobActivities
from jobctl.activities.server_clock import ServerClock, ServerTimeline
from jobctl.activities.slot_gate import SlotGate
from jobctl.starter.operations.wakeplan import WakePlan
from jobctl.workflows.models import HeartbeatState

HALF = 1_000  # distinct ids per half (a leak of one small object each is 25x the slack)
# What a half may add to the memory its module holds: allocator noise and an interned int
# or two, far below a byte per id (a dict entry alone is 30 or more).
SLACK = 4_096


@contextmanager
def tracing() -> Iterator[None]:
    tracemalloc.start(10)
    try:
        yield
    finally:
        tracemalloc.stop()


def held_by(module: str) -> int:
    """Bytes still held by allocations made with ``module`` anywhere on their stack."""
    gc.collect()
    only = tracemalloc.Filter(True, f"*{module}", all_frames=True)
    snapshot = tracemalloc.take_snapshot().filter_traces([only])
    return sum(stat.size for stat in snapshot.statistics("filename"))


async def growth(module: str, half: Callable[[int], Awaitable[None]]) -> int:
    """The bytes ``module`` holds more after each of two further halves than before it, the
    smaller of the two, ``half(n)`` driving ids ``n * HALF`` to ``(n + 1) * HALF``; a warm-up
    half first (free lists). A structure that keeps something per id grows in both halves; a
    one-off allocation (a free list or an event-loop queue resized once: 5,788 bytes in one CI
    run) shows in one only."""
    await half(-1)
    with tracing():
        await half(0)
        first = held_by(module)
        await half(1)
        second = held_by(module)
        await half(2)
        return min(second - first, held_by(module) - second)


async def test_the_slot_gate_forgets_keys_and_priorities_once_served() -> None:
    """Every attempt waits for a slot under its own fairness key and one of five priorities;
    some give up while waiting. Nothing stays per key once its attempts have gone."""
    gate = SlotGate(2, key_limit=1)

    async def attempt(i: int) -> None:
        async with gate.slot(1 + i % 5, f"tenant-{i}", 1.0 + i % 3):
            await asyncio.sleep(0)

    async def half(n: int) -> None:
        for start in range(n * HALF, (n + 1) * HALF, 100):
            tasks = [asyncio.create_task(attempt(i)) for i in range(start, start + 100)]
            await asyncio.sleep(0)
            for task in tasks[::7]:
                task.cancel()  # gives up its place, or hands on a slot it just got
            await asyncio.gather(*tasks, return_exceptions=True)
        assert (gate.free, gate.waiting(), dict(gate.held)) == (2, 0, {})

    more = await growth("activities/slot_gate.py", half)
    assert more <= SLACK, f"the slot gate kept {more} bytes more for {HALF} more keys"


async def test_an_attempt_leaves_nothing_in_the_running_set() -> None:
    """The handler loop's set of running attempts (the loop watchdog's list): every attempt
    leaves it, whether its handler returned, raised or was cancelled."""
    registry = HandlerRegistry()
    with ThreadPoolExecutor(max_workers=2) as pool:
        jobs = JobActivities(registry, pool, "worker-1", max_concurrent_jobs=10)

        async def handler(ctx: JobContext[Any]) -> int:
            if ctx.attempt % 3 == 1:
                raise ValueError(ctx.job_id)
            return ctx.attempt

        async def one(i: int) -> None:
            ctx: JobContext[Any] = JobContext(
                job_id=f"job-{i}",
                name="n",
                attempt=i,
                max_attempts=3,
                scheduled_at=datetime.now(UTC),
                idempotency_key=f"job-{i}",
                payload={},
                worker="worker-1",
            )
            await jobs._run(handler, ctx, HeartbeatState(), lease=60.0)

        async def half(n: int) -> None:
            for start in range(n * HALF, (n + 1) * HALF, 100):
                tasks = [asyncio.create_task(one(i)) for i in range(start, start + 100)]
                await asyncio.sleep(0)
                tasks[-1].cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            assert jobs.running == set()

        more = await growth("activities/run_job.py", half)
    assert more <= SLACK, f"the running set kept {more} bytes more for {HALF} more attempts"


async def test_the_server_timeline_keeps_one_bound_whatever_the_attempts() -> None:
    timeline = ServerTimeline()
    base = datetime.now(UTC)

    async def half(n: int) -> None:
        for i in range(n * HALF, (n + 1) * HALF):
            ServerClock(base + timedelta(milliseconds=i), timeline).now()

    more = await growth("activities/server_clock.py", half)
    assert more <= SLACK, f"the server timeline kept {more} bytes more for {HALF} more starts"


async def test_start_windows_leave_the_collector_as_they_found_it() -> None:
    """Overlapping start windows of thousands of attempts, closed in any order (twice, for
    some): the gate's count returns to nought and it holds nothing per window."""
    gate = OldCollections(clock=lambda: 0.0)
    rng = random.Random(45)

    async def half(n: int) -> None:
        windows = [StartWindow(gate) for _ in range(HALF)]
        for window in windows:
            window.begin()
        rng.shuffle(windows)
        for window in windows:
            window.end()
            if rng.random() < 0.1:
                window.end()
        assert (gate.open, gate.deferring) == (0, False)

    before = gc.get_threshold()
    try:
        more = await growth("activities/gc_pause.py", half)
    finally:
        gc.set_threshold(*before)
    assert more <= SLACK


def test_the_api_wake_plan_forgets_seconds_that_have_passed() -> None:
    """The API process plans each job's wake in its WakePlan (starter.operations.wakeplan):
    a month of steady scheduling keeps only the seconds still ahead, not one per second
    ever planned."""
    plan = WakePlan(rate=40.0)
    now = 1_800_000_000.0
    peak = 0
    for _ in range(200_000):  # 12 jobs/s for over four hours
        now += 1 / 12
        plan.lead(now + 20.0, now, floor=15.0, first=30.0, bound=300.0)
        peak = max(peak, len(plan.seconds))
    assert peak <= 10_000 / 12 + 60, f"{peak} seconds remembered"


def test_the_bound_check_catches_a_structure_that_keeps_every_key() -> None:
    """The measure itself: a gate that never forgets a key is caught by it."""

    class Leaky(SlotGate):
        def release(self, fairness_key: str | None = None) -> None:
            super().release(fairness_key)
            self.held[fairness_key or ""] += 0  # keeps the key, as a gate without del would

    gate = Leaky(1)

    async def half(n: int) -> None:
        for i in range(n * HALF, (n + 1) * HALF):
            async with gate.slot(3, f"tenant-{i}"):
                pass

    more = asyncio.run(growth(__name__.replace(".", "/") + ".py", half))
    assert more > SLACK
