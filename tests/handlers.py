"""Handlers used only by the tests (loaded with JOBS_HANDLER_MODULES=tests.handlers)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from jobctl.activities.registry import JobContext, PermanentError, handler


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


# -- poison handlers (tests/test_poison_drill.py): each misbehaves in one way ----------------


def _exit_in_thread() -> None:
    import sys
    import threading

    thread = threading.Thread(target=sys.exit, args=(4,), name="poison-exit")
    thread.start()
    thread.join()


def _leak_thread() -> str:
    import threading

    # Non-daemon and never ends: it must not keep the worker from exiting after SIGTERM.
    thread = threading.Thread(target=threading.Event().wait, name="poison-leak")
    thread.start()
    return thread.name


@handler("test.poison")
def poison(ctx: JobContext) -> Any:
    """A sync handler that misbehaves as payload.how says."""
    import sys

    how = ctx.payload["how"]
    if how == "sys_exit":
        sys.exit(3)
    if how == "os_exit":
        os._exit(5)
    if how == "keyboard_interrupt":
        raise KeyboardInterrupt
    if how == "memory_error":
        raise MemoryError("poison: pretend the heap is full")
    if how == "huge_alloc":
        return len(bytearray(10**15))  # raises MemoryError at once: nothing is allocated
    if how == "generator_exit":
        raise GeneratorExit("poison: a stray GeneratorExit")
    if how == "cancelled_error":
        import asyncio

        raise asyncio.CancelledError("poison: a sync handler cannot be cancelled by asyncio")
    if how == "timeout_error":
        raise TimeoutError("poison: the handler's own timeout, not the job's")
    if how == "system_exit_in_thread":
        _exit_in_thread()  # ends only that thread: the handler goes on and succeeds
        return {"thread": "exited"}
    if how == "leak_thread":
        return {"leaked": _leak_thread()}
    raise ValueError(f"unknown poison {how!r}")


@handler("test.poison_async")
async def poison_async(ctx: JobContext) -> Any:
    """An async handler that misbehaves as payload.how says."""
    import asyncio
    import sys
    import threading

    how = ctx.payload["how"]
    if how == "sys_exit":
        sys.exit(3)
    if how == "keyboard_interrupt":
        raise KeyboardInterrupt
    if how == "generator_exit":
        raise GeneratorExit("poison: a stray GeneratorExit")
    if how == "cancelled_error":
        raise asyncio.CancelledError("poison: cancelled itself, nobody asked")
    if how == "stray_exit":
        # A callback of its own raising SystemExit: asyncio lets it out of the event loop.
        asyncio.get_running_loop().call_soon(sys.exit, 6)
        await asyncio.sleep(3600)
    if how == "leak_to_thread":
        # A thread of asyncio's default executor that never ends: must not block exit either.
        asyncio.get_running_loop().run_in_executor(None, threading.Event().wait)
        return {"leaked": "default executor thread"}
    if how == "block_loop":
        # Blocks the worker's event loop: nothing else on this worker runs meanwhile.
        time.sleep(float(ctx.payload.get("seconds", 3600)))  # noqa: ASYNC251
        return {"slept": True}
    raise ValueError(f"unknown poison {how!r}")


# -- cancel latency (tests/test_cancel.py) -----------------------------------------------------


def _mark(ctx: JobContext, event: str, **extra: Any) -> None:
    _append(
        Path(ctx.payload["path"]),
        {"key": ctx.idempotency_key, "event": event, "at": time.time(), **extra},
    )


@handler("test.cancel_watch")
def cancel_watch(ctx: JobContext) -> dict[str, Any]:
    """Sleep payload.seconds, watching ``ctx.cancelled``; record when the cancel was seen."""
    _mark(ctx, "start")
    if ctx.sleep(float(ctx.payload["seconds"])):
        _mark(ctx, "cancel_seen")
        return {"stopped": "cancelled"}
    _mark(ctx, "done")
    return {"slept": ctx.payload["seconds"]}


@handler("test.cancel_watch_async")
async def cancel_watch_async(ctx: JobContext) -> dict[str, Any]:
    """Async: sleep payload.seconds; record when the CancelledError arrived."""
    import asyncio

    _mark(ctx, "start")
    try:
        await asyncio.sleep(float(ctx.payload["seconds"]))
    except asyncio.CancelledError:
        _mark(ctx, "cancel_seen")
        raise
    _mark(ctx, "done")
    return {"slept": ctx.payload["seconds"]}


@handler("test.ignore_cancel")
def ignore_cancel(ctx: JobContext) -> dict[str, Any]:
    """Ignore ``ctx.cancelled``: wait until payload.release exists (at most payload.seconds),
    then finish the work payload.after seconds later and return."""
    _mark(ctx, "start")
    release = Path(ctx.payload["release"])
    deadline = time.monotonic() + float(ctx.payload.get("seconds", 60))
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(float(ctx.payload.get("after", 1)))
    _mark(ctx, "done", cancelled=ctx.cancelled)
    return {"finished": True}


@handler("test.gc_state")
async def gc_state(ctx: JobContext) -> dict[str, Any]:
    """The collector's state as the handler starts and after an async sleep of
    payload.seconds (this worker runs in the test's process): open start windows and the gc
    thresholds."""
    import asyncio
    import gc

    from jobctl.activities.gc_pause import OLD_COLLECTIONS

    def state() -> dict[str, Any]:
        return {"open": OLD_COLLECTIONS.open, "thresholds": list(gc.get_threshold())}

    at_start = state()
    await asyncio.sleep(float(ctx.payload.get("seconds", 0)))
    return {"start": at_start, "end": state()}


@handler("test.echo")
def echo(ctx: JobContext) -> dict[str, Any]:
    """Return the payload as the job's result (a batch callback's test reads its summary)."""
    if ctx.payload.get("path"):
        _append(
            Path(ctx.payload["path"]),
            {
                "key": ctx.job_id,
                "event": "callback",
                "pid": os.getpid(),
                "at": time.time(),
                "batch": ctx.payload.get("batch"),
            },
        )
    return dict(ctx.payload)


@handler("test.fails_once")
def fails_once(ctx: JobContext) -> dict[str, Any]:
    """Fails for good on the job's first attempt, succeeds on any later one (after a requeue:
    attempt numbers count across rounds)."""
    if ctx.attempt == 1:
        raise PermanentError("the first attempt fails for good")
    return {"attempt": ctx.attempt}
