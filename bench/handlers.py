"""The benchmarks' no-op handler for our jobs (loaded with JOBS_HANDLER_MODULES=bench.handlers).

It only notes when it started, so fire lag is the handler's own start minus the job's run_at.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from jobctl.activities.registry import JobContext, handler

RECORDS_ENV = "BENCH_RECORDS"


def note_start(key: str, scheduled: float) -> None:
    """Append one start line to $BENCH_RECORDS (a short O_APPEND write: lines never mix)."""
    path = os.environ.get(RECORDS_ENV)
    if path:
        line = json.dumps({"key": key, "scheduled": scheduled, "started": time.time()})
        with open(path, "a") as out:
            out.write(line + "\n")


@handler("bench.noop")
async def noop(ctx: JobContext) -> dict[str, Any]:
    note_start(ctx.idempotency_key, ctx.scheduled_at.timestamp())
    return {}
