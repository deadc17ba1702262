"""Poison-handler drill: handlers that exit, interrupt, run out of memory, leak threads or
block the event loop, run by real ``jobctl worker`` processes.

What each may cost: the job one attempt per run, recorded with its reason and retried or
dead-lettered as usual; the worker nothing, or a clean exit that its supervisor (here, the
test) restarts. Never a live worker that stopped polling: after each poison job every
surviving worker must take a job (:func:`assert_all_polling`) and a normal job must be done
within 10 s of its run_at.

The workers run one attempt at a time (``JOBS_MAX_CONCURRENT_JOBS=1``, ``JOBS_PREFETCH=0``):
a worker busy with one job cannot take another, so N two-second jobs started together reach
N different workers only if all N are polling.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from jobctl.activities.attempt_outcome import LOST_UNRECORDED
from jobctl.activities.loop_watchdog import BROKEN_LOOP_EXIT_CODE
from jobctl.starter import operations
from jobctl.starter.dev.devserver import die_with_parent
from jobctl.workflows.models import JobReport, JobStatus
from tests.helpers.drills import DrillRow, add_row, read_records
from tests.helpers.processes import JOBS, ROOT, Workers, jobs_json
from tests.hostile.common import normal_job_completes

pytestmark = [pytest.mark.devserver, pytest.mark.drill, pytest.mark.timeout(300)]

STALL_LIMIT = 4.0  # JOBS_LOOP_STALL_LIMIT of the drill's workers
WORKER_ENV = {
    "JOBS_MAX_CONCURRENT_JOBS": "1",
    "JOBS_PREFETCH": "0",
    "JOBS_LOOP_STALL_LIMIT": f"{STALL_LIMIT:g}s",
}
# Short leases and two attempts keep each poison job to seconds.
POISON_SPEC: dict[str, Any] = {
    "max_attempts": 2,
    "lease": 2,
    "timeout": 30,
    "backoff_base": 1,
    "backoff_max": 2,
    "dispatch_lead": 0,
}


def spawn(workers: Workers, python: bool = False) -> subprocess.Popen[bytes]:
    """``jobctl worker`` (or ``python worker.py``) logged and killed like ``Workers.start``'s,
    without waiting for it to poll, so several start at once."""
    command = [sys.executable, str(ROOT / "worker.py")] if python else [JOBS, "worker"]
    log = workers.log_dir / f"worker-{len(workers.procs)}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command,
            env={**workers.env, **WORKER_ENV},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
    workers.procs.append(proc)
    return proc


def start_workers(
    workers: Workers, count: int, python: bool = False
) -> list[subprocess.Popen[bytes]]:
    procs = [spawn(workers, python) for _ in range(count)]
    for proc in procs:
        workers.wait_for_log(proc, "polling task queue")
    return procs


async def schedule(client: Client, task_queue: str, handler: str, **spec: Any) -> str:
    job_id = f"{handler.replace('.', '-')}-{uuid.uuid4().hex[:8]}"
    data = {"id": job_id, "name": "drill", "handler": handler, "delay": 0, **spec}
    await operations.schedule(client, data, handlers={handler}, task_queue=task_queue)
    return job_id


async def wait_status(
    client: Client,
    job_id: str,
    status: JobStatus,
    timeout: float = 60,
    tick: Callable[[], None] = lambda: None,
) -> JobReport:
    """Until the job reaches ``status``; ``tick`` runs between looks (the test's supervisor)."""
    deadline = time.monotonic() + timeout
    while True:
        report = await operations.status(client, job_id)
        assert isinstance(report, JobReport)
        if report.status == status:
            return report
        assert time.monotonic() < deadline, (
            f"{job_id} not {status.value} after {timeout}s: {report}"
        )
        tick()
        await asyncio.sleep(0.3)


async def assert_all_polling(
    client: Client,
    task_queue: str,
    workers: Workers,
    alive: list[subprocess.Popen[bytes]],
    path: Path,
) -> None:
    """Every worker in ``alive`` takes one of as many two-second jobs started together, and a
    normal job is done within 10 s of its run_at."""
    spec = {"payload": {"path": str(path), "seconds": 2}}
    ids = await asyncio.gather(
        *(schedule(client, task_queue, "test.record", **spec) for _ in alive)
    )
    for job_id in ids:
        await wait_status(client, job_id, JobStatus.DONE)
    ran_on = {r["pid"] for r in read_records(path) if r["event"] == "start" and r["key"] in ids}
    assert ran_on == {proc.pid for proc in alive}, "a live worker did not take a job"
    await normal_job_completes(client, task_queue)
    for proc in alive:
        assert proc.poll() is None
        assert "Worker cancelled" not in workers.log_of(proc)


@dataclass
class Contained:
    handler: str
    how: str
    error_type: str
    error: str  # a fragment of the recorded message


CONTAINED = [
    Contained("test.poison", "sys_exit", "SystemExit", "handler raised SystemExit(3)"),
    Contained("test.poison_async", "sys_exit", "SystemExit", "handler raised SystemExit(3)"),
    Contained("test.poison", "keyboard_interrupt", "KeyboardInterrupt", "KeyboardInterrupt()"),
    Contained(
        "test.poison_async", "keyboard_interrupt", "KeyboardInterrupt", "KeyboardInterrupt()"
    ),
    Contained("test.poison", "memory_error", "MemoryError", "pretend the heap is full"),
    Contained("test.poison", "huge_alloc", "MemoryError", "MemoryError"),
    Contained("test.poison", "generator_exit", "GeneratorExit", "GeneratorExit("),
    Contained("test.poison_async", "generator_exit", "GeneratorExit", "GeneratorExit("),
    Contained("test.poison", "cancelled_error", "CancelledError", "CancelledError("),
    Contained("test.poison_async", "cancelled_error", "CancelledError", "without being cancelled"),
]


async def test_contained_poison_costs_each_job_its_attempts_and_no_worker(
    dev_client: Client, task_queue: str, cli: dict[str, str], workers: Workers, tmp_path: Path
) -> None:
    started = time.monotonic()
    pair = start_workers(workers, 2)
    ids = await asyncio.gather(
        *(
            schedule(dev_client, task_queue, case.handler, payload={"how": case.how}, **POISON_SPEC)
            for case in CONTAINED
        )
    )
    for case, job_id in zip(CONTAINED, ids, strict=True):
        report = await wait_status(dev_client, job_id, JobStatus.DEAD)
        seen = [(a.outcome, a.error_type) for a in report.attempts]
        assert seen == [("failed", case.error_type)] * 2, (case, report.attempts)
        for attempt in report.attempts:
            assert attempt.error is not None and case.error in attempt.error, (case, attempt)
            assert attempt.worker in {workers.identity(p) for p in pair}
    # The CLI shows the same record (jobs status --json: attempts[].error / error_type).
    shown = jobs_json(cli, "status", ids[0])
    assert [a["error_type"] for a in shown["attempts"]] == ["SystemExit", "SystemExit"]
    assert "SystemExit(3)" in shown["attempts"][0]["error"]
    await assert_all_polling(dev_client, task_queue, workers, pair, tmp_path / "records.jsonl")
    add_row(
        DrillRow(
            f"poison: {len(CONTAINED)} contained kinds",
            len(CONTAINED),
            0,
            0,
            None,
            f"all dead after 2 attempts, 0 workers lost, {time.monotonic() - started:.0f}s",
        )
    )


@pytest.mark.parametrize("entry", ["jobs worker", "python worker.py"])
async def test_threads_a_handler_leaves_behind_cost_nothing_and_do_not_block_sigterm(
    dev_client: Client, task_queue: str, workers: Workers, tmp_path: Path, entry: str
) -> None:
    [worker] = start_workers(workers, 1, python=entry == "python worker.py")
    cases = [
        ("test.poison", "system_exit_in_thread", {"thread": "exited"}),
        ("test.poison", "leak_thread", {"leaked": "poison-leak"}),
        ("test.poison_async", "leak_to_thread", {"leaked": "default executor thread"}),
    ]
    for handler, how, result in cases:
        job_id = await schedule(
            dev_client, task_queue, handler, payload={"how": how}, **POISON_SPEC
        )
        report = await wait_status(dev_client, job_id, JobStatus.DONE)
        assert report.result == result
        assert [a.outcome for a in report.attempts] == ["succeeded"]
    await assert_all_polling(dev_client, task_queue, workers, [worker], tmp_path / "records.jsonl")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0  # the leaked threads still run: it exits anyway
    assert "stopped" in workers.log_of(worker)


@dataclass
class Lethal:
    handler: str
    how: str
    exit_code: int
    logs: tuple[str, ...]  # what the dying worker logged (one of these), if it could
    # How each attempt may be recorded: by its lease running out, or (a loop torn down while
    # the worker can still speak) by the attempt itself on the way out, racing the exit.
    recorded: tuple[str, ...] = ("LeaseExpired",)


LETHAL = [
    Lethal("test.poison", "os_exit", 5, ("",)),
    Lethal("test.poison_async", "block_loop", BROKEN_LOOP_EXIT_CODE, ("event loop blocked",)),
    # The torn-down loop is reported by the worker, unless its teardown outlasts the drill's
    # 4 s stall limit under load and the watchdog ends it first: the same exit either way.
    Lethal(
        "test.poison_async",
        "stray_exit",
        BROKEN_LOOP_EXIT_CODE,
        ("event loop torn down", "event loop blocked"),
        ("LeaseExpired", "WorkerStopped"),
    ),
]


RECORDED = {kind for case in LETHAL for kind in case.recorded}
STRAY_EXIT = LETHAL[2]  # the one case whose dying loop records the attempts it holds


async def test_lethal_poison_ends_workers_cleanly_and_each_job_dies_by_lease(
    dev_client: Client, task_queue: str, workers: Workers, tmp_path: Path
) -> None:
    """The three at once, on three workers: each attempt ends the worker running it, which
    exits (never hangs) with its case's code and is restarted, as a supervisor would."""
    started = time.monotonic()
    alive = start_workers(workers, len(LETHAL))
    exits: dict[str, int] = {}  # worker identity -> exit code
    logs: dict[str, str] = {}

    def supervise() -> None:
        for proc in list(alive):
            code = proc.poll()
            if code is not None:
                exits[workers.identity(proc)] = code
                logs[workers.identity(proc)] = workers.log_of(proc)
                alive.remove(proc)
                alive.append(spawn(workers))

    ids = await asyncio.gather(
        *(
            schedule(dev_client, task_queue, case.handler, payload={"how": case.how}, **POISON_SPEC)
            for case in LETHAL
        )
    )
    for case, job_id in zip(LETHAL, ids, strict=True):
        report = await wait_status(dev_client, job_id, JobStatus.DEAD, timeout=75, tick=supervise)
        lost = report.attempts
        # Every attempt it lists was lost with its worker, never more than the budget. How many
        # it lists varies: a worker whose loop another poison blocked can die holding this
        # job's attempt before the attempt recorded anything (then fewer are listed). Such
        # a worker polls no more (its slots are reserved on its loop: test_stalled_worker),
        # but a poll it had out on this job's handler queue when its loop blocked can still
        # bring it this attempt: the SDK cannot call back a poll once it is sent.
        assert all(a.outcome == "lost" for a in lost), lost
        assert len(lost) <= POISON_SPEC["max_attempts"], lost
        # A worker may hold attempts of two cases: one whose loop a stray exit tore down
        # records each of its attempts on the way out (WorkerStopped), the os_exit job's too
        # (1 CI run), so any case's attempt may be recorded either way.
        assert all(a.error_type in RECORDED for a in lost), (case, lost)
        assert all(
            "lease lost" in (a.error or "")
            if a.error_type == "LeaseExpired"
            else "event loop stopped" in (a.error or "")
            for a in lost
        ), lost
        # An attempt whose worker died before the attempt's first heartbeat (sent a second
        # into the handler) left no record: the next attempt counts it, naming no worker.
        named = [a for a in lost if a.error != LOST_UNRECORDED]
        assert all(a.worker == "unknown" for a in lost if a.error == LOST_UNRECORDED), lost
        assert len({a.worker for a in named}) == len(named)
        for attempt in named:  # its worker exited (it did not hang), with its killer's code
            # The job can settle a moment before this loop sees its worker's exit: look again
            # for a few seconds (a worker that hangs instead never exits, and this still fails).
            deadline = time.monotonic() + 10
            while attempt.worker not in exits and time.monotonic() < deadline:
                supervise()
                await asyncio.sleep(0.2)
            # An attempt its own torn-down loop recorded died of the stray exit, whichever
            # case it was (CI once: the os_exit job's attempt on the stray exit's worker).
            killer = case if attempt.error_type in case.recorded else STRAY_EXIT
            assert exits.get(attempt.worker) == killer.exit_code, (case, attempt, exits)
            assert any(text in logs[attempt.worker] for text in killer.logs), case
    supervise()
    # Each worker exited (it did not hang) with the code of a case it ran, and of nothing
    # else. At most one exit per attempt, not exactly: a worker whose loop a poison blocks
    # can die holding an attempt of another poison job that the server had handed it (to a
    # poll of its handler's queue already out when the loop blocked), lost with it, unrecorded.
    assert len(exits) <= 2 * len(LETHAL), exits
    assert set(exits.values()) <= {c.exit_code for c in LETHAL}, exits
    expected = Counter(c.exit_code for c in LETHAL for _ in "ab")
    assert all(Counter(exits.values())[code] <= n for code, n in expected.items()), exits
    for proc in alive:
        workers.wait_for_log(proc, "polling task queue")
    await assert_all_polling(dev_client, task_queue, workers, alive, tmp_path / "records.jsonl")
    add_row(
        DrillRow(
            "poison: os._exit/stall/stray exit",
            len(LETHAL),
            0,
            0,
            None,
            f"{len(exits)} workers exited and were restarted; all dead by lease "
            f"in {time.monotonic() - started:.0f}s",
        )
    )
