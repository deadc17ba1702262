"""A worker's handler slots, handed out by priority and fair share instead of arrival.

A worker holds up to ``JOBS_PREFETCH`` attempts beyond its handler slots (worker.py): once
the server has dispatched them, Temporal's task-queue priority and fairness no longer order
them, so the worker's own gate must. :class:`SlotGate` is that gate: when a slot frees it
goes to the waiting attempt with

1. the lowest ``priority`` (1 first, as on the task queue), then
2. within one priority, the fairness key with the least service so far relative to its
   weight (stride scheduling: each grant advances the key's pass by ``1 / weight``; a key
   that starts waiting joins at the current pass, so an idle key banks no credit), then
3. arrival order.

Jobs with no fairness key share one key (``""``), so jobs with every field at its default are
served in arrival order, as by a plain semaphore. A waiter cancelled before its turn leaves
the queue; one cancelled just as its slot arrives hands the slot on.

Fair share orders the waiters; it cannot free a slot. A key that fills every slot makes
another key's next job wait for one of them to end. ``key_limit`` (``JOBS_SLOTS_PER_KEY``)
keeps headroom instead: no fairness key holds more than that many slots at once, so the rest
stay free for other keys, idle when no other key has work (jobs without a key are not
limited). Whenever a slot is free, no waiter that may take it is waiting.

Starts first: an attempt whose handler has ended reports its outcome only once no attempt
waits for a slot (:meth:`SlotGate.no_one_waiting`), for at most a bound. Its slot is already
back, so holding the report costs the attempt's caller only that wait, while the reports'
work (the result's encoding, the SDK's completion) no longer runs between a herd's starts:
5,000 due together started over 2.5 s, 40% of the worker's time then going to reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from jobctl.workflows.models.spec import DEFAULT_PRIORITY


@dataclass(eq=False)
class _Waiter:
    seq: int
    key: str
    weight: float
    granted: asyncio.Future[None]


@dataclass
class _Level:
    """The waiters of one priority: a FIFO per fairness key and each key's pass."""

    queues: dict[str, deque[_Waiter]] = field(default_factory=dict)
    passes: dict[str, float] = field(default_factory=dict)
    vtime: float = 0.0  # the pass of the last grant: where a newly waiting key joins

    def add(self, key: str, waiter: _Waiter) -> None:
        if key not in self.queues:
            self.queues[key] = deque()
            self.passes[key] = self.vtime
        self.queues[key].append(waiter)

    def remove(self, key: str, waiter: _Waiter) -> None:
        queue = self.queues[key]
        queue.remove(waiter)
        if not queue:
            self._drop(key)

    def pop(self, may_take: Callable[[str], bool]) -> _Waiter | None:
        """The next waiter of a key that ``may_take`` a slot, if any."""
        keys = [k for k in self.queues if may_take(k)]
        if not keys:
            return None
        key = min(keys, key=lambda k: (self.passes[k], self.queues[k][0].seq))
        waiter = self.queues[key].popleft()
        self.vtime = self.passes[key]
        self.passes[key] += 1.0 / waiter.weight
        if not self.queues[key]:
            self._drop(key)
        return waiter

    def _drop(self, key: str) -> None:
        del self.queues[key]
        del self.passes[key]


class SlotGate:
    """``capacity`` slots; :meth:`slot` waits for one in (priority, fair share, arrival)
    order and gives it back on exit."""

    def __init__(self, capacity: int, key_limit: int | None = None) -> None:
        self.free = capacity
        self.key_limit = key_limit  # the most slots one fairness key holds; None: all
        self.held: Counter[str] = Counter()
        self._levels: dict[int, _Level] = {}
        self._seq = itertools.count()
        self._queued = 0
        self._none_queued = asyncio.Event()
        self._none_queued.set()

    def may_take(self, key: str) -> bool:
        return not key or self.key_limit is None or self.held[key] < self.key_limit

    def waiting(self) -> int:
        return self._queued

    async def no_one_waiting(self, bound: float) -> None:
        """Return once no attempt waits for a slot, or after ``bound`` seconds."""
        if self._queued:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._none_queued.wait(), bound)

    def _count(self, change: int) -> None:
        self._queued += change
        if self._queued:
            self._none_queued.clear()
        else:
            self._none_queued.set()

    @contextlib.asynccontextmanager
    async def slot(
        self,
        priority: int = DEFAULT_PRIORITY,
        fairness_key: str | None = None,
        fairness_weight: float = 1.0,
        *,
        beat: Callable[[], None] | None = None,
        every: float = 1.0,
        first: float | None = None,
    ) -> AsyncIterator[None]:
        """Wait for a slot in order, hold it for the block, give it back on exit. With
        ``beat``, call it every ``every`` seconds while waiting, the first time after
        ``first`` (default ``every``): an attempt whose start is recorded holds its lease by
        heartbeats until a slot frees. The wait keeps its place in line across beats."""
        await self._take(priority, fairness_key, fairness_weight, beat, every, first)
        try:
            yield
        finally:
            self.release(fairness_key)

    async def acquire(
        self,
        priority: int = DEFAULT_PRIORITY,
        fairness_key: str | None = None,
        fairness_weight: float = 1.0,
    ) -> None:
        await self._take(priority, fairness_key, fairness_weight, None, 1.0, None)

    async def _take(
        self,
        priority: int,
        fairness_key: str | None,
        fairness_weight: float,
        beat: Callable[[], None] | None,
        every: float,
        first: float | None,
    ) -> None:
        """A free slot at once (no loop turn: a herd's slots change hands in one step), or
        a place in line, waited for on its own future."""
        key = fairness_key or ""
        if self.free > 0 and self.may_take(key):  # no waiter may take a free slot
            self.free -= 1
            self.held[key] += 1
            return
        waiter = _Waiter(
            next(self._seq), key, fairness_weight, asyncio.get_running_loop().create_future()
        )
        self._levels.setdefault(priority, _Level()).add(key, waiter)
        self._count(+1)
        pause = every if first is None else first
        try:
            while not waiter.granted.done():
                await asyncio.wait({waiter.granted}, timeout=pause if beat is not None else None)
                if beat is not None and not waiter.granted.done():
                    beat()
                pause = every
        except BaseException:
            if waiter.granted.done():
                self.release(key)  # the slot reached us as we were cancelled: pass it on
            else:
                self._forget(priority, key, waiter)
            raise

    def release(self, fairness_key: str | None = None) -> None:
        """Give back a slot ``fairness_key`` held: to the next waiter in order that may take
        it, or to the free pool."""
        key = fairness_key or ""
        self.held[key] -= 1
        if self.held[key] <= 0:
            del self.held[key]  # keys come and go (tenants): keep only those holding slots
        # Every queued waiter is still waiting: one that gave up left the queue (_forget).
        for priority in sorted(self._levels):
            level = self._levels[priority]
            waiter = level.pop(self.may_take)
            if waiter is None:
                continue
            if not level.queues:
                del self._levels[priority]
            self._count(-1)
            self.held[waiter.key] += 1
            waiter.granted.set_result(None)
            return
        self.free += 1

    def _forget(self, priority: int, key: str, waiter: _Waiter) -> None:
        level = self._levels.get(priority)
        if level is None or waiter not in level.queues.get(key, ()):
            return
        level.remove(key, waiter)
        self._count(-1)
        if not level.queues:
            del self._levels[priority]
