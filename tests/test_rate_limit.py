"""Rate limits per key on the dev server: a key's limiter hands out starts no faster than its
rate (with its burst), before the concurrency permit, by priority; a job waiting for one says
so, and pausing or cancelling it takes its request out of the queue; the limiter continues as
new with its pace; and a rate-limited job costs a known number of actions.

Starts are read two ways: the reservation each job received (its ``rate_granted`` signal's
``start_at``, from its history) and the moment its handler began (``test.record``'s own
line). The rate is checked on the reservations (exact), and each handler must begin no
earlier than its reservation (the same machine's clock serves the dev server and the test).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from bench.actions import tally
from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.workflows import names
from jobctl.workflows.models import JobReport, JobStatus
from jobctl.workflows.models.ratelimit import (
    RESERVE_AHEAD,
    RateGrant,
    RateState,
    rate_workflow_id,
)
from tests.helpers.cli import jobs_here_sync
from tests.helpers.jobs import finished, job_report
from tests.helpers.poll import eventually
from tests.helpers.temporal import running_worker

HANDLERS = load_handlers("tests.handlers").names()
# A handler may begin this much before its reservation: the dev server's clock and the test's
# are the same machine's, read by two processes (measured: never below 0; 5 ms of slack).
CLOCK_SLACK = 0.005


@pytest.fixture
async def worker(dev_client: Client, task_queue: str) -> AsyncIterator[str]:
    async with running_worker(dev_client, task_queue):
        yield task_queue


def new_key() -> str:
    return f"api-{uuid.uuid4().hex[:8]}"


async def submit(client: Client, queue: str, path: Path, **fields: Any) -> str:
    spec = {
        "name": "paced",
        "handler": "test.record",
        "run_at": datetime.now(UTC).isoformat(),
        "dispatch_lead": 0,
        "payload": {"path": str(path), "seconds": fields.pop("seconds", 0)},
        **fields,
    }
    return (await operations.schedule(client, spec, HANDLERS, task_queue=queue)).job_id


async def limiter(client: Client, key: str) -> RateState:
    handle = client.get_workflow_handle(rate_workflow_id(key))
    state: RateState = await handle.query(names.QUERY_RESERVATIONS, result_type=RateState)
    return state


async def finish(client: Client, job_ids: list[str], timeout: float = 60) -> list[JobReport]:
    async with asyncio.timeout(timeout):
        handles = [client.get_workflow_handle(j, result_type=JobReport) for j in job_ids]
        return list(await asyncio.gather(*(h.result() for h in handles)))


async def grants(client: Client, job_id: str) -> list[RateGrant]:
    """The rate_granted signals a job received, from its history."""
    history = await client.get_workflow_handle(job_id).fetch_history()
    found = []
    for event in history.events:
        attrs = event.workflow_execution_signaled_event_attributes
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED and (
            attrs.signal_name == names.SIGNAL_RATE_GRANTED
        ):
            (raw,) = await client.data_converter.decode(attrs.input.payloads, [RateGrant])
            found.append(raw)
    return found


def handler_starts(path: Path) -> dict[str, float]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return {line["key"]: line["at"] for line in lines if line["event"] == "start"}


async def reservations(client: Client, jobs: list[str]) -> dict[str, float]:
    found = {}
    for job in jobs:
        (grant,) = await grants(client, job)
        found[job] = grant.start_at.timestamp()
    return found


def most_in_window(moments: list[float], window: float) -> int:
    moments = sorted(moments)
    return max(sum(1 for m in moments[i:] if m < first + window) for i, first in enumerate(moments))


@pytest.mark.devserver
async def test_starts_keep_to_the_rate_and_no_handler_begins_before_its_start(
    dev_client: Client, worker: str, tmp_path: Path
) -> None:
    key, path = new_key(), tmp_path / "runs.jsonl"
    jobs = await asyncio.gather(
        *(submit(dev_client, worker, path, rate_key=key, rate="5/s") for _ in range(12))
    )
    reports = await finish(dev_client, list(jobs))
    assert {r.status for r in reports} == {JobStatus.DONE}
    reserved = await reservations(dev_client, list(jobs))
    ordered = sorted(reserved.values())
    gaps = [b - a for a, b in itertools.pairwise(ordered)]
    assert min(gaps) >= 0.2 - 1e-6, gaps  # burst 1: every start 1/rate after the one before
    begun = handler_starts(path)
    early = {job: reserved[job] - begun[job] for job in jobs if begun[job] < reserved[job]}
    assert all(lead <= CLOCK_SLACK for lead in early.values()), early
    assert max(begun.values()) - min(reserved.values()) >= 11 * 0.2 - 1e-6
    state = await limiter(dev_client, key)
    assert (state.granted, state.waiters, state.rate, state.rejected) == (12, [], "5/s", 0)


@pytest.mark.devserver
async def test_a_burst_goes_at_once_then_the_rate_holds(
    dev_client: Client, worker: str, tmp_path: Path
) -> None:
    key, path = new_key(), tmp_path / "runs.jsonl"
    fields = {"rate_key": key, "rate": "2/s", "rate_burst": 3}
    jobs = await asyncio.gather(*(submit(dev_client, worker, path, **fields) for _ in range(7)))
    await finish(dev_client, list(jobs))
    ordered = sorted((await reservations(dev_client, list(jobs))).values())
    first = ordered[0]
    # Three at once (as they arrived), then one each 0.5 s after the third's tolerance.
    assert most_in_window(ordered, 0.4) <= 3
    assert most_in_window(ordered, 1.0) <= 3 + 2
    assert ordered[-1] - first >= (7 - 3) * 0.5 - 1e-6


@pytest.mark.devserver
async def test_an_urgent_job_overtakes_every_start_not_yet_reserved(
    dev_client: Client, worker: str, tmp_path: Path
) -> None:
    key, path = new_key(), tmp_path / "runs.jsonl"
    fields = {"rate_key": key, "rate": "1/s"}
    low = await asyncio.gather(
        *(submit(dev_client, worker, path, priority=5, **fields) for _ in range(15))
    )
    await eventually(
        lambda: limiter(dev_client, key),
        lambda s: len(s.waiters) >= 4,
        what="a queue",
        retry_on=(RPCError,),
    )
    urgent = await submit(dev_client, worker, path, priority=1, **fields)
    await finish(dev_client, [*low, urgent])
    reserved = await reservations(dev_client, [*low, urgent])
    after = sum(1 for job in low if reserved[job] > reserved[urgent])
    # Only what was reserved when it asked went first: RESERVE_AHEAD's starts (5 s at 1/s
    # = 5, and the first one at once: 6).
    ahead = 15 - after
    assert ahead <= RESERVE_AHEAD.total_seconds() * 1 + 1, sorted(reserved.values())


@pytest.mark.devserver
async def test_rate_then_concurrency_permit_both_hold(
    dev_client: Client, worker: str, tmp_path: Path
) -> None:
    key, path = new_key(), tmp_path / "runs.jsonl"
    fields = {
        "rate_key": key,
        "rate": "10/s",
        "concurrency_key": key,
        "concurrency_limit": 1,
        "seconds": 0.3,
    }
    jobs = await asyncio.gather(*(submit(dev_client, worker, path, **fields) for _ in range(6)))
    await finish(dev_client, list(jobs))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    edges = sorted((line["at"], 1 if line["event"] == "start" else -1) for line in lines)
    running = peak = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):
        running += step
        peak = max(peak, running)
    assert peak == 1
    reserved = await reservations(dev_client, list(jobs))
    begun = handler_starts(path)
    assert all(begun[j] >= reserved[j] - CLOCK_SLACK for j in jobs)


async def _waiting(client: Client, key: str, job: str) -> bool:
    state = await limiter(client, key)
    return any(w.request.holder == job for w in state.waiters)


@pytest.mark.devserver
async def test_a_waiting_job_says_so_and_a_pause_or_cancel_leaves_the_queue(
    dev_client: Client, worker: str, tmp_path: Path, cli: dict[str, str]
) -> None:
    key, path = new_key(), tmp_path / "runs.jsonl"
    # One start an hour. The first runs before the others are sent: jobs reach their limiter
    # in whatever order their workflows run, not the order they were sent (so the job to be
    # paused once took the free start and had finished before the pause).
    fields = {"rate_key": key, "rate": "1/h"}
    first = await submit(dev_client, worker, path, **fields)
    await finish(dev_client, [first])
    paused, cancelled = [await submit(dev_client, worker, path, **fields) for _ in range(2)]
    await eventually(
        lambda: _waiting(dev_client, key, cancelled), what="the third queued", retry_on=(RPCError,)
    )
    # Pause the second while it is still queued.
    await operations.pause(dev_client, paused)
    await eventually(lambda: _waiting(dev_client, key, paused), lambda w: not w, what="withdrawn")
    report = await job_report(dev_client, cancelled)
    assert report.status == JobStatus.PENDING
    assert report.waiting_for == f"waiting for rate limit of key {key}"
    shown = await asyncio.to_thread(jobs_here_sync, cli, "status", cancelled)
    assert f"pending: due, waiting for rate limit of key {key}" in shown.stdout, shown
    await operations.cancel(dev_client, cancelled)
    with pytest.raises(WorkflowFailureError):
        await dev_client.get_workflow_handle(cancelled).result()
    await eventually(lambda: _waiting(dev_client, key, cancelled), lambda w: not w, what="gone")
    assert (await operations.status(dev_client, paused)).status == JobStatus.PAUSED
    await operations.resume(dev_client, paused)
    await eventually(lambda: _waiting(dev_client, key, paused), what="queued again once resumed")
    await operations.cancel(dev_client, paused)
    await eventually(lambda: _waiting(dev_client, key, paused), lambda w: not w, what="gone too")
    assert set(handler_starts(path)) == {first}  # the paused and the cancelled one never ran
    state = await limiter(dev_client, key)
    assert (state.granted, state.waiters) == (1, [])


@pytest.mark.devserver
async def test_the_limiter_continues_as_new_and_keeps_its_pace(
    dev_client: Client, worker: str, tmp_path: Path
) -> None:
    key, path = new_key(), tmp_path / "runs.jsonl"
    started = await dev_client.start_workflow(
        names.RATE_WORKFLOW,
        RateState(key=key, event_budget=100),
        id=rate_workflow_id(key),
        task_queue=worker,
    )
    jobs = await asyncio.gather(
        *(submit(dev_client, worker, path, rate_key=key, rate="10/s") for _ in range(40))
    )
    await finish(dev_client, list(jobs), timeout=90)
    description = await dev_client.get_workflow_handle(rate_workflow_id(key)).describe()
    assert description.run_id != started.result_run_id  # it continued as new
    ordered = sorted((await reservations(dev_client, list(jobs))).values())
    gaps = [b - a for a, b in itertools.pairwise(ordered)]
    assert min(gaps) >= 0.1 - 1e-6  # the pace held across runs
    assert (await limiter(dev_client, key)).granted == 40


async def actions(client: Client, workflow_id: str) -> int:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return sum(tally(history.events).values())


@pytest.mark.devserver
async def test_cost_in_actions_per_job(dev_client: Client, worker: str, tmp_path: Path) -> None:
    """A rate-limited job costs its grant signal, the wait for it (a timer, unless the grant
    lands first) and the wait until its start (a timer, unless the start is now); the limiter
    receives its acquire signal; the first job starts the limiter (a child: 2)."""
    key, path = new_key(), tmp_path / "runs.jsonl"
    plain = await submit(dev_client, worker, path)
    await finish(dev_client, [plain])
    limited = []
    for _ in range(3):  # one after the other: the later ones find the limiter running
        limited.append(await submit(dev_client, worker, path, rate_key=key, rate="1/s"))
        await finish(dev_client, limited[-1:])
    base = await actions(dev_client, plain)
    extra = [await actions(dev_client, job) - base for job in limited]
    assert extra[0] in (3, 4, 5), extra  # child (2), grant (1), the two waits (0-2)
    assert all(e in (1, 2, 3) for e in extra[1:]), extra
    assert await actions(dev_client, rate_workflow_id(key)) in range(3, 3 + 4)


async def test_a_slow_rate_spaces_starts_by_the_hour(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    """On the time-skipping server: 3 jobs on "2/h" start 30 minutes apart."""
    client, key = ts_env.client, new_key()
    async with running_worker(client, task_queue):
        now = await ts_env.get_current_time()
        spec = {"name": "slow", "handler": "log", "run_at": now.isoformat(), "dispatch_lead": 0}
        jobs = []
        for _ in range(3):
            fields = {**spec, "rate_key": key, "rate": "2/h"}
            jobs.append(
                (await operations.schedule(client, fields, HANDLERS, task_queue=task_queue)).job_id
            )
        handles = [client.get_workflow_handle(j, result_type=JobReport) for j in jobs]
        reports = [await finished(ts_env, handle) for handle in handles]
        assert {r.status for r in reports} == {JobStatus.DONE}
        starts = sorted([(await grants(client, j))[0].start_at for j in jobs])
        assert [s - starts[0] for s in starts] == [
            timedelta(0),
            timedelta(minutes=30),
            timedelta(hours=1),
        ]
