"""An independent cron oracle for the DST tests (tests/test_cronwalk.py, tests/test_dst_policy.py):
real transitions, expressions that stress them, and reading the zone's clock step by step."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

from jobctl.workflows.cronmath import parse


def wall_matcher(expression: str) -> tuple[timedelta, Callable[[datetime], bool]]:
    """The clock's step for ``expression`` (a second or a minute) and whether a naive wall time
    matches it: times by our parsed fields, days by croniter (it agrees when one is '*')."""
    cron = parse(expression)
    step = timedelta(seconds=1 if cron.has_seconds else 60)
    days: dict[date, bool] = {}

    def named(wall: datetime) -> bool:
        if wall.date() not in days:
            at = datetime.combine(wall.date(), datetime.min.time())
            days[wall.date()] = croniter.match("0 0 " + " ".join(expression.split()[-3:]), at)
        times = (wall.second in cron.seconds, wall.minute in cron.minutes, wall.hour in cron.hours)
        return all(times) and days[wall.date()]

    return step, named


# -- an independent oracle: every UTC second, in order, across real transitions -------------
#
# The oracle knows nothing of folds, offsets or field skipping: it reads the zone's clock at
# each UTC second (or minute) and calls an instant a slot when the wall time it shows matches
# and the clock has not shown that wall time before (or, for an interval cron, at every
# showing), or when the clock has just jumped forward over a matching wall time.

TRANSITIONS = [
    ("America/New_York", datetime(2025, 3, 9, 7, tzinfo=UTC)),  # 02:00 EST -> 03:00 EDT
    ("America/New_York", datetime(2025, 11, 2, 6, tzinfo=UTC)),  # 02:00 EDT -> 01:00 EST
    ("Europe/London", datetime(2025, 3, 30, 1, tzinfo=UTC)),
    ("Europe/London", datetime(2025, 10, 26, 1, tzinfo=UTC)),
    ("Australia/Lord_Howe", datetime(2025, 4, 5, 15, tzinfo=UTC)),  # back 30 minutes
    ("Australia/Lord_Howe", datetime(2025, 10, 4, 15, 30, tzinfo=UTC)),  # forward 30 minutes
    ("Pacific/Apia", datetime(2011, 12, 30, 10, tzinfo=UTC)),  # skips 30 December: +24 hours
    ("Antarctica/Troll", datetime(2025, 10, 26, 1, tzinfo=UTC)),  # back 2 hours
]
SECONDS_CRONS = [
    "* * * * * *",
    "*/20 * * * * *",
    "*/7 */3 * * * *",  # fixed-time: the hour field does not match every hour
    "15,45 * 1-2 * * *",
    "0 30 1 * * *",
    "59 59 1 * * *",  # the last second of a repeated hour, or one inside a gap
]
MINUTE_CRONS = ["* * * * *", "*/15 * * * *", "30 1 * * *", "30 2 * * *", "0 0 * * *"]
REPEAT_MEMORY = timedelta(hours=3)  # longer than any fall-back in TRANSITIONS


def brute_force_slots(
    expression: str, zone: ZoneInfo, start: datetime, end: datetime
) -> list[datetime]:
    """Every slot in (start, end], found by reading the clock at each step of UTC time."""
    cron = parse(expression)
    step, named = wall_matcher(expression)

    moment = start - REPEAT_MEMORY
    shown: set[datetime] = set()
    previous: datetime | None = None
    slots = []
    while moment <= end:
        wall = moment.astimezone(zone).replace(tzinfo=None)
        fires = named(wall) and (cron.every_hour or wall not in shown)
        if previous is not None and wall - previous > step:  # the clock jumped forward
            skipped = (previous + step * n for n in range(1, (wall - previous) // step))
            fires = fires or any(named(w) for w in skipped)
        if fires and moment > start:
            slots.append(moment)
        shown.add(wall)
        previous = wall
        moment += step
    return slots


WORK_ZONES = [
    ZoneInfo(name)
    for name in sorted(
        {name for name, _ in TRANSITIONS}
        | {"UTC", "Europe/Berlin", "Asia/Kolkata", "America/Santiago"}
    )
]
