"""Handlers used only by the tests (loaded with JOBS_HANDLER_MODULES=tests.handlers)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from activities.registry import JobContext, PermanentError, handler


@handler("test.record")
def record(ctx: JobContext) -> dict[str, Any]:
    """Append start and completion lines, keyed by idempotency key, to payload.path.

    Sleeps payload.seconds in between (in a thread, checking for cancellation), so a drill can
    count executions (starts) and completions per key.
    """
    path = Path(ctx.payload["path"])
    line = {
        "key": ctx.idempotency_key,
        "attempt": ctx.attempt,
        "worker": ctx.worker,
        "pid": os.getpid(),
    }
    with path.open("a") as out:
        out.write(json.dumps({**line, "event": "start"}) + "\n")
    if ctx.sleep(float(ctx.payload.get("seconds", 0))):
        raise RuntimeError("cancelled")
    with path.open("a") as out:
        out.write(json.dumps({**line, "event": "done"}) + "\n")
    return {"attempt": ctx.attempt}


@handler("test.permanent")
def permanent(ctx: JobContext) -> None:
    raise PermanentError("bad payload: nothing to do")


@handler("test.spin")
def spin(ctx: JobContext) -> dict[str, Any]:
    """Burn CPU without sleeping for payload.seconds (a blocking, CPU-bound sync handler)."""
    deadline = time.monotonic() + float(ctx.payload["seconds"])
    count = 0
    while time.monotonic() < deadline and not ctx.cancelled:
        count += sum(i * i for i in range(1000))
    return {"attempt": ctx.attempt}
