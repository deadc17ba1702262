"""The attempts a worker process holds, across its handlers' queues: :class:`AttemptSlots`.

Temporal's SDK reserves a slot before each poll of a task queue, in its Rust core, outside
the process's event loop. With a fixed number of slots per handler worker, a process whose
loop a handler blocked (``time.sleep`` in an async handler, a long computation) went on
polling at full speed: it took attempts it could not start, and when the loop watchdog (or
the handler) then ended the process, they were lost with it, each counted against its job
as an attempt lost in its handler (the poison drill saw an innocent job lose all of its).
And each handler worker had the process's whole ``JOBS_MAX_CONCURRENT_JOBS + JOBS_PREFETCH``
to itself, so a process could hold that many per handler.

Here one supplier serves all of a process's handler workers, and a slot is reserved on the
event loop (the SDK runs ``reserve_slot`` there): a blocked loop reserves none, so a stalled
process polls no more and takes at most one attempt per poll already out when it stalled.
The process holds at most its capacity, counting each poll out as a slot it may fill, except
that every handler queue may keep one poll out while the process has a free slot: with a
capacity below the number of handlers, a queue without one would wait for its attempts until
another queue's poll ended (up to a minute). So a process may hold up to one attempt per
handler beyond its capacity, when their polls are answered together.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

from temporalio.worker import (
    CustomSlotSupplier,
    SlotMarkUsedContext,
    SlotPermit,
    SlotReleaseContext,
    SlotReserveContext,
)


class QueuePermit(SlotPermit):
    """A slot reserved for a poll of one task queue."""

    def __init__(self, queue: str) -> None:
        self.queue = queue


class AttemptSlots(CustomSlotSupplier):
    """``capacity`` activity slots shared by a process's handler workers, reserved on its
    event loop. The SDK marks and releases slots from its own threads: the counts are kept
    under a lock, and waiting reservations are woken on the loop."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0  # slots holding an attempt
        self.polling: Counter[str] = Counter()  # per queue, slots reserved for a poll out
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None

    def _may_reserve(self, queue: str) -> bool:
        if self.used >= self.capacity:
            return False
        return self.used + self.polling.total() < self.capacity or not self.polling[queue]

    def _take(self, queue: str) -> QueuePermit | None:
        with self._lock:
            if not self._may_reserve(queue):
                return None
            self.polling[queue] += 1
            return QueuePermit(queue)

    async def reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit:
        if self._changed is None:
            self._loop = asyncio.get_running_loop()
            self._changed = asyncio.Event()
        while (permit := self._take(ctx.task_queue)) is None:
            self._changed.clear()
            if (permit := self._take(ctx.task_queue)) is not None:
                break  # freed between the look and the clear
            await self._changed.wait()
        return permit

    def try_reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit | None:
        return self._take(ctx.task_queue)  # eager tasks: none reach a handler's queue

    def mark_slot_used(self, ctx: SlotMarkUsedContext) -> None:
        assert isinstance(ctx.permit, QueuePermit)
        with self._lock:
            self._unpoll(ctx.permit.queue)
            self.used += 1

    def release_slot(self, ctx: SlotReleaseContext) -> None:
        assert isinstance(ctx.permit, QueuePermit)
        with self._lock:
            if ctx.slot_info is None:  # reserved for a poll that brought nothing
                self._unpoll(ctx.permit.queue)
            else:
                self.used -= 1
        self._wake()

    def _unpoll(self, queue: str) -> None:
        self.polling[queue] -= 1
        if self.polling[queue] <= 0:
            del self.polling[queue]

    def _wake(self) -> None:
        loop, changed = self._loop, self._changed
        if loop is not None and changed is not None and not loop.is_closed():
            loop.call_soon_threadsafe(changed.set)
