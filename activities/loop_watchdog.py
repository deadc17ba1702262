"""Ends a worker whose event loop stopped turning, so that a supervisor restarts it.

An async handler that blocks (``time.sleep``, a blocking socket, a long computation) stops
the whole worker's event loop: no polling, no heartbeats for any attempt on it. A short block
costs leases (the attempts are retried elsewhere); one that never ends would leave a live
process that does nothing. A thread outside the loop notices when the loop has not ticked for
``limit`` seconds, logs the loop thread's stack (naming the handler that blocks it) and the
attempts running there, and ends the process with :data:`BROKEN_LOOP_EXIT_CODE`. The attempts on
it are lost by their leases and retried, like after a crash.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import NoReturn

log = logging.getLogger("jobs.worker")

# EX_SOFTWARE: the loop was stalled or torn down; any supervisor restarts on a non-zero exit.
BROKEN_LOOP_EXIT_CODE = 70
TICK_SECONDS = 0.5


def exit_now(code: int) -> NoReturn:
    """End the process at once: flush the logs, skip interpreter teardown (which would wait
    for every non-daemon thread, including ones a handler leaked)."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class LoopWatchdog:
    """Started from the event loop it watches; ``running`` names the attempts in progress."""

    def __init__(self, limit: float, running: Callable[[], list[str]] = list) -> None:
        self.limit = limit
        self.running = running
        self.last_tick = time.monotonic()
        self.loop_thread = threading.get_ident()
        self.stopped = threading.Event()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.loop_thread = threading.get_ident()
        self.task = asyncio.create_task(self._tick(), name="loop-watchdog")
        threading.Thread(target=self._watch, name="loop-watchdog", daemon=True).start()

    def stop(self) -> None:
        self.stopped.set()
        if self.task is not None:
            self.task.cancel()

    async def _tick(self) -> None:
        while True:
            self.last_tick = time.monotonic()
            await asyncio.sleep(TICK_SECONDS)

    def _watch(self) -> None:
        while not self.stopped.wait(TICK_SECONDS):
            stalled = time.monotonic() - self.last_tick
            if stalled > self.limit:
                self._give_up(stalled)

    def _give_up(self, stalled: float) -> None:
        frame = sys._current_frames().get(self.loop_thread)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else "(unknown)\n"
        log.critical(
            "event loop blocked for %.1fs (limit %gs): a handler blocks it (an async handler "
            "calling time.sleep or other blocking code?); exiting with %d for a restart. "
            "Attempts running here: %s. Event loop thread:\n%s",
            stalled,
            self.limit,
            BROKEN_LOOP_EXIT_CODE,
            ", ".join(self.running()) or "none",
            stack,
        )
        exit_now(BROKEN_LOOP_EXIT_CODE)
