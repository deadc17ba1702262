"""The server's time as a worker knows it without asking: :class:`ServerClock`.

Each attempt arrives with the time the server stamped on its start (``started_time``). The
worker begins running it a little later: at once when it is idle, up to seconds later when its
event loop is busy (a herd's attempts arriving together). The stamp plus the local monotonic
time since the attempt began therefore reads the server's clock late by that delay, never
early: an attempt begun 0.5 s late waited for its run_at 0.5 s too long.

Every stamp is such a lower bound on the offset between the server's clock and this process's
monotonic clock, and the largest recent one is the tightest. So the worker keeps it
(:class:`ServerTimeline`) and every attempt reads the clock by it: one begun late in a busy
moment reads the time its promptly begun peers saw. Each reading is still a lower bound, so
"never before run_at" holds; a bound older than ``CALIBRATION_WINDOW`` gives way to the next
stamp, so a server clock set back (or a drift between the clocks) is followed within it.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

# Seconds a stamp's bound is trusted for when no later stamp is as tight.
CALIBRATION_WINDOW = 300.0


class ServerTimeline:
    """The tightest recent bound on (server time - local monotonic time) of one worker."""

    def __init__(self) -> None:
        self.offset: float | None = None
        self.seen_at = 0.0  # monotonic time the bound was observed

    def observe(self, stamp: datetime, at: float | None = None) -> None:
        """A start the server stamped ``stamp``, begun here at monotonic time ``at`` (now)."""
        at = time.monotonic() if at is None else at
        offset = stamp.timestamp() - at
        stale = at - self.seen_at > CALIBRATION_WINDOW
        if self.offset is None or offset >= self.offset or stale:
            self.offset, self.seen_at = offset, at

    def now(self, at: float | None = None) -> datetime:
        """A reading of the server's time, never ahead of it (at monotonic ``at``, default now)."""
        assert self.offset is not None, "no stamp observed yet"
        at = time.monotonic() if at is None else at
        return datetime.fromtimestamp(at + self.offset, UTC)


class ServerClock:
    """The server's time as one attempt knows it: the start the server stamped on it, moved
    forward by the worker's tightest recent stamp (``timeline``), advanced by local monotonic
    time (immune to the worker's wall clock)."""

    def __init__(self, started: datetime, timeline: ServerTimeline | None = None):
        self.started = started
        self.timeline = timeline if timeline is not None else ServerTimeline()
        begun = time.monotonic()
        self.own_offset = started.timestamp() - begun  # this attempt's own bound
        self.timeline.observe(started, begun)

    def now(self) -> datetime:
        at = time.monotonic()
        own = datetime.fromtimestamp(at + self.own_offset, UTC)
        return max(own, self.timeline.now(at))  # a stale bound's successor may be looser
