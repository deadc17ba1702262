"""``jobctl cron preview`` / ``GET /cron/preview``: the next slots of an expression, no server."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ValidationError

from jobctl.starter.errors import SpecError
from jobctl.starter.operations.validation import Problems
from jobctl.workflows import cronmath
from jobctl.workflows.cronmath import DstGap, DstRepeat
from jobctl.workflows.models import SlotTime, parse_instant


class DstPolicy(BaseModel):
    """A spec's DST policy fields, judged alone (same types and messages as the spec's)."""

    dst_gap: DstGap = "shift"
    dst_repeat: DstRepeat | None = None


def _policy(problems: Problems, gap: str, repeat: str | None) -> DstPolicy | None:
    try:
        return DstPolicy.model_validate({"dst_gap": gap, "dst_repeat": repeat})
    except ValidationError as err:
        problems.items += SpecError.from_validation(err).problems
        return None


def preview_cron(
    expression: str,
    timezone: str,
    after: str | datetime | None,
    count: int,
    *,
    gap: str = "shift",
    repeat: str | None = None,
) -> list[SlotTime]:
    """The next ``count`` slots of an expression after ``after`` (default now), which must
    lie in the spec's date range (ISO-8601 with an offset, 1970 to 10 years ahead), under
    the DST policy ``gap``/``repeat``, judged as a spec's ``dst_gap``/``dst_repeat``."""
    now = datetime.now(UTC)
    problems = Problems()
    cron = problems.check("cron", lambda: cronmath.parse(expression))
    tz = problems.check("timezone", lambda: cronmath.zone(timezone))
    start = problems.check("after", lambda: now if after is None else parse_instant(after, now))
    policy = _policy(problems, gap, repeat)
    problems.raise_any()
    assert cron is not None and tz is not None and start is not None and policy is not None
    try:
        slots = cronmath.upcoming(
            cron, tz, start, count, gap=policy.dst_gap, repeat=policy.dst_repeat
        )
    except cronmath.SkippedByGapError as err:  # every time it names falls in a DST gap
        raise SpecError([("dst_gap", f"cron {expression!r} {err}")]) from err
    except (OverflowError, ValueError) as err:  # a slot beyond what datetime can hold
        reason = f"the next {count} slot(s) after it cannot be computed ({err}); ask for fewer"
        raise SpecError([("after", reason)]) from err
    return [SlotTime(local=local, utc=utc) for local, utc in cronmath.slot_times(slots, tz)]
