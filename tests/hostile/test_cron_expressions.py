"""Hostile cron expressions: each is refused by ``cronmath.parse`` with one message that names
the field and quotes the part at fault, and reaches the API/CLI door as a problem on ``cron``
(what the API answers with 422 and the CLI with exit 2). Every expression that is accepted
has a next slot from any instant, in any zone: checked on random expressions.

Pure: no server (``validate_spec`` with ``handlers=None`` is the door without one).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobctl.starter.errors import SpecError
from jobctl.starter.operations import validate_spec
from jobctl.workflows.cronmath import (
    MAX_GAP_DAYS,
    CronError,
    matches,
    next_slot,
    next_wall,
    parse,
    upcoming,
)
from tests.helpers.cronexpr import accepted, expressions

NOW = datetime(2025, 6, 1, 12, tzinfo=UTC)
WHOLE = "(whole expression)"  # the problem is the expression's shape, not one field
DAYS = "(day fields)"  # day problems name day-of-month, month and day-of-week together

# (expression, the field the message names, what else it must say)
HOSTILE = [
    # reversed ranges: refused, with the list they probably meant
    ("1-0 * * * *", "minute", "'1-0' runs backwards (1 is after 0); ranges do not wrap"),
    ("0 23-1 * * *", "hour", "'23-1' runs backwards (23 is after 1); ranges do not wrap"),
    ("0 23-1 * * *  ", "hour", "ranges do not wrap around, write '23,0-1'"),
    ("0 0 * * 5-2", "day-of-week", "'5-2' runs backwards (5 is after 2)"),
    ("0 0 * * 5-2 ", "day-of-week", "ranges do not wrap around, write '5-6,0-2'"),
    ("0 0 31-1 * *", "day-of-month", "'31-1' runs backwards"),
    ("0 0 * DEC-JAN *", "month", "'DEC-JAN' runs backwards (12 is after 1)"),
    ("59-0 * * * * *", "second", "'59-0' runs backwards"),
    ("0 0 * * FRI-MON", "day-of-week", "write '5-6,0-1'"),
    # empty list items
    ("1,,2 * * * *", "minute", "'1,,2' has an empty item in its list"),
    ("0 ,5 * * *", "hour", "',5' has an empty item"),
    ("0 0 1, * *", "day-of-month", "'1,' has an empty item"),
    ("0 0 * * MON,,FRI", "day-of-week", "'MON,,FRI' has an empty item"),
    # bare and broken steps
    ("/5 * * * *", "minute", "'/5' has nothing before '/'; write '*/5'"),
    ("5/ * * * *", "minute", "'5/' has nothing after '/'"),
    ("0 0 */ * *", "day-of-month", "'*/' has nothing after '/'"),
    ("0 0 * * /2", "day-of-week", "'/2' has nothing before '/'"),
    ("*/5/2 * * * *", "minute", "'*/5/2' has '5/2' after '/'"),
    ("*/x * * * *", "minute", "'*/x' has 'x' after '/'"),
    # step 0, and steps wider than their range
    ("*/0 * * * *", "minute", "'*/0' has step 0"),
    ("0 0 * 1-12/0 *", "month", "'1-12/0' has step 0"),
    ("0/0 * * * * *", "second", "'0/0' has step 0"),
    ("*/60 * * * *", "minute", "'*/60' has step 60, wider than its range 0-59: write '0'"),
    ("0 */24 * * *", "hour", "'*/24' has step 24, wider than its range 0-23"),
    ("0 0 * */12 *", "month", "'*/12' has step 12, wider than its range 1-12"),
    ("0 0 * * */7", "day-of-week", "'*/7' has step 7, wider than its range 0-6"),
    ("0 0 1-5/9 * *", "day-of-month", "'1-5/9' has step 9, wider than its range 1-5"),
    # values out of range
    ("60 * * * *", "minute", "'60' has 60 outside 0-59"),
    ("0 24 * * *", "hour", "'24' has 24 outside 0-23"),
    ("0 0 32 * *", "day-of-month", "'32' has 32 outside 1-31"),
    ("0 0 0 * *", "day-of-month", "'0' has 0 outside 1-31"),
    ("0 0 * 0 *", "month", "'0' has 0 outside 1-12"),
    ("0 0 * * 8", "day-of-week", "'8' has 8 outside 0-7 (0 and 7 are Sunday)"),
    ("60 0 0 * * *", "second", "'60' has 60 outside 0-59"),
    ("99999999999999999999 * * * *", "minute", "has 99999999999999999999 outside 0-59"),
    ("0 0-25 * * *", "hour", "'0-25' has 25 outside 0-23"),
    # L, W and # misuse
    ("0 0 * * 5#6", "day-of-week", "'5#6' asks for occurrence '6' after '#'; use 1-5"),
    ("0 0 * * 5#0", "day-of-week", "'5#0' asks for occurrence '0'"),
    ("0 0 * * #2", "day-of-week", "'#2' has nothing before '#'"),
    ("0 0 * * 5#", "day-of-week", "'5#' has nothing after '#'"),
    ("0 0 * * 5#2/2", "day-of-week", "'5#2/2' asks for occurrence '2/2'"),
    ("0 0 * * 8#1", "day-of-week", "'8#1' has 8 outside 0-7"),
    ("0 0 5#2 * *", "day-of-month", "'5#2' uses '#', which only works in day-of-week"),
    ("0 L * * *", "hour", "'L' uses 'L' or 'W', which only work in day-of-month"),
    ("0 0 * 5W *", "month", "'5W' is not a month (1-12 or JAN-DEC)"),
    ("0 0 LW * *", "day-of-month", "'LW' uses 'L' or 'W' wrongly"),
    ("0 0 L-5 * *", "day-of-month", "'L-5' uses 'L' or 'W' wrongly"),
    ("0 0 W * *", "day-of-month", "'W' uses 'L' or 'W' wrongly"),
    ("0 0 32W * *", "day-of-month", "'32W' has 32 outside 1-31"),
    ("0 0 * * L", "day-of-week", "'L' needs a weekday with 'L'"),
    ("0 0 * * 9L", "day-of-week", "'9L' has 9 outside 0-7"),
    # garbage tokens
    ("0 0 * * FUN", "day-of-week", "'FUN' is not a weekday (0-7 or SUN-SAT)"),
    ("0 0 * JANUARY *", "month", "'JANUARY' is not a month (1-12 or JAN-DEC)"),
    ("MON * * * *", "minute", "'MON' is not a number (0-59)"),
    ("0 0 ? * MON", "day-of-month", "'?' uses '?', which cron does not know; write '*'"),
    ("0 0 * * MON;", "day-of-week", "'MON;' has the character ';', which cron does not use"),
    ("0 0 * * $(reboot)", "day-of-week", "has the character '$'"),
    ("0 H * * *", "hour", "'H' uses hashed (H) or random (R) values"),
    ("R * * * *", "minute", "'R' uses hashed (H) or random (R) values"),
    ("*-5 * * * *", "minute", "'*-5' uses '*' inside a range"),
    ("1-2-3 * * * *", "minute", "'1-2-3' has more than one '-'"),
    ("0 -5 * * *", "hour", "'-5' has a range with no start"),
    ("0 0 * * MON-", "day-of-week", "'MON-' has a range with no end"),
    ("0 0 * 1-FOO *", "month", "'1-FOO' has 'FOO', which is not a month"),
    # unicode digits and look-alike letters
    ("\u0661 * * * *", "minute", "has the non-ASCII digit '\u0661'; use the digits 0-9"),
    ("0 \uff12 * * *", "hour", "has the non-ASCII digit '\uff12'"),
    ("0 0 * * M\u041eN", "day-of-week", "has the non-ASCII character '\u041e'"),
    ("0 0 \u00b2 * *", "day-of-month", "has the non-ASCII digit '\u00b2'"),
    # shape: length, field count, line breaks, odd spaces, shortcuts
    ("*/5 * * * * " + "1," * 60 + "2", WHOLE, "is 133 characters long; the limit is 120"),
    ("0" * 121, WHOLE, "is 121 characters long"),
    ("* * * * * * *", WHOLE, "has 7 fields; use 5 (minute hour day-of-month month"),
    ("* * * *", WHOLE, "has 4 fields"),
    ("", WHOLE, "has 0 fields"),
    ("   ", WHOLE, "has 0 fields"),
    ("0 0 * * *\n", WHOLE, "must be one line"),
    ("0 0 * * *\r\n0 1 * * *", WHOLE, "must be one line"),
    ("0 0 * * *\x00", WHOLE, "must be one line"),
    ("0\u00a00 * * * *", WHOLE, "has the space character '\\xa0'"),
    ("@yearly", WHOLE, "shortcuts like @daily are not supported; write '0 0 1 1 *'"),
    ("@HOURLY", WHOLE, "write '0 * * * *' instead"),
    ("@reboot", WHOLE, "'@reboot': shortcuts like @daily are not supported"),
    ("@every 5m", WHOLE, "'@every 5m': shortcuts"),
    # days that never meet, or meet too rarely for a workflow to wait for
    ("0 0 * 2 5#5", DAYS, "fires too rarely: month '2' and day-of-week '5#5' match days"),
    ("0 0 * 2 5#5 ", DAYS, "match days up to 40 years apart"),
    ("0 0 * 2 0#5", DAYS, "fires too rarely"),
    ("0 0 */29 2 1", DAYS, "up to 11 years apart"),
    (
        "0 0 30 2 *",
        DAYS,
        "can never fire: day-of-month '30' and month '2' never fall on a real date",
    ),
    ("0 0 31 2,4,6,9,11 *", DAYS, "can never fire"),
    ("0 0 30 2 MON#5", DAYS, "day-of-month '30', month '2' and day-of-week 'MON#5' match"),
    ("0 0 30,31 FEB *", DAYS, "can never fire"),
    ("0 0 31 APR,JUN *", DAYS, "can never fire"),
]

ACCEPTED = [
    ("0\t0\t*\t*\t*", "0 0 * * *"),  # tabs separate fields too
    ("  */15   *  * * *  ", "*/15 * * * *"),
    ("00 05 * * *", "00 05 * * *"),
    ("0 0 29 2 *", "0 0 29 2 *"),  # 8 years apart across 2100: the longest wait allowed
    ("0 0 29 2 1", "0 0 29 2 1"),  # both restricted: 29 February or any Monday in February
    ("0 0 L 2 *", "0 0 L 2 *"),
    ("0 0 * * 5#5", "0 0 * * 5#5"),
    ("0 0 * * 0-7", "0 0 * * 0-7"),
    ("0 0 * * sun-sat", "0 0 * * sun-sat"),
    ("0 0 31 * *", "0 0 31 * *"),
    ("59 23 31 12 *", "59 23 31 12 *"),
    ("*/59 */23 */30 */11 */6", "*/59 */23 */30 */11 */6"),
]


def _id(case: tuple[str, ...]) -> str:
    return repr(case[0])[:40]


@pytest.mark.parametrize(("expression", "field", "says"), HOSTILE, ids=map(_id, HOSTILE))
def test_a_hostile_expression_is_refused_naming_its_field(
    expression: str, field: str, says: str
) -> None:
    with pytest.raises(CronError) as caught:
        parse(expression)
    message = str(caught.value)
    assert says in message
    named = [
        name
        for name in ("second", "minute", "hour", "day-of-month", "month", "day-of-week")
        if message.startswith(f"{name} field ")
    ]
    if field == WHOLE:
        assert named == []
    elif field == DAYS:
        assert named == [] and ("day-of-month '" in message or "day-of-week '" in message)
    else:
        assert named == [field]
    # the door: a spec with it is refused with exactly this problem on `cron`
    with pytest.raises(SpecError) as door:
        validate_spec({"name": "hostile", "handler": "log", "cron": expression}, None, NOW)
    assert door.value.problems == [("cron", message)]
    assert door.value.exit_code == 2


@pytest.mark.parametrize(("expression", "stored"), ACCEPTED, ids=map(_id, ACCEPTED))
def test_odd_looking_but_sound_expressions_are_accepted(expression: str, stored: str) -> None:
    spec = validate_spec({"name": "fine", "handler": "log", "cron": expression}, None, NOW)
    assert spec.cron == stored
    cron = parse(expression)
    slots = upcoming(cron, ZoneInfo("America/New_York"), NOW, 3)
    assert NOW < slots[0] < slots[1] < slots[2]


def test_there_are_at_least_40_hostile_cases() -> None:
    assert len(HOSTILE) >= 40
    assert len({expression for expression, _, _ in HOSTILE}) == len(HOSTILE)


ZONES = st.sampled_from(
    [
        ZoneInfo(name)
        for name in (
            "UTC",
            "America/New_York",
            "Europe/Berlin",
            "Australia/Lord_Howe",
            "Asia/Kathmandu",
            "America/Santiago",
            "Pacific/Kiritimati",
            "Pacific/Pago_Pago",
        )
    ]
)
BASES = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(2037, 12, 31), timezones=st.just(UTC)
)


@settings(max_examples=400, deadline=None)
@given(expression=expressions(), zone=ZONES, after=BASES)
def test_every_accepted_expression_has_a_next_slot_from_any_instant(
    expression: str, zone: ZoneInfo, after: datetime
) -> None:
    cron = accepted(expression)
    slot = next_slot(cron, zone, after)
    assert after < slot <= after + timedelta(days=MAX_GAP_DAYS + 2)
    assert matches_or_replaces_a_gap_time_ours(cron.expression, slot, zone)


def matches_or_replaces_a_gap_time_ours(expression: str, slot: datetime, zone: ZoneInfo) -> bool:
    """The slot's wall time matches, or the slot is the spring-forward transition standing in
    for a matching wall time inside the gap (our calendar, not croniter's)."""
    cron = parse(expression)
    wall = slot.astimezone(zone).replace(tzinfo=None)
    if matches(cron, wall):
        return True
    before = (slot - timedelta(seconds=1)).astimezone(zone).utcoffset()
    after = slot.astimezone(zone).utcoffset()
    if before is None or after is None or after <= before:
        return False
    gap_start = wall - (after - before)
    return next_wall(cron, gap_start - timedelta(seconds=1)) < wall
