"""Where a job's time went, from its own history: the gap before each event, by event.

``python -m bench.sustained --phases`` prints this for a sample of each side's completed
jobs. The n-th event of a type is one row (``WORKFLOW_TASK_STARTED#1`` is the wait of the
run's first workflow task on the shared task queue, ``#2`` the next one's on the sticky
queue), so the stage where a closed loop queues stands out as the one large median.
"""

from __future__ import annotations

import random
import statistics
from collections import defaultdict
from collections.abc import Sequence

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

SAMPLE = 150


async def event_gaps(client: Client, workflow_ids: Sequence[str]) -> dict[str, list[float]]:
    """Seconds from the previous event to each event (``TOTAL``: first to last), per
    ``<EVENT_TYPE>#<n-th of its type>``, over the given runs."""
    gaps: dict[str, list[float]] = defaultdict(list)
    for workflow_id in workflow_ids:
        events = [e async for e in client.get_workflow_handle(workflow_id).fetch_history_events()]
        first = previous = events[0].event_time.ToDatetime().timestamp()
        seen: dict[str, int] = defaultdict(int)
        for event in events[1:]:
            at = event.event_time.ToDatetime().timestamp()
            kind = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
            seen[kind] += 1
            gaps[f"{kind}#{seen[kind]}"].append(at - previous)
            previous = at
        gaps["TOTAL"].append(previous - first)
    return gaps


def steady_sample(completed: Sequence[str], size: int = SAMPLE) -> list[str]:
    """Up to ``size`` runs from after the loop's first third (past its ramp-up), seeded."""
    steady = completed[len(completed) // 3 :]
    return random.Random(1).sample(list(steady), min(size, len(steady)))


def show(label: str, gaps: dict[str, list[float]]) -> None:
    print(f"{label}: seconds before each event (median, mean) over {len(gaps['TOTAL'])} jobs")
    for name, values in gaps.items():
        print(f"  {name:34} {statistics.median(values):7.3f} {statistics.fmean(values):7.3f}")
