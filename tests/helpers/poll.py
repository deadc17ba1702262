"""The one polling loop of the tests: ask again until the answer is the one wanted.

A timeout is an ``AssertionError`` naming what was awaited and the last answer seen, so a
failure says what the system was doing instead of only that it was slow.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

_NOTHING = object()


def _accept(value: object) -> bool:
    return bool(value)


def _timed_out(what: str, timeout: float, last: object) -> str:
    seen = "nothing (the first probe has not returned)" if last is _NOTHING else repr(last)
    if len(seen) > 2000:
        seen = f"{seen[:2000]}... ({len(seen)} characters)"
    return f"not {what or 'there'} after {timeout}s; last answer: {seen}"


async def eventually(
    probe: Callable[[], Awaitable[T]],
    until: Callable[[T], object] = _accept,
    *,
    timeout: float = 30,
    interval: float = 0.2,
    what: str = "",
    retry_on: tuple[type[BaseException], ...] = (),
) -> T:
    """Await ``probe()`` until ``until(answer)`` holds; return that answer.

    ``retry_on``: exceptions that mean "not yet" (e.g. a workflow that does not exist yet).
    """
    deadline = time.monotonic() + timeout
    last: object = _NOTHING
    while True:
        budget = asyncio.timeout(max(deadline - time.monotonic(), interval))
        try:
            async with budget:  # a probe that hangs ends the wait too
                answer = await probe()
        except TimeoutError:
            if budget.expired():
                raise AssertionError(_timed_out(what, timeout, last)) from None
            raise
        except retry_on as error:
            last = error
        else:
            last = answer
            if until(answer):
                return answer
        if time.monotonic() >= deadline:
            raise AssertionError(_timed_out(what, timeout, last))
        await asyncio.sleep(interval)


def eventually_sync(
    probe: Callable[[], T],
    until: Callable[[T], object] = _accept,
    *,
    timeout: float = 30,
    interval: float = 0.2,
    what: str = "",
    retry_on: tuple[type[BaseException], ...] = (),
) -> T:
    """``eventually`` for synchronous tests (subprocess and HTTP clients that block)."""
    deadline = time.monotonic() + timeout
    last: object = _NOTHING
    while True:
        try:
            answer = probe()
        except retry_on as error:
            last = error
        else:
            last = answer
            if until(answer):
                return answer
        if time.monotonic() >= deadline:
            raise AssertionError(_timed_out(what, timeout, last))
        time.sleep(interval)
