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
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from workflows.models.spec import DEFAULT_PRIORITY


@dataclass(eq=False)
class _Waiter:
    seq: int
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

    def pop(self) -> _Waiter:
        key = min(self.queues, key=lambda k: (self.passes[k], self.queues[k][0].seq))
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

    def __init__(self, capacity: int) -> None:
        self.free = capacity
        self._levels: dict[int, _Level] = {}
        self._seq = itertools.count()

    def waiting(self) -> int:
        return sum(len(q) for level in self._levels.values() for q in level.queues.values())

    @contextlib.asynccontextmanager
    async def slot(
        self,
        priority: int = DEFAULT_PRIORITY,
        fairness_key: str | None = None,
        fairness_weight: float = 1.0,
        *,
        beat: Callable[[], None] | None = None,
        every: float = 1.0,
    ) -> AsyncIterator[None]:
        """Wait for a slot in order, hold it for the block, give it back on exit. With
        ``beat``, call it every ``every`` seconds while waiting (an attempt whose start is
        recorded holds its lease by heartbeats until a slot frees); the wait keeps its place
        in line across beats."""
        taking = asyncio.ensure_future(self.acquire(priority, fairness_key, fairness_weight))
        try:
            while not taking.done():
                await asyncio.wait({taking}, timeout=every if beat is not None else None)
                if beat is not None and not taking.done():
                    beat()
            taking.result()
        except BaseException:
            if taking.done() and not taking.cancelled() and taking.exception() is None:
                self.release()  # granted as we were cancelled: pass it on
            else:
                taking.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await taking
            raise
        try:
            yield
        finally:
            self.release()

    async def acquire(
        self,
        priority: int = DEFAULT_PRIORITY,
        fairness_key: str | None = None,
        fairness_weight: float = 1.0,
    ) -> None:
        if self.free > 0 and not self._levels:
            self.free -= 1
            return
        key = fairness_key or ""
        waiter = _Waiter(
            next(self._seq), fairness_weight, asyncio.get_running_loop().create_future()
        )
        level = self._levels.setdefault(priority, _Level())
        level.add(key, waiter)
        try:
            await waiter.granted
        except asyncio.CancelledError:
            if waiter.granted.done() and not waiter.granted.cancelled():
                self.release()  # the slot reached us as we were cancelled: pass it on
            else:
                self._forget(priority, key, waiter)
            raise

    def release(self) -> None:
        """Give a slot back: to the next waiter in order, or to the free pool."""
        while self._levels:
            priority = min(self._levels)
            level = self._levels[priority]
            waiter = level.pop()
            if not level.queues:
                del self._levels[priority]
            if not waiter.granted.done():
                waiter.granted.set_result(None)
                return
        self.free += 1

    def _forget(self, priority: int, key: str, waiter: _Waiter) -> None:
        level = self._levels.get(priority)
        if level is None or waiter not in level.queues.get(key, ()):
            return
        level.remove(key, waiter)
        if not level.queues:
            del self._levels[priority]
