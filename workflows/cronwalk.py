"""From matching wall times to the next UTC slot, skipping ahead by fields even near DST.

The DST policy (what a gap or a repeated wall time fires at) is described in
:mod:`workflows.cronmath`; this module finds the next slot under it without walking wall
times one by one. Away from a transition (no offset change within 26 hours) wall times and
instants run in step, so the first matching wall time gives the slot. Near one, the 52 hours
around ``after`` are cut into stretches of constant UTC offset; in each, the first matching
wall time (found field by field, like anywhere else) is the stretch's earliest slot, except
that a stretch opening on a spring-forward gap fires at the transition itself when a wall
time in the gap matches (``gap="shift"``), a stretch opening on a fall-back skips the
repeated wall times under ``repeat="first"`` (they fired at their first occurrence), and a
stretch closing on a fall-back has no slot at a repeated wall time under ``repeat="last"``
(it fires at the second occurrence, in the next stretch). The work per slot is therefore a
few dozen zone look-ups, whatever the expression and policy: :attr:`Clock.steps` counts it.

Pure and deterministic: every instant is an argument and the counter lives in the call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Literal
from zoneinfo import ZoneInfo

DstGap = Literal["shift", "skip"]  # a wall time the clock skips: at the transition, or never
DstRepeat = Literal["first", "last", "both"]  # a wall time the clock repeats: which occurrence

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

    def instants(self, wall: datetime, gap: DstGap, repeat: DstRepeat) -> list[datetime]:
        """The UTC instants a naive local wall time fires at, under a DST policy."""
        first = wall.replace(tzinfo=self.zone, fold=0).astimezone(UTC)
        second = wall.replace(tzinfo=self.zone, fold=1).astimezone(UTC)
        exists_first = self.wall(first) == wall
        exists_second = self.wall(second) == wall
        if not exists_first and not exists_second:
            # In the gap: fold=1 reads it with the offset after the jump (an earlier instant),
            # fold=0 with the one before; the transition lies between them.
            return (
                [] if gap == "skip" else [self.transition(min(first, second), max(first, second))]
            )
        if exists_first and exists_second and first != second:
            return {"first": [first], "last": [second], "both": [first, second]}[repeat]
        return [first]

    def after_gap(self, wall: datetime) -> datetime:
        """The first wall time the clock shows after the gap holding ``wall``."""
        first = wall.replace(tzinfo=self.zone, fold=0).astimezone(UTC)
        second = wall.replace(tzinfo=self.zone, fold=1).astimezone(UTC)
        return self.wall(self.transition(min(first, second), max(first, second)))

    def repeats_later(self, wall: datetime, moment: datetime) -> bool:
        """Whether the clock shows ``wall`` (shown at ``moment``) again later."""
        second = wall.replace(tzinfo=self.zone, fold=1).astimezone(UTC)
        return second > moment and self.wall(second) == wall


def repeat_rule(repeat: DstRepeat | None, every_hour: bool) -> DstRepeat:
    """The repeated-wall-time rule in force: ``None`` is the rule from before the policy
    existed, ``first`` for a fixed-time expression, ``both`` for an interval one (its hour
    field matches every hour), so it keeps its real interval."""
    if repeat is not None:
        return repeat
    return "both" if every_hour else "first"


def transition_between(before: datetime, after: datetime, zone: ZoneInfo) -> datetime:
    """The first instant in (before, after] carrying ``after``'s offset (to the second)."""
    return Clock(zone).transition(before, after)


def instants(
    wall: datetime,
    zone: ZoneInfo,
    every_hour: bool,
    gap: DstGap = "shift",
    repeat: DstRepeat | None = None,
) -> list[datetime]:
    """The UTC instants a naive local wall time fires at, under a DST policy."""
    return Clock(zone).instants(wall, gap, repeat_rule(repeat, every_hour))


@dataclass
class Search:
    """One expression in one zone: ``next_wall`` is its calendar, ``gap`` and ``repeat``
    its DST policy (``repeat`` resolved by :func:`repeat_rule`)."""

    clock: Clock
    next_wall: NextWall
    gap: DstGap
    repeat: DstRepeat
    until: datetime | None = None  # give up (None) on slots past this UTC instant

    def next_slot(self, after: datetime) -> datetime | None:
        """The first slot strictly after the aware instant ``after``, as a UTC instant;
        None when there is none up to about :attr:`until` (within a day: wall times and
        instants are compared)."""
        after = after.astimezone(UTC)
        while self.until is None or after <= self.until:
            if self._spread(after) == timedelta(0):
                return self._steady(after)
            slot = self._near_transition(after)
            if slot is not None:
                return slot
            after = after.replace(microsecond=0) + NEAR  # nothing up to here: look further
        return None

    def _wall_after(self, wall: datetime) -> datetime:
        self.clock.steps += 1
        return self.next_wall(wall)

    def _spread(self, moment: datetime) -> timedelta:
        """How far the zone's UTC offset moves within a day of ``moment`` (0 away from DST)."""
        offsets = [self.clock.offset(moment + hours) for hours in (-NEAR, timedelta(0), NEAR)]
        return max(offsets) - min(offsets)

    def _steady(self, after: datetime) -> datetime | None:
        """No transition near ``after``: the first matching wall time with a later instant."""
        limit = None if self.until is None else self.until.replace(tzinfo=None) + NEAR
        wall = self.clock.wall(after) - SECOND
        while limit is None or wall <= limit:
            wall = self._wall_after(wall)
            fires = self.clock.instants(wall, self.gap, self.repeat)
            if not fires:  # in a gap, skipped: so is every wall time up to its end
                wall = self.clock.after_gap(wall) - SECOND
                continue
            later = [m for m in fires if m > after]
            if later:
                return min(later)
        return None

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
        if before < offset and opens >= earliest and self.gap == "shift":
            gap = opens.replace(tzinfo=None) + before  # first wall time the clock skips
            if self._wall_after(gap - SECOND) < wall_opens:
                return opens  # a skipped wall time fires at the transition
        first = max(earliest, opens).replace(tzinfo=None) + offset
        if before > offset and self.repeat == "first":
            first = max(first, opens.replace(tzinfo=None) + before)  # past the repeated ones
        wall = self._wall_after(first - SECOND)
        if wall >= closes.replace(tzinfo=None) + offset:
            return None
        slot = (wall - offset).replace(tzinfo=UTC)
        if self.repeat == "last" and self.clock.repeats_later(wall, slot):
            # The clock shows this wall time again after a fall-back at or past ``closes``;
            # every later wall time of this stretch repeats too: their slots come after it.
            return None
        return slot
