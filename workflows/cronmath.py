"""Cron expressions and time zones: validation and the next slot, under a DST policy.

Pure and deterministic (the base time is always an argument), so the workflow sandbox passes
this module through. Matching happens on *naive local wall times*, where there is no DST;
this module then maps each wall time to real UTC instants, as the job's DST policy says
(``dst_gap`` and ``dst_repeat`` on the spec; the defaults are the rules from before the
policy existed):

* a wall time that does not exist (the spring-forward gap): ``gap="shift"`` (default) fires
  it once, at the first valid instant after the gap (the transition itself; several skipped
  wall times make one slot there); ``gap="skip"`` does not fire it at all;
* a wall time that happens twice (the fall-back repeated hour): ``repeat="first"`` fires its
  first occurrence, ``"last"`` its second, ``"both"`` each; ``repeat=None`` (default) is
  ``"first"`` for a fixed-time job and ``"both"`` for an interval job, one whose hour field
  matches every hour (``*/15 * * * *``), so it keeps its real interval.

An expression whose every wall time falls in gaps (``30 2 * 3 SUN#2`` in New York) has no
slot under ``gap="skip"``: :func:`next_slot` raises :class:`SkippedByGapError` (a
:class:`CronError`) saying so.

Slots are UTC instants, strictly increasing: the next slot is the earliest instant strictly
after the previous one. Finding it skips ahead field by field, near a transition too
(:mod:`workflows.cronwalk`), so a slot costs a few dozen zone look-ups for any expression.

Syntax and its messages: :mod:`workflows.cronsyntax`. Days follow Vixie cron: when
day-of-month or day-of-week starts with ``*`` a day must match both; when both are restricted
it may match either.

Every accepted expression has matching days at most 8 years apart (the leap day's worst gap,
2096 to 2104), checked over the Gregorian calendar's 400-year cycle, so a next slot exists
from any instant up to the end of year 9999 minus 8 years; past that :func:`next_slot` raises
:class:`CronError`, never anything else.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from jobctl.workflows.cronsyntax import MAX_EXPRESSION_LENGTH as MAX_EXPRESSION_LENGTH
from jobctl.workflows.cronsyntax import CronError as CronError
from jobctl.workflows.cronsyntax import Days, read
from jobctl.workflows.cronwalk import Clock, Search
from jobctl.workflows.cronwalk import DstGap as DstGap
from jobctl.workflows.cronwalk import DstRepeat as DstRepeat
from jobctl.workflows.cronwalk import instants as instants
from jobctl.workflows.cronwalk import repeat_rule as repeat_rule
from jobctl.workflows.cronwalk import transition_between as transition_between

# A leap-day cron waits 8 years across 2100 (2096-02-29 to 2104-02-29); nothing may wait longer.
MAX_GAP_DAYS = (date(2104, 2, 29) - date(2096, 2, 29)).days
CYCLE_DAYS = 146097  # 400 Gregorian years, a whole number of weeks: the calendar repeats
_CYCLE_START = date(2000, 1, 1)
_RULES_REPEAT_FROM = datetime(2038, 1, 1, tzinfo=UTC)  # zones follow their yearly rule


class SkippedByGapError(CronError):
    """No slot under ``gap="skip"``, though there is one under ``"shift"``: every wall time
    the expression names falls in a DST gap (``30 2 * 3 SUN#2`` in New York)."""


@dataclass(frozen=True)
class Cron:
    """A validated expression: 5 fields, or 6 with seconds first."""

    expression: str
    has_seconds: bool
    every_hour: bool  # interval job: the hour field matches all 24 hours
    seconds: tuple[int, ...] = field(repr=False)
    minutes: tuple[int, ...] = field(repr=False)
    hours: tuple[int, ...] = field(repr=False)
    days: Days = field(repr=False)


@lru_cache(maxsize=1024)
def parse(expression: str) -> Cron:
    """Validate strictly (see :mod:`workflows.cronsyntax`) and refuse day fields that never
    meet or meet more than 8 years apart; raises :class:`CronError` naming the fields."""
    fields = read(expression)
    _check_days(fields.days, fields.texts[-3:])
    return Cron(
        expression=fields.expression,
        has_seconds=len(fields.texts) == 6,
        every_hour=len(fields.hours) == 24,
        seconds=fields.seconds,
        minutes=fields.minutes,
        hours=fields.hours,
        days=fields.days,
    )


# -- days: the 400-year cycle --------------------------------------------------------------


def _check_days(days: Days, texts: tuple[str, ...]) -> None:
    """Refuse day fields that never meet, or meet more than 8 years apart somewhere."""
    given = [
        f"{name} {text!r}"
        for name, text in zip(("day-of-month", "month", "day-of-week"), texts, strict=True)
        if text != "*"
    ]
    named = " and ".join([", ".join(given[:-1]), given[-1]] if len(given) > 1 else given)
    gap = _longest_gap(days)
    if gap is None:
        raise CronError(f"can never fire: {named} never fall on a real date (like 30 February)")
    wait, since = gap
    if wait > MAX_GAP_DAYS:
        before, after = date.fromordinal(since), date.fromordinal(since + wait)
        raise CronError(
            f"fires too rarely: {named} match days up to {wait / 365.2425:.0f} years apart "
            f"(nothing between {before} and {after}); the limit is 8 years "
            "(a leap day's longest wait)"
        )


def _month_length(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


@lru_cache(maxsize=8192)
def _matching_days(days: Days, length: int, first: int) -> tuple[int, ...]:
    """The matching days of a month ``length`` days long whose 1st is weekday ``first``
    (0 = Sunday); the month field is checked by the caller."""
    dom = {day for day in days.dom if day <= length}
    if days.dom_last:
        dom.add(length)
    dom.update(_nearest_weekday(day, length, first) for day in days.dom_nearest)
    dow = {day for day in range(1, length + 1) if (first + day - 1) % 7 in days.dow}
    for weekday, nth in days.dow_nth:
        day = 1 + (weekday - first) % 7 + 7 * (nth - 1)
        if day <= length:
            dow.add(day)
    for weekday in days.dow_last:
        day = 1 + (weekday - first) % 7
        dow.add(day + 7 * ((length - day) // 7))
    return tuple(sorted(dom & dow if days.both else dom | dow))


def _nearest_weekday(day: int, length: int, first: int) -> int:
    """Monday-Friday nearest ``day`` (or the last day) without leaving the month (croniter's)."""
    day = min(day, length)
    weekday = (first + day - 1) % 7
    if weekday == 6:  # Saturday
        return day - 1 if day > 1 else day + 2
    if weekday == 0:  # Sunday
        return day + 1 if day < length else day - 2
    return day


@lru_cache(maxsize=1)
def _cycle_months() -> tuple[tuple[int, int, int, int], ...]:
    """(month, length, weekday of its 1st, ordinal of its 1st) for the 4,800 months of one
    400-year cycle."""
    months = []
    ordinal, first = _CYCLE_START.toordinal(), _CYCLE_START.isoweekday() % 7
    for year in range(_CYCLE_START.year, _CYCLE_START.year + 400):
        for month in range(1, 13):
            length = _month_length(year, month)
            months.append((month, length, first, ordinal))
            ordinal, first = ordinal + length, (first + length) % 7
    return tuple(months)


@lru_cache(maxsize=1024)
def _longest_gap(days: Days) -> tuple[int, int] | None:
    """(days, ordinal it starts from) of the longest wait between matching days over one
    400-year cycle, wrapping around; None if no day ever matches. Exact above 31 days."""
    table = {(n, w): _matching_days(days, n, w) for n in (28, 29, 30, 31) for w in range(7)}
    first_hit = last_hit = -1
    wait, since = 0, 0
    for month, length, first, ordinal in _cycle_months():
        hits = table[length, first]
        if not hits or month not in days.months:
            continue
        start = ordinal + hits[0] - 1
        if last_hit < 0:
            first_hit = start
        elif start - last_hit > wait:
            wait, since = start - last_hit, last_hit
        last_hit = ordinal + hits[-1] - 1
    if last_hit < 0:
        return None
    return max((wait, since), (first_hit + CYCLE_DAYS - last_hit, last_hit))


def _next_day(days: Days, start: date) -> date:
    """The first matching day on or after ``start``."""
    year, month, day = start.year, start.month, start.day
    first = (start.isoweekday() - day + 1) % 7
    while year <= date.max.year:
        length = _month_length(year, month)
        if month in days.months:
            for hit in _matching_days(days, length, first):
                if hit >= day:
                    return date(year, month, hit)
        day, first = 1, (first + length) % 7
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    raise CronError(f"has no slot from {start} to the end of year {date.max.year}")


def _time_after(cron: Cron, moment: time) -> time | None:
    """The first matching time of day strictly after ``moment``'s second, if any."""
    hour, minute, second = moment.hour, moment.minute, moment.second
    if hour in cron.hours:
        if minute in cron.minutes:
            index = bisect_right(cron.seconds, second)
            if index < len(cron.seconds):
                return time(hour, minute, cron.seconds[index])
        index = bisect_right(cron.minutes, minute)
        if index < len(cron.minutes):
            return time(hour, cron.minutes[index], cron.seconds[0])
    index = bisect_right(cron.hours, hour)
    if index < len(cron.hours):
        return time(cron.hours[index], cron.minutes[0], cron.seconds[0])
    return None


def next_wall(cron: Cron, wall: datetime) -> datetime:
    """The first matching naive wall time strictly after ``wall`` (at whole seconds)."""
    today = wall.date()
    day = _next_day(cron.days, today)
    if day == today:
        later = _time_after(cron, wall.time())
        if later is not None:
            return datetime.combine(day, later)
        if today == date.max:
            raise CronError(f"has no slot after {wall} before the end of year {date.max.year}")
        day = _next_day(cron.days, today + timedelta(days=1))
    return datetime.combine(day, time(cron.hours[0], cron.minutes[0], cron.seconds[0]))


def matches(cron: Cron, wall: datetime) -> bool:
    """Whether a naive wall time (whole second) is one the expression names."""
    whole = wall.replace(microsecond=0)
    return next_wall(cron, whole - timedelta(seconds=1)) == whole


# -- wall times to instants: DST (see :mod:`workflows.cronwalk`) ----------------------------


def next_slot(
    cron: Cron,
    zone: ZoneInfo,
    after: datetime,
    *,
    gap: DstGap = "shift",
    repeat: DstRepeat | None = None,
) -> datetime:
    """The first slot strictly after the instant ``after`` (aware), as a UTC instant.

    Raises :class:`CronError` (a ValueError) when there is none before the end of year 9999.
    """
    return next_slot_counted(cron, zone, after, gap=gap, repeat=repeat)[0]


def next_slot_counted(
    cron: Cron,
    zone: ZoneInfo,
    after: datetime,
    *,
    gap: DstGap = "shift",
    repeat: DstRepeat | None = None,
) -> tuple[datetime, int]:
    """:func:`next_slot` and the work it took: zone look-ups plus matching-wall-time steps
    (a few dozen for any expression at any instant; never one per second)."""
    rule = repeat_rule(repeat, cron.every_hour)
    search = Search(Clock(zone), lambda wall: next_wall(cron, wall), gap, rule)
    try:
        if gap == "skip":  # the only policy under which an accepted expression can starve
            search.until = _last_chance(after)
        slot = search.next_slot(after)
    except CronError:
        raise
    except (OverflowError, ValueError) as err:  # datetime arithmetic past year 1 or 9999
        raise CronError(
            f"has no slot after {after.isoformat()}: dates end with year {date.max.year}"
        ) from err
    if slot is None:
        raise SkippedByGapError(
            f"has no slot after {after.isoformat()}: every wall time it names from then on "
            "falls in a DST gap, and dst_gap 'skip' leaves those out"
        )
    return slot, search.clock.steps


def _last_chance(after: datetime) -> datetime | None:
    """Past this instant no slot skipped by gaps can turn up: from 2038 on, zones follow
    their yearly rule (tzdata lists transitions up to 2037) and the calendar repeats every
    400 years, so 400 years after both ``after`` and 2038 everything has been seen. None
    when that is past what datetime holds (the search then ends with year 9999)."""
    try:
        return max(after, _RULES_REPEAT_FROM) + timedelta(days=CYCLE_DAYS + 2)
    except OverflowError:
        return None


def upcoming(
    cron: Cron,
    zone: ZoneInfo,
    after: datetime,
    count: int,
    *,
    gap: DstGap = "shift",
    repeat: DstRepeat | None = None,
) -> list[datetime]:
    """The next ``count`` slots strictly after ``after``."""
    slots: list[datetime] = []
    for _ in range(count):
        after = next_slot(cron, zone, after, gap=gap, repeat=repeat)
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
