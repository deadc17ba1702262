"""``jobs cron preview`` / ``GET /cron/preview``: the next slots of an expression, no server."""

from __future__ import annotations

from datetime import UTC, datetime

from starter.errors import SpecError
from starter.operations.validation import Problems
from workflows import cronmath
from workflows.models import SlotTime, parse_instant


def preview_cron(
    expression: str, timezone: str, after: str | datetime | None, count: int
) -> list[SlotTime]:
    """The next ``count`` slots of an expression after ``after`` (default now), which must
    lie in the spec's date range (ISO-8601 with an offset, 1970 to 10 years ahead)."""
    now = datetime.now(UTC)
    problems = Problems()
    cron = problems.check("cron", lambda: cronmath.parse(expression))
    tz = problems.check("timezone", lambda: cronmath.zone(timezone))
    start = problems.check("after", lambda: now if after is None else parse_instant(after, now))
    problems.raise_any()
    assert cron is not None and tz is not None and start is not None
    try:
        slots = cronmath.upcoming(cron, tz, start, count)
    except (OverflowError, ValueError) as err:  # a slot beyond what datetime can hold
        reason = f"the next {count} slot(s) after it cannot be computed ({err}); ask for fewer"
        raise SpecError([("after", reason)]) from err
    return [SlotTime(local=local, utc=utc) for local, utc in cronmath.slot_times(slots, tz)]
