"""DST policies (``dst_gap`` shift|skip, ``dst_repeat`` first|last|both|None): next_slot under
each policy against an independent enumeration of real transitions, the work and CPU time per
slot under every policy, the preview (operations, CLI) and the status line that shows it.

The oracle reads the zone's clock at every UTC second (or minute) of a window around a real
transition. It knows nothing of folds, offsets or field skipping: a wall time the clock shows
once fires there; one it shows more than once fires at the first showing ("first"), the last
("last") or each ("both"); a matching wall time the clock jumps over fires at the first
instant after the jump ("shift") or nowhere ("skip").
"""

from __future__ import annotations

import os
import statistics
import time
from bisect import bisect_right
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobctl.starter import operations, render
from jobctl.starter.errors import SpecError
from jobctl.workflows.cronmath import (
    DstGap,
    DstRepeat,
    SkippedByGapError,
    next_slot,
    next_slot_counted,
    parse,
    upcoming,
)
from jobctl.workflows.models import CronReport
from tests.helpers.cronexpr import accepted, expressions
from tests.helpers.cronoracle import (
    MINUTE_CRONS,
    SECONDS_CRONS,
    TRANSITIONS,
    WORK_ZONES,
    brute_force_slots,
    wall_matcher,
)
from tests.helpers.processes import jobs

POLICIES: list[tuple[DstGap, DstRepeat | None]] = [
    (gap, repeat) for gap in ("shift", "skip") for repeat in ("first", "last", "both", None)
]
MARGIN = timedelta(hours=3)  # longer than any fall-back or gap in TRANSITIONS
NY = ZoneInfo("America/New_York")


# -- the oracle -----------------------------------------------------------------------------


Reading = tuple[datetime, datetime, bool, bool]


def clock_readings(
    expression: str, zone: ZoneInfo, start: datetime, end: datetime
) -> list[Reading]:
    """(instant, wall time shown, wall matches, a matching wall time was jumped over) at each
    step of UTC time from ``start - MARGIN`` to ``end + MARGIN``."""
    step, named = wall_matcher(expression)

    readings = []
    moment, previous = start - MARGIN, None
    while moment <= end + MARGIN:
        wall = moment.astimezone(zone).replace(tzinfo=None)
        jumped = False
        if previous is not None and wall - previous > step:  # the clock jumped forward
            skipped = (previous + step * n for n in range(1, (wall - previous) // step))
            jumped = any(named(w) for w in skipped)
        readings.append((moment, wall, named(wall), jumped))
        previous, moment = wall, moment + step
    return readings


def oracle_slots(
    readings: list[Reading],
    showings: dict[datetime, list[datetime]],
    start: datetime,
    end: datetime,
    gap: str,
    repeat: str,
) -> list[datetime]:
    """Every slot in (start, end] under the policy (``repeat`` already resolved);
    ``showings``: the instants at which the clock shows each wall time."""
    slots = []
    for moment, wall, matches, jumped in readings:
        shown = showings[wall]
        fires = matches and (
            len(shown) == 1
            or repeat == "both"
            or moment == (shown[0] if repeat == "first" else shown[-1])
        )
        if (fires or (jumped and gap == "shift")) and start < moment <= end:
            slots.append(moment)
    return slots


def every_policy(
    expression: str, zone: ZoneInfo, start: datetime, end: datetime
) -> dict[tuple[str, str], list[datetime]]:
    readings = clock_readings(expression, zone, start, end)
    showings: dict[datetime, list[datetime]] = {}
    for moment, wall, _, _ in readings:
        showings.setdefault(wall, []).append(moment)
    return {
        (gap, rule): oracle_slots(readings, showings, start, end, gap, rule)
        for gap in ("shift", "skip")
        for rule in ("first", "last", "both")
    }


def queries(truth: list[datetime], differ: list[datetime], start: datetime) -> list[datetime]:
    """Instants to ask from: about 30 slots spread over the window, about 30 of the slots
    where policies disagree (in and around the gap or the repeated hour) and the second
    before some of them, instants between those, and the window's start."""
    picked = {*truth[: -1 : max(1, len(truth) // 30)], *differ[:: max(1, len(differ) // 30)]}
    picked |= {s - timedelta(seconds=1) for s in differ[:: max(1, len(differ) // 10)]}
    slots = sorted(picked)
    between = [s + timedelta(seconds=s.second % 7, microseconds=1 + s.minute) for s in slots]
    return [start, *slots, *between]


@pytest.mark.parametrize("expression", SECONDS_CRONS + MINUTE_CRONS)
@pytest.mark.parametrize(("zone_name", "transition"), TRANSITIONS)
def test_next_slot_agrees_with_the_enumeration_under_every_policy(
    zone_name: str, transition: datetime, expression: str
) -> None:
    zone, cron = ZoneInfo(zone_name), parse(expression)
    hours = 4 if cron.has_seconds else 50  # every window holds a 01:30 local
    start, end = transition - timedelta(hours=2), transition + timedelta(hours=hours)
    # None is the rule from before the policy: the oracle resolves it by the hour field.
    default = "both" if len(cron.hours) == 24 else "first"
    oracle = every_policy(expression, zone, start, end)
    if not cron.has_seconds:  # the two oracles agree on today's rule (minutes: cheap)
        assert oracle["shift", default] == brute_force_slots(expression, zone, start, end)
    every, some = set(oracle["shift", "both"]), set(oracle["skip", "both"])
    for slots in oracle.values():
        every, some = every & set(slots), some | set(slots)
    differ = sorted(some - every)
    for gap, repeat in POLICIES:
        truth = oracle[gap, repeat or default]
        for after in queries(truth, differ, start):
            index = bisect_right(truth, after)
            if index < len(truth):
                expected = truth[index]
                got = next_slot(cron, zone, after, gap=gap, repeat=repeat)
                assert got == expected, (gap, repeat, after.isoformat(), got.isoformat())


def test_the_policies_really_differ_in_new_york() -> None:
    """The enumeration above would pass a policy-blind next_slot only if they agreed."""
    spring, fall = TRANSITIONS[0][1], TRANSITIONS[1][1]
    win = timedelta(hours=12)
    gaps = every_policy("30 2 * * *", NY, spring - win, spring + win)
    assert gaps["shift", "first"] == [spring] and gaps["skip", "first"] == []
    repeats = every_policy("30 1 * * *", NY, fall - win, fall + win)
    edt, est = fall - timedelta(minutes=30), fall + timedelta(minutes=30)
    assert [repeats["shift", rule] for rule in ("first", "last", "both")] == [
        [edt],
        [est],
        [edt, est],
    ]


# -- examples a user would check ------------------------------------------------------------


def local(slots: list[datetime], zone: ZoneInfo) -> list[str]:
    return [s.astimezone(zone).strftime("%m-%d %H:%M%z") for s in slots]


@pytest.mark.parametrize(
    ("expression", "after", "gap", "repeat", "expected"),
    [
        (
            "30 2 * * *",
            "2025-03-08T12:00Z",
            "shift",
            None,
            ["03-09 03:00-0400", "03-10 02:30-0400"],
        ),
        ("30 2 * * *", "2025-03-08T12:00Z", "skip", None, ["03-10 02:30-0400", "03-11 02:30-0400"]),
        (
            "30 1 * * *",
            "2025-11-01T12:00Z",
            "shift",
            None,
            ["11-02 01:30-0400", "11-03 01:30-0500"],
        ),
        (
            "30 1 * * *",
            "2025-11-01T12:00Z",
            "shift",
            "last",
            ["11-02 01:30-0500", "11-03 01:30-0500"],
        ),
        (
            "30 1 * * *",
            "2025-11-01T12:00Z",
            "skip",
            "both",
            ["11-02 01:30-0400", "11-02 01:30-0500"],
        ),
        (
            "*/30 * * * *",
            "2025-11-02T05:10Z",
            "shift",
            "first",
            ["11-02 01:30-0400", "11-02 02:00-0500"],  # an hour without a slot
        ),
        (
            "*/30 * * * *",
            "2025-11-02T04:10Z",
            "shift",
            "last",
            ["11-02 00:30-0400", "11-02 01:00-0500"],  # the EDT 01:00 and 01:30 do not fire
        ),
    ],
)
def test_new_york_examples(
    expression: str, after: str, gap: DstGap, repeat: DstRepeat | None, expected: list[str]
) -> None:
    start = datetime.fromisoformat(after)
    assert local(upcoming(parse(expression), NY, start, 2, gap=gap, repeat=repeat), NY) == expected


def test_a_cron_whose_every_time_falls_in_a_gap_has_no_slot_when_gaps_are_skipped() -> None:
    cron, after = parse("30 2 * 3 0#2"), datetime(2025, 1, 1, tzinfo=UTC)  # 2nd Sunday of March
    assert next_slot(cron, NY, after) == datetime(2025, 3, 9, 7, tzinfo=UTC)  # shifted
    with pytest.raises(SkippedByGapError, match="falls in a DST gap"):
        next_slot(cron, NY, after, gap="skip")
    # Elsewhere the same wall time exists: skip only leaves out what the clock skips.
    assert next_slot(cron, ZoneInfo("UTC"), after, gap="skip") == datetime(
        2025, 3, 9, 2, 30, tzinfo=UTC
    )


@pytest.mark.parametrize(
    ("expression", "zone_name"),
    [
        ("* * 2 * 3 0#2", "America/New_York"),  # every second of the skipped hour
        ("30 2 * 3 0L", "Europe/Berlin"),
        ("15 2 * 10 0#1", "Australia/Lord_Howe"),  # a 30-minute gap
    ],
)
def test_a_cron_that_only_names_skipped_times_is_refused_quickly(
    expression: str, zone_name: str
) -> None:
    """Not by walking to year 9999 (285 s for the first, second by second): from 2038 zones
    repeat their yearly rule and the calendar repeats every 400 years, so the search stops
    400 years on. Measured about 0.02 s of CPU each; the limit is 25 times that."""
    cron, zone = parse(expression), ZoneInfo(zone_name)
    for after in (datetime(2026, 1, 1, tzinfo=UTC), datetime(2035, 6, 1, tzinfo=UTC)):
        began = time.process_time()
        with pytest.raises(SkippedByGapError):
            next_slot(cron, zone, after, gap="skip")
        assert time.process_time() - began < 0.5
        assert next_slot(cron, zone, after) > after  # shifted, it runs


def test_before_2007_new_york_had_no_gap_in_march_so_skip_finds_those_slots() -> None:
    """The search follows the zone's history: the limit applies from 2038, not from now."""
    slot = next_slot(parse("30 2 * 3 0#2"), NY, datetime(2005, 1, 1, tzinfo=UTC), gap="skip")
    assert slot.astimezone(NY).isoformat() == "2005-03-13T02:30:00-05:00"


# -- properties under every policy: order, continuity, bounded work --------------------------


@settings(max_examples=200, deadline=None)
@given(
    expression=expressions(),
    zone=st.sampled_from(WORK_ZONES),
    transition=st.sampled_from([t for _, t in TRANSITIONS]),
    shift=st.integers(-30 * 3600, 30 * 3600),
    policy=st.sampled_from(POLICIES),
)
def test_any_expression_under_any_policy_increases_continues_and_takes_bounded_work(
    expression: str,
    zone: ZoneInfo,
    transition: datetime,
    shift: int,
    policy: tuple[DstGap, DstRepeat | None],
) -> None:
    cron, (gap, repeat) = accepted(expression), policy
    after = transition + timedelta(seconds=shift)
    try:
        slots = upcoming(cron, zone, after, 5, gap=gap, repeat=repeat)
    except SkippedByGapError:  # every time it names is skipped: shift must still find one
        assert gap == "skip"
        next_slot(cron, zone, after, repeat=repeat)
        return
    assert slots[0] > after and all(a < b for a, b in pairwise(slots))
    assert upcoming(cron, zone, slots[1], 3, gap=gap, repeat=repeat) == slots[2:]
    for previous in [after, *slots[:-1]]:
        _, steps = next_slot_counted(cron, zone, previous, gap=gap, repeat=repeat)
        assert steps <= 150


@pytest.mark.parametrize(("gap", "repeat"), POLICIES)
@pytest.mark.parametrize(
    "start",
    [datetime(2025, 11, 2, 5, 58, 20, tzinfo=UTC), datetime(2025, 3, 9, 6, 58, 20, tzinfo=UTC)],
    ids=["fall-back", "spring-forward"],
)
def test_every_second_across_new_york_stays_well_under_a_millisecond_per_slot(
    start: datetime, gap: DstGap, repeat: DstRepeat | None
) -> None:
    """CPU time (not wall time: other processes do not count), median of 200 slots; the
    default policy measured about 0.1 ms on the shared 2-core machine."""
    cron, after, spent = parse("* * * * * *"), start, []
    for _ in range(200):
        began = time.process_time()
        after = next_slot(cron, NY, after, gap=gap, repeat=repeat)
        spent.append(time.process_time() - began)
    assert after > start + timedelta(minutes=1, seconds=40)  # the run crossed the transition
    assert statistics.median(spent) < 0.001


# -- where users see it: preview (library, CLI, API route's operation) and status ----------


def test_preview_applies_the_policy_and_judges_it_like_the_spec() -> None:
    slots = operations.preview_cron(
        "30 1 * * *", "America/New_York", "2025-11-01T12:00:00Z", 1, gap="skip", repeat="last"
    )
    assert [(s.local, s.utc) for s in slots] == [
        ("2025-11-02T01:30:00-05:00", "2025-11-02T06:30:00Z")
    ]
    with pytest.raises(SpecError) as bad:
        operations.preview_cron("30 1 * * *", "UTC", None, 1, gap="never", repeat="twice")
    assert [field for field, _ in bad.value.problems] == ["dst_gap", "dst_repeat"]
    with pytest.raises(SpecError) as never:
        operations.preview_cron("30 2 * 3 0#2", "America/New_York", None, 1, gap="skip")
    [(field, reason)] = never.value.problems
    assert field == "dst_gap" and "falls in a DST gap" in reason


def test_cli_preview_takes_the_policy_flags() -> None:
    """Schedules nothing and needs no server (bad values: tests/hostile/test_dst_preview.py)."""
    args = ["cron", "preview", "30 2 * * *", "--tz", "America/New_York", "-n", "1"]
    done = jobs(dict(os.environ), *args, "--after", "2025-03-08T12:00:00Z", "--dst-gap", "skip")
    assert done.returncode == 0, done.stderr
    assert "2025-03-10T02:30:00-04:00  2025-03-10T06:30:00Z" in done.stdout


@pytest.mark.parametrize(
    ("cron", "gap", "repeat", "line"),
    [
        (
            "30 1 * * *",
            "shift",
            None,
            "dst:     gap shift, repeat first (default for a fixed time)",
        ),
        ("*/5 * * * *", "shift", None, "dst:     gap shift, repeat both (default for an interval)"),
        ("30 1 * * *", "skip", "last", "dst:     gap skip, repeat last"),
    ],
)
def test_status_shows_the_policy_in_force(
    cron: str, gap: DstGap, repeat: DstRepeat | None, line: str
) -> None:
    report = CronReport.model_validate(
        {
            "job_id": "c",
            "name": "n",
            "handler": "log",
            "status": "scheduled",
            "cron": cron,
            "timezone": "America/New_York",
            "overlap": "skip",
            "dst_gap": gap,
            "dst_repeat": repeat,
        }
    )
    assert line in render.cron_text(report).splitlines()
