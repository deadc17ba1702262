"""Keeps Python's older-generation garbage collections away from the moment handlers are due.

A worker holding a herd (a thousand attempts waiting for one run_at, and as many cached
workflow runs) has a large heap, and collecting its older generations stops the event loop
for the time it takes to walk them. Measured at a 1,000-job herd here: full (generation 2)
passes of 47, 103, 140 and 170 ms while the herd arrived, then one of 300 ms at run_at, most
of that herd's lateness; with those deferred, six generation-1 passes still took 76 ms of
the second around run_at. Reference counting frees almost everything at once anyway; these
passes only find cycles, and finding them a second later costs nothing.

So each attempt opens a :class:`StartWindow` shortly before it is due (START_WINDOW before a
pre-dispatched attempt's run_at; on arrival for one that starts at once) and closes it when
its handler starts or it leaves otherwise. While any window is open, :class:`OldCollections`
raises the thresholds of generations 1 and 2 so that only generation 0 is collected (about
half a millisecond a pass); when the last window closes, the thresholds return and the
deferred passes run at the next collection. Deferral is bounded: a run of overlapping
windows (a steady stream of starts, never a gap) gives way after MAX_DEFER, and the
collector keeps its normal schedule until every window has closed once.

One gate per process, since the collector is process-wide: :data:`OLD_COLLECTIONS`.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

# An attempt's window opens this long before its run_at (the herd's last wake-ups and
# health probes fall inside it).
START_WINDOW = 1.0
# The longest one run of overlapping windows defers the older generations.
MAX_DEFER = 10.0
# The thresholds of generations 1 and 2 while deferred: more than any window lasts.
DEFERRED = 1_000_000_000


class OldCollections:
    """Counts open start windows; while any is open, only generation 0 is collected."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.open = 0
        self.saved: tuple[int, int, int] | None = None  # the thresholds to restore
        self.since = 0.0  # when this run of overlapping windows began deferring
        self.gave_way = False  # deferred for MAX_DEFER: no more until every window closed

    @property
    def deferring(self) -> bool:
        return self.saved is not None

    def enter(self) -> None:
        self.open += 1
        if self._too_long():
            return
        if not self.deferring and gc.isenabled():
            self.saved, self.since = gc.get_threshold(), self.clock()
            gc.set_threshold(self.saved[0], DEFERRED, DEFERRED)

    def leave(self) -> None:
        self.open = max(self.open - 1, 0)
        if self.open == 0:
            self._restore()
            self.gave_way = False
        else:
            self._too_long()

    def _too_long(self) -> bool:
        """Give way once this run of windows has deferred for MAX_DEFER."""
        if self.deferring and self.clock() - self.since > MAX_DEFER:
            self._restore()
            self.gave_way = True
        return self.gave_way

    def _restore(self) -> None:
        if self.saved is None:
            return
        young, middle, full = gc.get_threshold()
        if (middle, full) == (DEFERRED, DEFERRED):  # untouched since (a handler may set its own)
            gc.set_threshold(young, self.saved[1], self.saved[2])
        self.saved = None


OLD_COLLECTIONS = OldCollections()


class StartWindow:
    """One attempt's stretch from shortly before its start until its handler starts; opening
    and closing are idempotent, so every path out of the attempt may close it."""

    def __init__(self, gate: OldCollections = OLD_COLLECTIONS) -> None:
        self.gate = gate
        self.is_open = False

    def begin(self) -> None:
        if not self.is_open:
            self.is_open = True
            self.gate.enter()

    def end(self) -> None:
        if self.is_open:
            self.is_open = False
            self.gate.leave()
