"""Instants given by a person (run_at, pause until, a preview's after): one date range, one
parser. The upper end (10 years ahead) is checked only where a clock is at hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, ValidationInfo

# The one date range: every instant a person gives (run_at, pause until, a preview's after)
# lies in [EARLIEST, now + MAX_AHEAD]; the upper end is checked where a clock is at hand.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
MAX_AHEAD = timedelta(days=3653)  # 10 years, leap days included

ISO_EXAMPLE = "2030-01-01T09:00:00+00:00"


def _iso_instant(value: Any) -> Any:
    """An instant is an ISO-8601 string (parsed by the standard library) or a datetime; never
    a number or a numeric string, which pydantic would otherwise read as Unix time."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:  # upper(): RFC 3339 allows a lowercase "t" and "z"
            return datetime.fromisoformat(value.upper())
        except ValueError:
            pass
    raise ValueError(f"must be an ISO-8601 date-time with an offset, e.g. {ISO_EXAMPLE}")


def check_instant(value: datetime, now: datetime | None = None) -> datetime:
    """The date range, in one place: aware, not before EARLIEST and, when ``now`` is given
    (a submission, not data decoded in a workflow), at most MAX_AHEAD after it."""
    if value.utcoffset() is None:
        raise ValueError(f"must include a timezone offset, e.g. {ISO_EXAMPLE}")
    too_early = "must not be before 1970-01-01T00:00:00Z"
    try:
        utc = value.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00: no such UTC instant
        late = value.year > EARLIEST.year
        raise ValueError("must be at most 10 years ahead" if late else too_early) from None
    if utc < EARLIEST:
        raise ValueError(too_early)
    if now is not None and utc - now > MAX_AHEAD:
        raise ValueError("must be at most 10 years ahead")
    return value


def parse_instant(value: Any, now: datetime | None = None) -> datetime:
    """An ISO-8601 string or datetime checked like every Instant field (ValueError)."""
    moment: datetime = _iso_instant(value)
    return check_instant(moment, now)


def door_clock(info: ValidationInfo) -> datetime | None:
    """The clock a submission is judged by at the door (``context={"now": ...}``); None when
    recorded data is decoded (a workflow's input), which the door's rules do not re-judge."""
    now = (info.context or {}).get("now")
    return now if isinstance(now, datetime) else None


def _instant_in_range(value: datetime, info: ValidationInfo) -> datetime:
    return check_instant(value, door_clock(info))


# A time given by a person (run_at, pause until, a preview's after): see check_instant.
Instant = Annotated[datetime, BeforeValidator(_iso_instant), AfterValidator(_instant_in_range)]

# A time given by a person: an offset is required, so no one's local clock is guessed; the
# date range is the spec's (check_instant; 10 years ahead when validated with a "now").
OffsetDatetime = Instant | None
