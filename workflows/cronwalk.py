"""From matching wall times to the next UTC slot, skipping ahead by fields even near DST.

The rules (what a gap or a repeated wall time fires at) are described in
:mod:`workflows.cronmath`; this module finds the next slot under them without walking wall
times one by one. Away from a transition (no offset change within 26 hours) wall times and
instants run in step, so the first matching wall time gives the slot. Near one, the 52 hours
around ``after`` are cut into stretches of constant UTC offset; in each, the first matching
wall time (found field by field, like anywhere else) is the stretch's earliest slot, except
that a stretch opening on a spring-forward gap fires at the transition itself when a wall
time in the gap matches, and a stretch opening on a fall-back skips the repeated wall times
for a fixed-time expression (they fired at their first occurrence). The work per slot is
therefore a few dozen zone look-ups, whatever the expression: :attr:`Clock.steps` counts it.

Pure and deterministic: every instant is an argument and the counter lives in the call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

SECOND = timedelta(seconds=1)
NEAR = timedelta(hours=26)  # a transition this close to a slot can reorder wall times
PROBE = timedelta(hours=3)  # offsets are sampled this often to find transitions
NextWall = Callable[[datetime], datetime]  # first matching naive wall time strictly after


@dataclass
class Clock:
    """A zone's wall clock; ``steps`` counts every look-up made through it."""

    zone: ZoneInfo
    steps: int = 0

    def offset(self, moment: datetime) -> timedelta:
        self.steps += 1
        offset = moment.astimezone(self.zone).utcoffset()
        assert offset is not None  # a ZoneInfo knows the offset of every aware instant
        return offset

    def wall(self, moment: datetime) -> datetime:
        self.steps += 1
        return moment.astimezone(self.zone).replace(tzinfo=None)

    def transition(self, before: datetime, after: datetime) -> datetime:
        """The first instant in (before, after] carrying ``after``'s offset (to the second)."""
        target = self.offset(after)
        low, high = before, after
        while high - low > SECOND:
            middle = low + (high - low) / 2
            if self.offset(middle) == target:
                high = middle
            else:
                low = middle
        return high.replace(microsecond=0)

    def instants(self, wall: datetime, every_hour: bool) -> list[datetime]:
        """The UTC instants a naive local wall time fires at, under our DST rules."""
        first = wall.replace(tzinfo=self.zone, fold=0).astimezone(UTC)
        second = wall.replace(tzinfo=self.zone, fold=1).astimezone(UTC)
        exists_first = self.wall(first) == wall
        exists_second = self.wall(second) == wall
        if not exists_first and not exists_second:
            # In the gap: fold=1 reads it with the offset after the jump (an earlier instant),
            # fold=0 with the one before; the transition lies between them.
            return [self.transition(min(first, second), max(first, second))]
        if exists_first and exists_second and first != second:
            return [first, second] if every_hour else [first]
        return [first]


def transition_between(before: datetime, after: datetime, zone: ZoneInfo) -> datetime:
    """The first instant in (before, after] carrying ``after``'s offset (to the second)."""
    return Clock(zone).transition(before, after)


def instants(wall: datetime, zone: ZoneInfo, every_hour: bool) -> list[datetime]:
    """The UTC instants a naive local wall time fires at, under our DST rules."""
    return Clock(zone).instants(wall, every_hour)


@dataclass
class Search:
    """One expression in one zone: ``next_wall`` is its calendar, ``every_hour`` its DST rule."""

    clock: Clock
    next_wall: NextWall
    every_hour: bool

    def next_slot(self, after: datetime) -> datetime:
        """The first slot strictly after the aware instant ``after``, as a UTC instant."""
        after = after.astimezone(UTC)
        while True:
            if self._spread(after) == timedelta(0):
                return self._steady(after)
            slot = self._near_transition(after)
            if slot is not None:
                return slot
            after = after.replace(microsecond=0) + NEAR  # nothing up to here: look further

    def _wall_after(self, wall: datetime) -> datetime:
        self.clock.steps += 1
        return self.next_wall(wall)

    def _spread(self, moment: datetime) -> timedelta:
        """How far the zone's UTC offset moves within a day of ``moment`` (0 away from DST)."""
        offsets = [self.clock.offset(moment + hours) for hours in (-NEAR, timedelta(0), NEAR)]
        return max(offsets) - min(offsets)

    def _steady(self, after: datetime) -> datetime:
        """No transition near ``after``: the first matching wall time with a later instant."""
        wall = self.clock.wall(after) - SECOND
        while True:
            wall = self._wall_after(wall)
            later = [m for m in self.clock.instants(wall, self.every_hour) if m > after]
            if later:
                return min(later)

    def _near_transition(self, after: datetime) -> datetime | None:
        """The first slot in the 26 hours after ``after``, stretch by stretch (None if none).

        Slots are whole seconds, so "strictly after" is "at or after ``earliest``"."""
        earliest = after.replace(microsecond=0) + SECOND
        start, end = earliest - NEAR, earliest + NEAR
        bounds = [start, *self._transitions(start, end), end]
        for index, (opens, closes) in enumerate(pairwise(bounds)):
            if closes > earliest:
                slot = self._in_stretch(opens, closes, earliest, index > 0)
                if slot is not None:
                    return slot
        return None

    def _transitions(self, start: datetime, end: datetime) -> list[datetime]:
        """The instants in (start, end] where the offset changes, sampled every 3 hours."""
        found = []
        low, low_offset = start, self.clock.offset(start)
        while low < end:
            high = min(low + PROBE, end)
            high_offset = self.clock.offset(high)
            if high_offset != low_offset:
                found.append(self.clock.transition(low, high))
            low, low_offset = high, high_offset
        return found

    def _in_stretch(
        self, opens: datetime, closes: datetime, earliest: datetime, is_transition: bool
    ) -> datetime | None:
        """The first slot at or after ``earliest`` in [opens, closes), where the offset is
        constant; ``opens`` is a transition when ``is_transition``."""
        offset = self.clock.offset(opens)
        before = self.clock.offset(opens - SECOND) if is_transition else offset
        wall_opens = opens.replace(tzinfo=None) + offset
        if before < offset and opens >= earliest:
            gap = opens.replace(tzinfo=None) + before  # first wall time the clock skips
            if self._wall_after(gap - SECOND) < wall_opens:
                return opens  # a skipped wall time fires at the transition
        first = max(earliest, opens).replace(tzinfo=None) + offset
        if before > offset and not self.every_hour:
            first = max(first, opens.replace(tzinfo=None) + before)  # past the repeated ones
        wall = self._wall_after(first - SECOND)
        if wall < closes.replace(tzinfo=None) + offset:
            return (wall - offset).replace(tzinfo=UTC)
        return None
