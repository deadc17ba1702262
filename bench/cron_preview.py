"""How long the next slots of a cron take to compute, across DST transitions (no server).

    python -m bench.cron_preview [-n 1000]

Times ``cronmath.upcoming`` slot by slot (wall clock, ``time.perf_counter``) for seconds and
minute crons starting a minute before a transition, and prints the median, p99 and worst time
per slot, the total, and the most zone look-ups + wall-time steps one slot took. The issue's
target: '* * * * * *' in America/New_York, 1,000 slots across a transition, well under 2 s
(under 1 ms per slot); before, that took ~130 ms per slot within a day of a transition.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime

from bench.common import summary, write_result
from jobctl.workflows.cronmath import next_slot_counted, parse, upcoming, zone

# (expression, zone, start): each start is a minute before a transition
CASES = [
    ("* * * * * *", "America/New_York", "2025-11-02T05:59:00Z"),  # fall back 06:00Z
    ("* * * * * *", "America/New_York", "2025-03-09T06:59:00Z"),  # spring forward 07:00Z
    ("*/20 * * * * *", "America/New_York", "2025-11-02T05:59:00Z"),
    ("*/7 */3 * * * *", "Europe/London", "2025-10-26T00:59:00Z"),
    ("* * * * * *", "Australia/Lord_Howe", "2025-04-05T14:59:00Z"),  # back 30 minutes
    ("* * * * * *", "Pacific/Apia", "2011-12-30T09:59:00Z"),  # skips a whole day
    ("*/15 * * * *", "America/New_York", "2025-11-02T05:59:00Z"),
    ("30 2 * * *", "Europe/London", "2025-03-30T00:59:00Z"),
    ("0 30 1 * * *", "Australia/Lord_Howe", "2025-04-05T14:59:00Z"),
]


def run_case(expression: str, zone_name: str, start: str, count: int) -> dict[str, object]:
    cron, tz = parse(expression), zone(zone_name)
    after = datetime.fromisoformat(start.replace("Z", "+00:00"))
    per_slot, most_steps = [], 0
    began = time.perf_counter()
    slots = upcoming(cron, tz, after, count)
    total = time.perf_counter() - began
    for slot in [after, *slots[:-1]]:  # again, slot by slot, with the work counted
        tick = time.perf_counter()
        _, steps = next_slot_counted(cron, tz, slot)
        per_slot.append((time.perf_counter() - tick) * 1000)
        most_steps = max(most_steps, steps)
    crossed = len({moment.astimezone(tz).utcoffset() for moment in [after, *slots]}) > 1
    stats = summary(per_slot)
    print(
        f"{expression!r:18} {zone_name:20} n={count}: upcoming() {total * 1000:8.1f} ms total; "
        f"per slot median {stats['p50']:.3f} ms, p99 {stats['p99']:.3f} ms, "
        f"max {stats['max']:.3f} ms; most steps {most_steps}; crossed the transition: {crossed}"
    )
    return {
        "expression": expression,
        "zone": zone_name,
        "start": start,
        "count": count,
        "upcoming_total_ms": total * 1000,
        "per_slot_ms": stats,
        "most_steps": most_steps,
        "crossed": crossed,
        "last_slot": slots[-1].astimezone(UTC).isoformat(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=1000, help="slots per case (default 1000)")
    count = parser.parse_args().n
    rows = [run_case(expression, name, start, count) for expression, name, start in CASES]
    print("results:", write_result("cron_preview", {"cases": rows}))


if __name__ == "__main__":
    main()
