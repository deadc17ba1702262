"""The pure cron module: strict validation, next slot, DST rules, properties."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from workflows.cronmath import CronError, next_slot, parse, upcoming

NY, BERLIN, LORD_HOWE = (
    ZoneInfo(z) for z in ("America/New_York", "Europe/Berlin", "Australia/Lord_Howe")
)


def local(slots: list[datetime], zone: ZoneInfo) -> list[str]:
    return [s.astimezone(zone).strftime("%m-%d %H:%M%z") for s in slots]


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("* * * *", "has 4 fields"),
        ("1 2 3 4 5 6 7", "has 7 fields"),
        ("@daily", "has 1 fields"),
        ("61 * * * *", "out of range"),
        ("* 24 * * *", "out of range"),
        ("0 0 0 * *", "out of range"),
        ("0 0 * 13 *", "out of range"),
        ("0 0 30 2 *", "can never fire"),
        ("0 0 31 4 *", "can never fire"),
        ("0 0 31 6,9,11 *", "can never fire"),
        ("H * * * *", "hashed (H) and random (R)"),
        ("R 1 * * *", "hashed (H) and random (R)"),
        ("é * * * *", "must be ASCII"),
        ("*/5 * * * * " + "1," * 60 + "2", "characters long"),
        ("0 0 * * MON;", "characters cron does not use"),
    ],
)
def test_bad_expressions_are_refused_with_a_reason(expression: str, reason: str) -> None:
    with pytest.raises(CronError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        parse(expression)


def test_good_expressions_are_normalized() -> None:
    assert parse("  */15   *  * * *").expression == "*/15 * * * *"
    assert parse("0 0 29 2 *").expression == "0 0 29 2 *"  # leap day: fires every 4 years
    assert parse("0 9 * * MON-FRI").every_hour is False
    assert parse("*/15 * * * *").every_hour is True
    assert parse("*/8 * * * * *").has_seconds is True


def test_six_fields_mean_seconds_first() -> None:
    start = datetime(2025, 1, 1, tzinfo=UTC)
    slots = upcoming(parse("*/8 * * * * *"), ZoneInfo("UTC"), start, 3)
    assert [s.second for s in slots] == [8, 16, 24]


def test_next_slot_is_strictly_after() -> None:
    on_slot = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)
    assert next_slot(parse("0 9 * * *"), ZoneInfo("UTC"), on_slot) == on_slot + timedelta(days=1)


# -- DST: fixed-time jobs fire once, interval jobs keep their real interval --------------


def test_new_york_fall_back_fixed_time_fires_once_at_the_first_occurrence() -> None:
    # croniter alone returns 01:30 twice on 2025-11-02 (EDT, then EST).
    slots = upcoming(parse("30 1 * * *"), NY, datetime(2025, 11, 1, 12, tzinfo=UTC), 3)
    assert local(slots, NY) == ["11-02 01:30-0400", "11-03 01:30-0500", "11-04 01:30-0500"]


def test_new_york_spring_forward_gap_fires_once_at_the_end_of_the_gap() -> None:
    slots = upcoming(parse("30 2 * * *"), NY, datetime(2025, 3, 8, 12, tzinfo=UTC), 3)
    assert local(slots, NY) == ["03-09 03:00-0400", "03-10 02:30-0400", "03-11 02:30-0400"]


@pytest.mark.parametrize(
    ("zone", "start"),
    [
        (NY, datetime(2025, 11, 2, 3, 0, tzinfo=UTC)),  # fall back 06:00Z
        (NY, datetime(2025, 3, 9, 5, 0, tzinfo=UTC)),  # spring forward 07:00Z
        (BERLIN, datetime(2025, 10, 26, 0, 0, tzinfo=UTC)),  # fall back 01:00Z
        (BERLIN, datetime(2025, 3, 30, 0, 0, tzinfo=UTC)),  # spring forward 01:00Z
        (LORD_HOWE, datetime(2025, 4, 5, 13, 0, tzinfo=UTC)),  # fall back 15:00Z, 30 minutes
        (LORD_HOWE, datetime(2025, 10, 4, 14, 0, tzinfo=UTC)),  # spring forward 15:30Z
    ],
)
def test_interval_jobs_keep_every_real_fifteen_minutes_through_transitions(
    zone: ZoneInfo, start: datetime
) -> None:
    slots = upcoming(parse("*/15 * * * *"), zone, start, 16)
    gaps = {b - a for a, b in itertools.pairwise(slots)}
    assert gaps == {timedelta(minutes=15)}
    offsets = {s.astimezone(zone).utcoffset() for s in slots}
    assert len(offsets) == 2  # the window really crosses the transition


@pytest.mark.parametrize(
    ("zone", "expression", "after", "expected"),
    [
        (
            BERLIN,
            "30 2 * * *",
            datetime(2025, 10, 25, 12, tzinfo=UTC),
            ["10-26 02:30+0200", "10-27 02:30+0100"],
        ),
        (
            BERLIN,
            "30 2 * * *",
            datetime(2025, 3, 29, 12, tzinfo=UTC),
            ["03-30 03:00+0200", "03-31 02:30+0200"],
        ),
        (
            LORD_HOWE,
            "45 1 * * *",
            datetime(2025, 4, 5, 0, tzinfo=UTC),
            ["04-06 01:45+1100", "04-07 01:45+1030"],
        ),
        (
            LORD_HOWE,
            "15 2 * * *",
            datetime(2025, 10, 4, 0, tzinfo=UTC),
            ["10-05 02:30+1100", "10-06 02:15+1100"],
        ),
    ],
)
def test_fixed_time_jobs_in_berlin_and_lord_howe(
    zone: ZoneInfo, expression: str, after: datetime, expected: list[str]
) -> None:
    assert local(upcoming(parse(expression), zone, after, 2), zone) == expected


# -- properties ----------------------------------------------------------------------------

ZONES = [
    ZoneInfo(z)
    for z in (
        "UTC",
        "America/New_York",
        "Europe/Berlin",
        "Australia/Lord_Howe",
        "Asia/Kolkata",
        "America/Santiago",
    )
]
EXPRESSIONS = st.sampled_from(
    [
        "*/15 * * * *",
        "30 1 * * *",
        "30 2 * * *",
        "0 * * * *",
        "45 1 * * *",
        "15 2 * * *",
        "0 0 * * *",
        "*/7 2 * * *",
        "0,30 1-3 * * *",
        "5 4 * * SUN",
        "0 12 1 * *",
        "*/20 * * * * *",
        "0 30 1 * * *",
        "0 0 29 2 *",
    ]
)
INSTANTS = st.datetimes(
    min_value=datetime(2024, 1, 1), max_value=datetime(2030, 12, 31), timezones=st.just(UTC)
)


def matches_or_replaces_a_gap_time(expression: str, slot: datetime, zone: ZoneInfo) -> bool:
    """The slot's local wall time matches the expression, or the slot is a spring-forward
    transition standing in for a matching wall time that fell into the gap."""
    wall = slot.astimezone(zone).replace(tzinfo=None)
    if croniter.match(expression, wall, second_at_beginning=len(expression.split()) == 6):
        return True
    before = (slot - timedelta(seconds=1)).astimezone(zone).utcoffset()
    after = slot.astimezone(zone).utcoffset()
    if before is None or after is None or after <= before:
        return False
    gap_start = wall - (after - before)
    it = croniter(
        expression,
        gap_start - timedelta(seconds=1),
        second_at_beginning=len(expression.split()) == 6,
    )
    return bool(it.get_next(datetime) < wall)


@settings(max_examples=300, deadline=None)
@given(expression=EXPRESSIONS, zone=st.sampled_from(ZONES), after=INSTANTS)
def test_next_slots_increase_match_and_never_repeat_a_fixed_time(
    expression: str, zone: ZoneInfo, after: datetime
) -> None:
    cron = parse(expression)
    slots = upcoming(cron, zone, after, 12)
    assert slots[0] > after
    assert all(a < b for a, b in itertools.pairwise(slots))
    assert all(matches_or_replaces_a_gap_time(expression, s, zone) for s in slots)
    if not cron.every_hour:
        walls = [s.astimezone(zone).replace(tzinfo=None) for s in slots]
        assert len(set(walls)) == len(walls)


@settings(max_examples=200, deadline=None)
@given(expression=EXPRESSIONS, zone=st.sampled_from(ZONES), after=INSTANTS)
def test_next_slot_from_inside_a_run_continues_the_same_sequence(
    expression: str, zone: ZoneInfo, after: datetime
) -> None:
    """Computing from any slot gives the rest of the sequence: nothing skipped or doubled."""
    cron = parse(expression)
    slots = upcoming(cron, zone, after, 6)
    assert upcoming(cron, zone, slots[2], 3) == slots[3:]
