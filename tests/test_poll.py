"""The tests' one polling loop: it returns the first wanted answer and fails by naming the
last one it saw."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from tests.helpers.poll import eventually, eventually_sync


async def test_eventually_returns_the_first_answer_that_holds() -> None:
    counter = itertools.count()

    async def probe() -> int:
        return next(counter)

    assert await eventually(probe, lambda n: n >= 3, interval=0.01) == 3


async def test_eventually_fails_naming_what_and_the_last_answer() -> None:
    async def probe() -> str:
        return "still running"

    with pytest.raises(AssertionError, match=r"not job-1 done after 0.1s.*'still running'"):
        await eventually(
            probe, lambda s: s == "done", timeout=0.1, interval=0.01, what="job-1 done"
        )


async def test_eventually_retries_on_the_given_errors_only() -> None:
    calls = itertools.count()

    async def probe() -> str:
        if next(calls) < 2:
            raise LookupError("not there yet")
        return "here"

    assert await eventually(probe, retry_on=(LookupError,), interval=0.01) == "here"
    with pytest.raises(LookupError):
        await eventually(probe_that_raises, interval=0.01)


async def probe_that_raises() -> str:
    raise LookupError("never")


async def test_a_probe_that_hangs_ends_the_wait() -> None:
    async def hangs() -> str:
        await asyncio.sleep(60)
        return "late"

    with pytest.raises(AssertionError, match=r"not answered after 0\.1s"):
        await eventually(hangs, timeout=0.1, what="answered")


def test_eventually_sync_returns_and_fails_like_eventually() -> None:
    counter = itertools.count()
    assert eventually_sync(lambda: next(counter), lambda n: n >= 2, interval=0.01) == 2
    big = "x" * 5000
    with pytest.raises(AssertionError, match=r"\(5002 characters\)"):
        eventually_sync(lambda: big, lambda s: s == "", timeout=0.05, interval=0.01)
