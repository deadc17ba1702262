"""Cron expressions and time zones: validation and the next slot, under our DST rules.

Pure and deterministic (the base time is always an argument), so the workflow sandbox passes
this module through. croniter does the calendar matching on *naive local wall times*, where
there is no DST; this module maps each wall time to real UTC instants:

* a wall time that does not exist (the spring-forward gap) fires once, at the first valid
  instant after the gap (the transition itself);
* a wall time that happens twice (the fall-back repeated hour) fires once, at its first
  occurrence, for a fixed-time job; an interval job, one whose hour field matches every hour
  (``*/15 * * * *``), fires at both occurrences, so it keeps its real interval.

Slots are UTC instants, strictly increasing: the next slot is the earliest instant strictly
after the previous one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter.croniter import CroniterBadDateError, CroniterError, croniter

MAX_EXPRESSION_LENGTH = 120
# A leap-day cron fires every 4 years, 8 around 2100; nothing valid waits longer.
MAX_YEARS_BETWEEN_SLOTS = 8
_HASH_OR_RANDOM = re.compile(r"(^|[,/-])[HR](\(|$|[,/-])", re.IGNORECASE)
_ALLOWED = re.compile(r"^[A-Za-z0-9*/,#-]+$")
_FEASIBILITY_BASE = datetime(2001, 1, 1)


class CronError(ValueError):
    """An expression we refuse, with a message fit for a user."""


@dataclass(frozen=True)
class Cron:
    """A validated expression: 5 fields, or 6 with seconds first."""

    expression: str
    has_seconds: bool
    every_hour: bool  # interval job: the hour field matches all 24 hours

    def iterator(self, start: datetime) -> croniter:
        return croniter(
            self.expression,
            start,
            second_at_beginning=self.has_seconds,
            max_years_between_matches=MAX_YEARS_BETWEEN_SLOTS,
        )


@lru_cache(maxsize=1024)
def parse(expression: str) -> Cron:
    """Validate strictly; raises :class:`CronError` naming the problem."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CronError(
            f"is {len(expression)} characters long; the limit is {MAX_EXPRESSION_LENGTH}"
        )
    if not expression.isascii():
        raise CronError("must be ASCII (digits, names like MON or JAN, and * / , - #)")
    fields = expression.split()
    if len(fields) not in (5, 6):
        raise CronError(
            f"has {len(fields)} fields; use 5 (minute hour day month weekday) "
            "or 6 with seconds first (second minute hour day month weekday)"
        )
    for field in fields:
        if not _ALLOWED.match(field):
            raise CronError(f"field {field!r} has characters cron does not use")
        if _HASH_OR_RANDOM.search(field):
            raise CronError(f"field {field!r}: hashed (H) and random (R) values are not supported")
    has_seconds = len(fields) == 6
    normalized = " ".join(fields)
    try:
        croniter(normalized, _FEASIBILITY_BASE, second_at_beginning=has_seconds)
    except CroniterError as err:
        raise CronError(_clean(err, normalized)) from err
    hour_field = fields[2] if has_seconds else fields[1]
    cron = Cron(normalized, has_seconds, every_hour=_matches_every_hour(hour_field))
    try:
        cron.iterator(_FEASIBILITY_BASE).get_next(datetime)
    except CroniterBadDateError as err:
        raise CronError("can never fire (no such date, e.g. 30 February)") from err
    return cron


def _matches_every_hour(field: str) -> bool:
    try:
        hours = {str(hour) for hour in croniter(f"0 {field} * * *").expanded[1]}
    except CroniterError:
        return False
    return hours == {"*"} or hours == {str(hour) for hour in range(24)}


def _clean(err: Exception, expression: str) -> str:
    message = str(err).replace(f"[{expression}] ", "").strip()
    if "out of range" in message:
        return (
            "has a value out of range (second/minute 0-59, hour 0-23, day 1-31, month 1-12, "
            "weekday 0-7)"
        )
    return message or "is not a valid cron expression"


def _wall(moment: datetime, zone: ZoneInfo) -> datetime:
    return moment.astimezone(zone).replace(tzinfo=None)


def _offset_spread(moment: datetime, zone: ZoneInfo) -> timedelta:
    """How far the zone's UTC offset moves within a day of ``moment`` (0 away from DST)."""
    offsets = [(moment + timedelta(hours=h)).astimezone(zone).utcoffset() for h in (-26, 0, 26)]
    known = [o for o in offsets if o is not None]
    return max(known) - min(known)


def transition_between(before: datetime, after: datetime, zone: ZoneInfo) -> datetime:
    """The first instant in (before, after] carrying ``after``'s offset (to the second)."""
    target = after.astimezone(zone).utcoffset()
    low, high = before, after
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(zone).utcoffset() == target:
            high = middle
        else:
            low = middle
    return high.replace(microsecond=0)


def instants(wall: datetime, zone: ZoneInfo, every_hour: bool) -> list[datetime]:
    """The UTC instants a naive local wall time fires at, under our DST rules."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    exists_first = _wall(first, zone) == wall
    exists_second = _wall(second, zone) == wall
    if not exists_first and not exists_second:
        # In the gap: fold=1 reads it with the offset after the jump (an earlier instant),
        # fold=0 with the one before; the transition lies between them.
        return [transition_between(min(first, second), max(first, second), zone)]
    if exists_first and exists_second and first != second:
        return [first, second] if every_hour else [first]
    return [first]


def next_slot(cron: Cron, zone: ZoneInfo, after: datetime) -> datetime:
    """The first slot strictly after the instant ``after`` (aware), as a UTC instant."""
    after = after.astimezone(UTC)
    spread = _offset_spread(after, zone)
    # Near a transition a wall time earlier than after's own can still be a later instant.
    walls = cron.iterator(_wall(after, zone) - spread - timedelta(seconds=1))
    best: datetime | None = None
    while True:
        wall = walls.get_next(datetime)
        if best is not None and wall > _wall(best, zone) + spread:
            return best
        for moment in instants(wall, zone, cron.every_hour):
            if moment > after and (best is None or moment < best):
                best = moment
        if best is not None and spread == timedelta(0):
            return best


def upcoming(cron: Cron, zone: ZoneInfo, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` slots strictly after ``after``."""
    slots: list[datetime] = []
    for _ in range(count):
        after = next_slot(cron, zone, after)
        slots.append(after)
    return slots


@lru_cache(maxsize=256)
def zone(name: str) -> ZoneInfo:
    """The zone, created here (outside the sandbox) so workflows get a real ZoneInfo."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise CronError(f"unknown IANA time zone {name!r}") from err


def slot_times(slots: list[datetime], tz: ZoneInfo) -> list[tuple[str, str]]:
    """(local ISO with offset, UTC ISO) for each slot, for display."""
    return [(slot.astimezone(tz).isoformat(), iso_utc(slot)) for slot in slots]


def iso_utc(moment: datetime) -> str:
    """``2025-11-02T05:30:00Z``: the form slot ids and the CLI use (seconds precision)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
