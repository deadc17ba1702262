"""The benchmarks' no-op handler for our jobs (loaded with JOBS_HANDLER_MODULES=bench.handlers).

It only notes when it started, so fire lag is the handler's own start minus the job's run_at,
and which of Temporal's attempts it is (a herd on time needs no second one).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from temporalio import activity

from jobctl.activities.registry import JobContext, handler

RECORDS_ENV = "BENCH_RECORDS"


def note_start(key: str, scheduled: float, attempt: int | None = None) -> None:
    """Append one start line to $BENCH_RECORDS (a short O_APPEND write: lines never mix);
    ``attempt``: Temporal's attempt number, where the side has one."""
    path = os.environ.get(RECORDS_ENV)
    if path:
        row = {"key": key, "scheduled": scheduled, "started": time.time(), "attempt": attempt}
        line = json.dumps(row)
        with open(path, "a") as out:
            out.write(line + "\n")


@handler("bench.noop")
async def noop(ctx: JobContext) -> dict[str, Any]:
    # Temporal's attempt, not the job's: one lost while it waited for run_at counts here.
    note_start(ctx.idempotency_key, ctx.scheduled_at.timestamp(), activity.info().attempt)
    return {}
