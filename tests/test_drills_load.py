"""Failure drills under load, against real processes: a dev server on its SQLite file and
``jobctl worker`` subprocesses. Each drill prints a report row (see tests/helpers/drills.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.starter.dev.devserver import DevServer
from jobctl.workflows.backoff import retry_delay_bounds
from jobctl.workflows.models import JobReport, JobStatus
from tests.helpers.drills import DrillRow, Tally, add_row, read_records, size, wait_for_records
from tests.helpers.httpserver import serve
from tests.helpers.processes import Workers, cli_env
from tests.helpers.sqlite_fixtures import sqlite_dev_client, sqlite_dev_server  # noqa: F401

# Minutes by design (hundreds of jobs through kills and restarts; more at full size).
pytestmark = [
    pytest.mark.devserver,
    pytest.mark.drill,
    pytest.mark.timeout(size(ci=600, full=1800)),
]

HANDLERS = load_handlers("tests.handlers").names()


# httpx errors of a request that never reached the endpoint.
UNREACHED = {"ConnectError", "ConnectTimeout", "PoolTimeout"}
# httpx errors of a request the endpoint may have answered after the worker stopped waiting.
ANSWERED_LATE = {"ReadTimeout", "WriteTimeout", "RemoteProtocolError", "ReadError"}


async def schedule_all(
    client: Client, queue: str, specs: list[dict[str, Any]], concurrency: int = 20
) -> None:
    limit = asyncio.Semaphore(concurrency)

    async def one(spec: dict[str, Any]) -> None:
        async with limit:
            await operations.schedule(client, spec, HANDLERS, task_queue=queue)

    await asyncio.gather(*(one(spec) for spec in specs))


def record_spec(job_id: str, path: Path, **fields: Any) -> dict[str, Any]:
    payload = {"path": str(path), **fields.pop("payload", {})}
    return {
        "id": job_id,
        "name": "drill",
        "handler": "test.record",
        "payload": payload,
        "delay": 0,
        **fields,
    }


def lags(records: list[dict[str, Any]]) -> list[float]:
    """Fire lag of each key's first execution: handler start minus scheduled time."""
    first: dict[str, dict[str, Any]] = {}
    for r in records:
        if r["event"] == "start" and r["key"] not in first:
            first[r["key"]] = r
    return [r["at"] - r["scheduled_at"] for r in first.values()]


@pytest.mark.alone  # its fire-lag figures must carry no other test's load
async def test_drill_worker_sigkill_under_load(
    dev_client: Client, task_queue: str, workers: Workers, tmp_path: Path
) -> None:
    count = 50
    records = tmp_path / "records.jsonl"
    doomed, survivor = workers.start(), workers.start()
    ids = {f"load-{uuid.uuid4().hex[:6]}-{i}" for i in range(count)}
    await schedule_all(
        dev_client,
        task_queue,
        [record_spec(i, records, lease=3, payload={"seconds": 10}) for i in ids],
    )
    wait_for_records(records, count, "start")
    await asyncio.sleep(3)  # every job is mid-run
    os.killpg(doomed.pid, signal.SIGKILL)
    doomed.wait()
    final = wait_for_records(records, count, "done", timeout=120)
    await asyncio.sleep(1)  # anything still to land would show up as a duplicate
    final = read_records(records)

    tally = Tally.of(final)
    first_pid: dict[str, int] = {}
    for r in final:
        if r["event"] == "start":
            first_pid.setdefault(r["key"], r["pid"])
    on_doomed = {key for key, pid in first_pid.items() if pid == doomed.pid}
    rerun = {key for key, n in tally.starts.items() if n > 1}
    add_row(
        DrillRow(
            "worker SIGKILL under load",
            count,
            tally.lost(ids),
            len(rerun),
            max(lags(final)),
            f"{len(on_doomed)} jobs were on the killed worker",
        )
    )
    assert on_doomed and len(on_doomed) < count  # both workers had work: the drill bites
    assert all(tally.dones[key] == 1 for key in ids)  # completions per key exactly 1
    assert all(tally.starts[key] <= 2 for key in ids)  # executions per key at most 2
    assert rerun <= on_doomed  # re-execution only for jobs that were on the killed worker
    assert {r["pid"] for r in final if r["event"] == "done"} == {survivor.pid}


async def test_drill_server_sigkill_and_restart(
    tmp_path: Path,
) -> None:
    count = size(ci=200, full=500)
    # run_at times spread over 30 s from 10 s on; the server is down from 15 s to 28 s. (Half
    # as long in CI put twice as many jobs in flight at the kill, and twice as many
    # completions lost with the server: their jobs ran again after the lease.)
    first, spread, down, up = 10, 30, 15, 28
    queue = f"restart-{uuid.uuid4().hex[:6]}"
    records = tmp_path / "records.jsonl"
    server = DevServer(db_file=tmp_path / "temporal.db")
    client = await server.start()
    workers = Workers(cli_env(server.address, queue), tmp_path)
    try:
        workers.start()
        t0 = time.time() + 2  # scheduling itself takes a moment
        ids = [f"restart-{i}" for i in range(count)]
        await schedule_all(
            client,
            queue,
            [
                {
                    **record_spec(job_id, records),
                    "delay": None,
                    "run_at": datetime_from(t0 + first + spread * i / count),
                }
                for i, job_id in enumerate(ids)
            ],
        )
        await asyncio.sleep(t0 + down - time.time())
        server.kill()
        killed_at = time.time()
        await asyncio.sleep(t0 + up - time.time())  # down across many run_at times
        client = await server.start()
        back_at = time.time()
        deadline = time.monotonic() + 180
        while Tally.of(read_records(records)).lost(set(ids)):
            assert time.monotonic() < deadline, "not every job completed after the restart"
            await asyncio.sleep(0.5)
        await asyncio.sleep(2)  # a straggling duplicate would show up now
        final = read_records(records)
    finally:
        workers.stop_all()
        server.stop()

    tally = Tally.of(final)
    starts = [r for r in final if r["event"] == "start"]
    early = [r for r in starts if r["at"] < r["scheduled_at"]]
    outage = [r for r in starts if killed_at <= r["scheduled_at"] <= back_at]
    after_restart = [r["at"] - back_at for r in outage]
    add_row(
        DrillRow(
            "server SIGKILL + restart",
            count,
            tally.lost(set(ids)),
            tally.duplicated(),
            max(after_restart),
            f"{len(outage)} due while down; down "
            f"{back_at - killed_at:.0f}s; max lag counted from restart",
        )
    )
    assert tally.lost(set(ids)) == 0  # every job done
    # At-least-once: a job runs again only when its completion was lost with the server (sent
    # just before the kill, or during the outage), so its first run finished before the
    # restart and its second began after it.
    for key in ids:
        mine = sorted((r for r in final if r["key"] == key), key=lambda r: r["at"])
        assert [r["event"] for r in mine] in (["start", "done"], ["start", "done"] * 2), mine
        if len(mine) == 4:
            assert mine[1]["at"] < back_at <= mine[2]["at"], mine
    assert not early  # none fires before its time
    assert len(outage) > count // 4  # the outage really covered many run_at times
    assert max(after_restart) < 30  # the ones due during the outage fire promptly after


def datetime_from(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat()


async def test_drill_graceful_shutdown_hands_over_without_spending_an_attempt(
    dev_client: Client, task_queue: str, workers: Workers, tmp_path: Path
) -> None:
    records = tmp_path / "records.jsonl"
    leaving = workers.start("--shutdown-grace", "4", "--max-concurrent-jobs", "8")
    tag = uuid.uuid4().hex[:6]
    short = [f"short-{tag}-{i}" for i in range(4)]
    long = [f"long-{tag}-{i}" for i in range(4)]
    late = [f"late-{tag}-{i}" for i in range(4)]
    await schedule_all(
        dev_client,
        task_queue,
        [record_spec(i, records, lease=5, payload={"seconds": 1.5}) for i in short]
        # The long ones outlast the 4 s grace by far (15 s; 30 s cost a quarter-minute more).
        + [record_spec(i, records, lease=5, max_attempts=1, payload={"seconds": 15}) for i in long],
    )
    wait_for_records(records, 8, "start")
    leaving.send_signal(signal.SIGTERM)
    stopped_at = time.monotonic()
    await asyncio.sleep(1)
    await schedule_all(dev_client, task_queue, [record_spec(i, records, lease=5) for i in late])
    await asyncio.sleep(1)
    staying = workers.start()
    assert await asyncio.to_thread(leaving.wait, 30) == 0
    exit_after = time.monotonic() - stopped_at
    final = wait_for_records(records, 12, "done", timeout=90)
    final = read_records(records)

    by_key: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for r in final:
        by_key[r["key"]].append((r["event"], r["pid"]))
    for key in short:  # finished within the grace period, where they started
        assert by_key[key] == [("start", leaving.pid), ("done", leaving.pid)], by_key[key]
    for key in late:  # the leaving worker took no new work
        assert by_key[key] == [("start", staying.pid), ("done", staying.pid)], by_key[key]
    for key in long:  # handed over at the end of the grace period, at no cost
        assert by_key[key] == [
            ("start", leaving.pid),
            ("start", staying.pid),
            ("done", staying.pid),
        ], by_key[key]
        status = await operations.status(dev_client, key)
        assert isinstance(status, JobReport) and status.status == JobStatus.DONE
        assert [a.outcome for a in status.attempts] == ["handed_over", "succeeded"]
    add_row(
        DrillRow(
            "graceful shutdown (SIGTERM)",
            12,
            0,
            4,
            None,
            f"4 finished in grace, 4 handed over (max_attempts=1 kept), 4 new went "
            f"elsewhere; worker exited {exit_after:.1f}s after SIGTERM",
        )
    )


async def test_drill_long_cpu_bound_job_with_a_short_lease_runs_once(
    dev_client: Client, task_queue: str, workers: Workers, tmp_path: Path
) -> None:
    records = tmp_path / "records.jsonl"
    workers.start()
    job_id = f"spin-{uuid.uuid4().hex[:6]}"
    await schedule_all(
        dev_client,
        task_queue,
        [
            record_spec(
                job_id, records, lease=1, max_attempts=3, payload={"seconds": 5, "spin": True}
            )
        ],
    )
    wait_for_records(records, 1, "done", timeout=60)
    status = await operations.status(dev_client, job_id)
    tally = Tally.of(read_records(records))
    add_row(
        DrillRow(
            "long CPU-bound job, lease 1/5 of it",
            1,
            tally.lost({job_id}),
            tally.duplicated(),
            None,
            "sync handler in a thread, heartbeats kept",
        )
    )
    assert tally.starts[job_id] == 1 and tally.dones[job_id] == 1
    assert isinstance(status, JobReport)
    assert [a.outcome for a in status.attempts] == ["succeeded"]


@pytest.mark.alone  # its fire-lag figures must carry no other test's load
async def test_drill_herd_due_in_the_same_second(
    dev_client: Client, task_queue: str, workers: Workers, tmp_path: Path
) -> None:
    count = size(ci=500, full=2000)
    records = tmp_path / "records.jsonl"
    workers.start("--max-concurrent-jobs", "200")
    # Room to schedule them all, and a full dispatch lead (30 s) before they are due.
    lead = size(ci=10, full=30)  # seconds each job may reach its worker early
    due = time.time() + lead + 5 + count / 150
    tag = uuid.uuid4().hex[:6]
    ids = [f"herd-{tag}-{i}" for i in range(count)]
    await schedule_all(
        dev_client,
        task_queue,
        [
            {
                **record_spec(i, records),
                "delay": None,
                "run_at": datetime_from(due),
                "dispatch_lead": lead,
            }
            for i in ids
        ],
    )
    assert time.time() < due, "scheduling took longer than the lead time"
    wait_for_records(records, count, "done", timeout=300)
    final = read_records(records)
    tally = Tally.of(final)
    fire = sorted(lags(final))
    drain = max(r["at"] for r in final if r["event"] == "done") - due
    add_row(
        DrillRow(
            f"herd: {count} due in one second",
            count,
            tally.lost(set(ids)),
            tally.duplicated(),
            fire[-1],
            f"fire lag p50 {statistics.median(fire):.2f}s "
            f"p99 {fire[int(len(fire) * 0.99) - 1]:.2f}s; drained in {drain:.1f}s",
        )
    )
    assert all(tally.dones[key] == 1 for key in ids)
    assert fire[0] >= 0  # none early


async def test_drill_retry_storm_against_a_recovering_endpoint(
    dev_client: Client, task_queue: str, workers: Workers
) -> None:
    count = size(ci=200, full=500)
    base, jitter = 1.0, 0.3
    workers.start("--max-concurrent-jobs", "200")
    tag = uuid.uuid4().hex[:6]
    ids = [f"storm-{tag}-{i}" for i in range(count)]
    # The endpoint answers 503 until every job has met it once, and for this long after: at
    # this backoff 10 s more fails every job three or four times. Anchored to the herd's
    # arrival, not to run_at, so a loaded machine that fires the herd late still storms it.
    storm = size(ci=10, full=20)
    with serve() as endpoint:
        endpoint.storm_until_all_seen(set(ids), storm)
        # All due together, lead + 5 s out (their dispatch lead spreads the server's work).
        lead = size(ci=10, full=30)
        due = time.time() + lead + 5
        await schedule_all(
            dev_client,
            task_queue,
            [
                {
                    "id": i,
                    "name": "storm",
                    "handler": "http.post",
                    "run_at": datetime_from(due),
                    "dispatch_lead": lead,
                    "max_attempts": 8,
                    "backoff_base": base,
                    "jitter": jitter,
                    "payload": {"url": f"{endpoint.url}/flaky"},
                }
                for i in ids
            ],
        )
        deadline = time.monotonic() + 180
        while len({hit.key for hit in endpoint.hits if hit.status == 200}) < count:
            assert time.monotonic() < deadline, "not every job got through"
            await asyncio.sleep(0.5)
        hits = list(endpoint.hits)
    by_key: dict[str | None, list[Any]] = defaultdict(list)
    for hit in hits:
        by_key[hit.key].append(hit)
    for key in ids:  # failed while the endpoint was down, stopped retrying once it was back
        statuses = [h.status for h in sorted(by_key[key], key=lambda h: h.at)]
        failed = statuses.count(503)
        assert statuses == [503] * failed + [200] * (len(statuses) - failed), key
    # How late the herd met the endpoint (reported, not asserted: the herd benchmark measures it).
    arrival = sorted(min(h.at for h in by_key[key]) - due for key in ids)

    limit = asyncio.Semaphore(20)

    async def status_of(job_id: str) -> JobReport:
        async with limit:
            result = await operations.status(dev_client, job_id)
        assert isinstance(result, JobReport) and result.status == JobStatus.DONE
        return result

    reports = await asyncio.gather(*(status_of(i) for i in ids))
    delays: dict[int, list[float]] = defaultdict(list)
    for job in reports:
        check_storm_attempts(job, by_key[job.job_id], base, jitter, delays)
    lost_ones = [
        f"{job.job_id} #{a.attempt} ({a.error_type}, worker {a.worker})"
        for job in reports
        for a in job.attempts
        if a.outcome == "lost"
    ]
    lost = len(lost_ones)
    # Lost attempts are rare, not a pattern (one in 200 jobs in one of five
    # five-worker suite runs; none in the others).
    assert lost <= count // 20, lost_ones[:10]
    first_lost = sum(1 for job in reports if job.attempts[0].outcome == "lost")
    attempts = [len(job.attempts) for job in reports]
    # Every job met the storm, so every job backed off once (by our jitter, unless lost).
    assert len(delays[1]) == count - first_lost
    # How many failed 3 and 4 times depends on how widely a loaded server spread the herd; each
    # retry level that enough jobs reached must be spread by jitter, not identical.
    levels = [n for n in (1, 2, 3) if len(delays[n]) >= 20]
    deepest = levels[-1]
    for n in levels:
        low, high = retry_delay_bounds(n, base, 300, jitter)
        assert max(delays[n]) - min(delays[n]) > 0.6 * (high - low), n
    add_row(
        DrillRow(
            f"retry storm (503 until all met it, then {storm} s)",
            count,
            0,
            0,
            None,
            f"first attempts {arrival[0]:+.1f}..{arrival[-1]:+.1f}s of run_at; "
            f"attempts per job {min(attempts)}-{max(attempts)}; "
            f"every delay inside the jitter bounds; delay {deepest} spread "
            f"{max(delays[deepest]) - min(delays[deepest]):.2f}s "
            f"of {jitter * 2 ** (deepest - 1):.2f}s possible; "
            f"{lost} attempt(s) lost, recovered by the lease{': ' if lost else ''}"
            f"{'; '.join(lost_ones[:3])}",
        )
    )


def check_storm_attempts(
    job: JobReport, hits: list[Any], base: float, jitter: float, delays: dict[int, list[float]]
) -> None:
    """One storm job's attempts against the requests the endpoint saw from it; each retry
    delay the activity chose goes into ``delays`` by attempt number.

    An attempt the server handed out that ran nothing the logs show (seen once under load: no
    log line, no request, the next attempt a lease later; the cause was not found) is
    ``lost``: it may or may not have reached the endpoint, and Temporal's RetryPolicy, not our
    jitter, timed the attempt after it."""
    lost = [a for a in job.attempts if a.outcome == "lost"]
    # One attempt per request the endpoint saw; an attempt that could not connect (a loaded
    # machine can time out a connect) is a failed attempt the endpoint never saw.
    reached = [a for a in job.attempts if a.error_type not in UNREACHED and a not in lost]
    assert len(reached) <= len(hits) <= len(reached) + len(lost), job.attempts
    # A second 200 only where the worker gave up waiting for an earlier answer (or lost an
    # attempt): at-least-once, and the request's idempotency key lets the endpoint dedupe.
    late = sum(1 for a in job.attempts if a.error_type in ANSWERED_LATE or a in lost)
    oks = sum(1 for hit in hits if hit.status == 200)
    assert 1 <= oks <= 1 + late, job.attempts
    # When the endpoint saw each attempt (None: it never reached it), where that is known. An
    # attempt's own started_at is its worker's reading of the server's clock, never ahead but
    # possibly behind (activities/server_clock.py): the endpoint's clock is the outside truth.
    # Known only when every request is one of ``reached`` (no lost attempt reached it).
    known = len(hits) == len(reached)
    seen = iter(sorted(hit.at for hit in hits))
    seen_at = [next(seen) if known and a in reached else None for a in job.attempts]
    for n, a in enumerate(job.attempts[:-1], start=1):
        if a in lost:
            continue
        low, high = retry_delay_bounds(n, base, 300, jitter)
        assert a.retry_delay is not None and low <= a.retry_delay <= high, (job.job_id, n)
        # The server never starts the next attempt before the formula's delay.
        # (Not after an answer the worker stopped waiting for: the endpoint may stamp it
        # later than the worker failed the attempt.)
        a_at, b_at = seen_at[n - 1], seen_at[n]
        if a_at is not None and b_at is not None and a.error_type not in ANSWERED_LATE:
            assert b_at - a_at >= a.retry_delay, (job.job_id, n, b_at - a_at)
        delays[n].append(a.retry_delay)
