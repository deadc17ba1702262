"""Hostile messages to a rate key's limiter (and forged grants to a job waiting for a start).

One key at 1/h: a first job takes the start, a second waits in the limiter's queue. Each case
sends the limiter a bad ``acquire`` / ``release`` / unknown signal (wrong types, nulls,
missing or extra fields, bad rates and bursts, another key, over-long ids, extra arguments)
and asserts it was counted and dropped, that the queue is unchanged, that no workflow task
failed and that nothing was started. A forged grant to the waiting job is recorded in its
audit trail and does not let it start. At the end the waiter is cancelled and leaves the
queue, a job of the same key whose own burst allows it starts at once (the limiter still
works), and a normal job still runs.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.workflows import names
from jobctl.workflows.models import JobReport, JobStatus
from jobctl.workflows.models.ratelimit import RateState, rate_workflow_id
from tests.helpers.poll import eventually
from tests.helpers.temporal import end_singletons, running_worker
from tests.hostile.common import assert_nothing_started, normal_job_completes, started_count

pytestmark = [pytest.mark.devserver, pytest.mark.asyncio(loop_scope="session")]

HANDLERS = load_handlers("tests.handlers").names()


@dataclass
class Target:
    queue: str
    key: str
    first: str
    waiter: str
    runs: Path


async def submit(client: Client, target_queue: str, key: str, runs: Path, **more: Any) -> str:
    spec = {
        "name": "hostile-rate",
        "handler": "test.record",
        "run_at": datetime.now(UTC).isoformat(),
        "dispatch_lead": 0,
        "payload": {"path": str(runs), "seconds": 0},
        "rate_key": key,
        "rate": "1/h",
        **more,
    }
    return (await operations.schedule(client, spec, HANDLERS, task_queue=target_queue)).job_id


async def limiter(client: Client, key: str) -> RateState:
    handle = client.get_workflow_handle(rate_workflow_id(key))
    state: RateState = await handle.query(names.QUERY_RESERVATIONS, result_type=RateState)
    return state


def started(runs: Path) -> list[str]:
    if not runs.exists():
        return []
    return re.findall(r'"key": "([^"]+)"[^\n]*"event": "start"', runs.read_text())


@pytest.fixture(scope="module")
async def target(
    dev_client: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Target]:
    queue, key = f"hostile-{uuid.uuid4().hex[:8]}", f"api-{uuid.uuid4().hex[:8]}"
    runs = tmp_path_factory.mktemp("hostile-rate") / "runs.jsonl"
    async with running_worker(dev_client, queue):
        first = await submit(dev_client, queue, key, runs)
        await dev_client.get_workflow_handle(first).result()
        waiter = await submit(dev_client, queue, key, runs)
        await eventually(
            lambda: limiter(dev_client, key),
            lambda s: [w.request.holder for w in s.waiters] == [waiter],
            what="the waiter queued",
            retry_on=(RPCError,),
        )
        yield Target(queue, key, first, waiter, runs)
        await normal_job_completes(dev_client, queue)
    await end_singletons(dev_client)


def request(target: Target, **change: Any) -> dict[str, Any]:
    """A well-formed acquire for a made-up holder, changed by ``change``."""
    base = {
        "key": target.key,
        "rate": "1/h",
        "burst": 1,
        "holder": "forged-holder",
        "run_id": str(uuid.uuid4()),
        "ticket": "forged-ticket",
        "priority": 3,
    }
    return {**base, **change}


def release(**change: Any) -> dict[str, Any]:
    return {"holder": "x", "run_id": str(uuid.uuid4()), "ticket": "z", **change}


ACQUIRE_CASES: dict[str, Any] = {
    "null": None,
    "number": 42,
    "string": "please",
    "list": [1, 2],
    "empty-object": {},
    "missing-rate": "drop:rate",
    "rate-zero": {"rate": "0/s"},
    "rate-negative": {"rate": "-1/s"},
    "rate-overflow": {"rate": "1e309/s"},
    "rate-fortnight": {"rate": "10/fortnight"},
    "rate-too-fast": {"rate": "1000000/s"},
    "rate-bool": {"rate": True},
    "rate-list": {"rate": ["10/s"]},
    "rate-number": {"rate": 10},
    "burst-zero": {"burst": 0},
    "burst-huge": {"burst": 10**9},
    "burst-float": {"burst": 1.5},
    "burst-bool": {"burst": True},
    "priority-nine": {"priority": 9},
    "other-key": {"key": "someone-else"},
    "huge-key": {"key": "k" * 100_000},
    "long-holder": {"holder": "h" * 2000},
    "long-ticket": {"ticket": "t" * 65},
    "run-id-not-uuid": {"run_id": "../../etc"},
    "extra-field": {"admin": True},
    "nested-garbage": {"holder": {"$where": [1, {"a": None}]}},
    "unicode-key": {"key": "\u202e\u0000"},
}
RELEASE_CASES: dict[str, Any] = {
    "null": None,
    "string": "all",
    "empty-object": {},
    "extra-field": release(everyone=True),
    "ticket-number": release(ticket=12),
    "run-id-not-uuid": release(run_id="run-1"),
}


def acquire_arg(target: Target, case: Any) -> Any:
    if case == "drop:rate":
        return {k: v for k, v in request(target).items() if k != "rate"}
    if isinstance(case, dict) and case:
        return request(target, **case)
    return case


async def healthy(client: Client, workflow_id: str) -> None:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    failed = [
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]
    assert not failed, f"workflow task failed: {failed[0].workflow_task_failed_event_attributes}"


async def send_and_check(client: Client, target: Target, name: str, args: list[Any]) -> None:
    """Send one bad signal: it is counted and dropped, and nothing else changes."""
    before_state = await limiter(client, target.key)
    before = await started_count(client)
    handle = client.get_workflow_handle(rate_workflow_id(target.key))
    await handle.signal(name, args=args)
    after = await eventually(
        lambda: limiter(client, target.key),
        lambda s: s.rejected == before_state.rejected + 1,
        what="the signal counted as rejected",
    )
    assert after.last_rejection
    assert [w.request for w in after.waiters] == [w.request for w in before_state.waiters]
    assert (after.tat, after.granted) == (before_state.tat, before_state.granted)
    await healthy(client, rate_workflow_id(target.key))
    await assert_nothing_started(client, before)


@pytest.mark.parametrize("case", list(ACQUIRE_CASES), ids=list(ACQUIRE_CASES))
async def test_bad_acquire_is_counted_and_dropped(
    dev_client: Client, target: Target, case: str
) -> None:
    arg = acquire_arg(target, ACQUIRE_CASES[case])
    await send_and_check(dev_client, target, names.SIGNAL_ACQUIRE, [arg])


@pytest.mark.parametrize("case", list(RELEASE_CASES), ids=list(RELEASE_CASES))
async def test_bad_release_is_counted_and_dropped(
    dev_client: Client, target: Target, case: str
) -> None:
    await send_and_check(dev_client, target, names.SIGNAL_RELEASE_PERMIT, [RELEASE_CASES[case]])


@pytest.mark.parametrize(
    ("signal", "args"),
    [(names.SIGNAL_ACQUIRE, [{}, {}]), (names.SIGNAL_ACQUIRE, []), ("grant_me", ["x"])],
    ids=["acquire-two-args", "acquire-no-args", "unknown-name"],
)
async def test_bad_arity_or_name_is_counted_and_dropped(
    dev_client: Client, target: Target, signal: str, args: list[Any]
) -> None:
    await send_and_check(dev_client, target, signal, args)


def rejected_in_a_row(report: object) -> int:
    assert isinstance(report, JobReport)
    if not report.audit or report.audit[-1].action != "rejected":
        return 0
    found = re.match(r"^\((\d+) in a row\) ", report.audit[-1].detail or "")
    return int(found.group(1)) if found else 1


@pytest.mark.parametrize(
    "grant",
    [
        None,
        {"key": "KEY", "ticket": "guessed", "start_at": "2020-01-01T00:00:00Z"},
        {"key": "other", "ticket": "t", "start_at": "2020-01-01T00:00:00Z"},
        {"key": "KEY", "ticket": "t", "start_at": "yesterday"},
    ],
    ids=["null", "guessed-ticket", "other-key", "bad-start"],
)
async def test_a_forged_grant_does_not_let_a_waiter_start(
    dev_client: Client, target: Target, grant: Any
) -> None:
    if isinstance(grant, dict) and grant.get("key") == "KEY":
        grant = {**grant, "key": target.key}
    handle = dev_client.get_workflow_handle(target.waiter)
    before = rejected_in_a_row(await operations.status(dev_client, target.waiter))
    await handle.signal(names.SIGNAL_RATE_GRANTED, grant)
    report = await eventually(
        lambda: operations.status(dev_client, target.waiter),
        lambda r: rejected_in_a_row(r) == before + 1,
        what="the forged grant recorded",
    )
    assert isinstance(report, JobReport)
    assert report.status == JobStatus.PENDING
    assert report.waiting_for == f"waiting for rate limit of key {target.key}"
    assert started(target.runs) == [target.first]
    await healthy(dev_client, target.waiter)


async def test_the_limiter_still_works_after_it_all(dev_client: Client, target: Target) -> None:
    """Last in the module: the waiter cancelled leaves the queue; a job whose own burst
    allows a start now gets one at once."""
    await operations.cancel(dev_client, target.waiter)
    with pytest.raises(WorkflowFailureError):
        await dev_client.get_workflow_handle(target.waiter).result()
    await eventually(
        lambda: limiter(dev_client, target.key), lambda s: not s.waiters, what="queue empty"
    )
    allowed = await submit(dev_client, target.queue, target.key, target.runs, rate_burst=3)
    await dev_client.get_workflow_handle(allowed).result()
    assert started(target.runs) == [target.first, allowed]
    await healthy(dev_client, rate_workflow_id(target.key))
