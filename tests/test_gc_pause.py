"""Older garbage-collector generations wait while handlers are due to start
(activities/gc_pause.py): the gate's rules, the collector really skipping those passes, and an
in-process worker on a dev server deferring them from shortly before run_at until the handler
starts, for pre-dispatched attempts and for attempts that start at once."""

from __future__ import annotations

import gc
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.client import Client

from jobctl.activities.gc_pause import (
    DEFERRED,
    MAX_DEFER,
    OLD_COLLECTIONS,
    OldCollections,
    StartWindow,
)
from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.worker import WorkerSettings, build_worker
from jobctl.workflows.models import JobReport, JobStatus
from tests.helpers.jobs import job_report
from tests.helpers.poll import eventually


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[tuple[int, int, int]]:
    """The process's thresholds before the test, put back after it whatever happened."""
    before = gc.get_threshold()
    enabled = gc.isenabled()
    yield before
    gc.set_threshold(*before)
    if enabled:
        gc.enable()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def deferred(before: tuple[int, int, int]) -> tuple[int, int, int]:
    return (before[0], DEFERRED, DEFERRED)


def test_overlapping_windows_defer_until_the_last_closes(thresholds: tuple[int, int, int]) -> None:
    gate = OldCollections(Clock())
    first, second = StartWindow(gate), StartWindow(gate)
    first.begin()
    assert gc.get_threshold() == deferred(thresholds)
    second.begin()
    first.end()
    first.end()  # closing twice closes once
    assert gate.open == 1 and gc.get_threshold() == deferred(thresholds)
    second.end()
    assert gate.open == 0 and gc.get_threshold() == thresholds


def test_a_run_of_windows_gives_way_after_max_defer(thresholds: tuple[int, int, int]) -> None:
    clock = Clock()
    gate = OldCollections(clock)
    windows = [StartWindow(gate) for _ in range(3)]
    windows[0].begin()
    clock.now = MAX_DEFER + 0.1
    windows[1].begin()  # the run has deferred long enough: normal collection again
    assert gc.get_threshold() == thresholds and gate.gave_way
    windows[0].end()
    windows[2].begin()  # still the same run (one window never closed): no new deferral
    assert gc.get_threshold() == thresholds
    windows[1].end()
    windows[2].end()
    windows[0].begin()  # every window closed once: the next run may defer again
    assert gc.get_threshold() == deferred(thresholds)
    windows[0].end()


def test_a_long_open_window_gives_way_when_another_closes(
    thresholds: tuple[int, int, int],
) -> None:
    clock = Clock()
    gate = OldCollections(clock)
    waiting, started = StartWindow(gate), StartWindow(gate)
    waiting.begin()
    started.begin()
    clock.now = MAX_DEFER + 1
    started.end()  # a herd draining slower than MAX_DEFER: the collector resumes
    assert gc.get_threshold() == thresholds and gate.open == 1
    waiting.end()


def test_a_disabled_collector_and_thresholds_a_handler_set_are_left_alone(
    thresholds: tuple[int, int, int],
) -> None:
    gate = OldCollections(Clock())
    gc.disable()
    window = StartWindow(gate)
    window.begin()
    assert gc.get_threshold() == thresholds and not gate.deferring
    window.end()
    gc.enable()
    window.begin()
    gc.set_threshold(500, 20, 30)  # a handler's own choice while the window was open
    window.end()
    assert gc.get_threshold() == (500, 20, 30)


def collections_of_old_generations(cycles: int) -> int:
    """How many generation 1 and 2 passes the collector ran while ``cycles`` reference
    cycles were made (and dropped: only the collector can free them)."""
    seen: list[int] = []

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] >= 1:
            seen.append(info["generation"])

    gc.callbacks.append(note)
    try:
        for _ in range(cycles):
            node: list[Any] = []
            node.append(node)
    finally:
        gc.callbacks.remove(note)
    return len(seen)


def test_the_collector_skips_old_generations_only_while_a_window_is_open() -> None:
    gc.set_threshold(700, 10, 10)  # CPython's defaults: one generation 1 pass per 7,000
    window = StartWindow(OldCollections(Clock()))
    window.begin()
    assert collections_of_old_generations(100_000) == 0
    window.end()
    assert collections_of_old_generations(100_000) >= 5


# -- an in-process worker on the dev server ----------------------------------------------------

HANDLERS = load_handlers("tests.handlers").names()


async def done(client: Client, job_id: str) -> JobReport:
    async def report() -> JobReport:
        return await job_report(client, job_id)

    return await eventually(
        report, lambda r: r.status == JobStatus.DONE, timeout=30, what=f"{job_id} done"
    )


@pytest.mark.parametrize("due_in", [6.0, 0.0], ids=["pre-dispatched", "at once"])
async def test_an_attempt_defers_old_collections_until_its_handler_starts(
    dev_client: Client, thresholds: tuple[int, int, int], due_in: float
) -> None:
    """Two jobs due together on a worker with one handler slot: while the first handler
    runs, the second attempt is due and waiting for the slot (its window open: old
    generations deferred); when the second handler starts, no window is open and the
    thresholds are the process's own again."""
    queue = f"gc-{uuid.uuid4().hex[:8]}"
    settings = WorkerSettings(task_queue=queue, max_concurrent_jobs=1)
    job_worker = build_worker(dev_client, settings, load_handlers("tests.handlers"))
    run_at = datetime.now(UTC) + timedelta(seconds=due_in)
    ids = [f"gc-{n}-{uuid.uuid4().hex[:6]}" for n in range(2)]
    try:
        async with job_worker.running():
            for job_id in ids:
                spec = {
                    "id": job_id,
                    "name": "gc",
                    "handler": "test.gc_state",
                    "payload": {"seconds": 1.5},
                    **({"run_at": run_at, "dispatch_lead": 5} if due_in else {"delay": 0}),
                }
                await operations.schedule(dev_client, spec, HANDLERS, task_queue=queue)
            reports = [await done(dev_client, job_id) for job_id in ids]
    finally:
        job_worker.close()
    first, second = sorted(reports, key=lambda r: r.attempts[0].started_at)
    assert first.result["end"] == {"open": 1, "thresholds": list(deferred(thresholds))}
    assert second.result["start"] == {"open": 0, "thresholds": list(thresholds)}
    assert OLD_COLLECTIONS.open == 0 and gc.get_threshold() == thresholds
