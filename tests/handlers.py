"""Handlers used only by the tests (loaded with JOBS_HANDLER_MODULES=tests.handlers)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from activities.registry import JobContext, PermanentError, handler


def _append(path: Path, line: dict[str, Any]) -> None:
    # One short write per line on an O_APPEND file: lines from many threads never interleave.
    with path.open("a") as out:
        out.write(json.dumps(line) + "\n")


@handler("test.record")
def record(ctx: JobContext) -> dict[str, Any]:
    """Append a start and a done line, keyed by idempotency key, to payload.path.

    Between them it waits payload.seconds: sleeping (checking for cancellation) or, with
    payload.spin, burning CPU in this thread without a single sleep. Drills count executions
    (starts) and completions per key, and read fire lag off ``at - scheduled_at``.
    """
    path = Path(ctx.payload["path"])
    line = {
        "key": ctx.idempotency_key,
        "attempt": ctx.attempt,
        "worker": ctx.worker,
        "pid": os.getpid(),
        "scheduled_at": ctx.scheduled_at.timestamp(),
    }
    _append(path, {**line, "event": "start", "at": time.time()})
    seconds = float(ctx.payload.get("seconds", 0))
    if ctx.payload.get("spin"):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not ctx.cancelled:
            sum(i * i for i in range(2000))
    elif ctx.sleep(seconds):
        raise RuntimeError("cancelled")
    if ctx.cancelled:
        raise RuntimeError("cancelled")
    _append(path, {**line, "event": "done", "at": time.time()})
    return {"attempt": ctx.attempt}


@handler("test.permanent")
def permanent(ctx: JobContext) -> None:
    raise PermanentError("bad payload: nothing to do")
