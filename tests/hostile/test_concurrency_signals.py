"""Hostile messages to a concurrency key's semaphore (and forged grants to a waiting job).

One key with limit 1: a holder job runs a long handler, a second job waits for the permit.
Each case sends the semaphore a bad ``acquire`` / ``release`` / unknown signal (wrong types,
nulls, missing or extra fields, out-of-range limits and priorities, another key, over-long
ids, extra arguments) and asserts it was counted and dropped, that the holder and the waiter
are unchanged, that no workflow task failed and that nothing was started. A forged grant to
the waiting job is recorded in its audit trail and does not let it run; a well-formed acquire
for a workflow that does not exist is granted, found gone and taken back. At the end the
holder is cancelled, the waiter runs, and a normal job still runs.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.workflows import names
from jobctl.workflows.models import JobReport, JobStatus
from jobctl.workflows.models.concurrency import SemaphoreState, concurrency_workflow_id
from tests.helpers.poll import eventually
from tests.helpers.temporal import end_singletons, running_worker
from tests.hostile.common import assert_nothing_started, normal_job_completes, started_count

pytestmark = [pytest.mark.devserver, pytest.mark.asyncio(loop_scope="session")]

HANDLERS = load_handlers("tests.handlers").names()


@dataclass
class Target:
    queue: str
    key: str
    holder: str
    waiter: str
    runs: Path


async def submit(client: Client, queue: str, key: str, runs: Path, seconds: float) -> str:
    spec = {
        "name": "hostile-concurrency",
        "handler": "test.record",
        "run_at": datetime.now(UTC).isoformat(),
        "payload": {"path": str(runs), "seconds": seconds},
        "concurrency_key": key,
        "concurrency_limit": 1,
    }
    return (await operations.schedule(client, spec, HANDLERS, task_queue=queue)).job_id


async def permits(client: Client, key: str) -> SemaphoreState:
    handle = client.get_workflow_handle(concurrency_workflow_id(key))
    state: SemaphoreState = await handle.query(names.QUERY_PERMITS, result_type=SemaphoreState)
    return state


def started(runs: Path) -> list[str]:
    if not runs.exists():
        return []
    lines = [json.loads(line) for line in runs.read_text().splitlines()]
    return [line["key"] for line in lines if line["event"] == "start"]


@pytest.fixture(scope="module")
async def target(
    dev_client: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Target]:
    queue, key = f"hostile-{uuid.uuid4().hex[:8]}", f"tenant-{uuid.uuid4().hex[:8]}"
    runs = tmp_path_factory.mktemp("hostile-concurrency") / "runs.jsonl"
    async with running_worker(dev_client, queue):
        await dev_client.start_workflow(
            names.CONCURRENCY_WORKFLOW,
            SemaphoreState(key=key, probe_every=1.0),
            id=concurrency_workflow_id(key),
            task_queue=queue,
        )
        holder = await submit(dev_client, queue, key, runs, seconds=600)
        await eventually(lambda: _true(started(runs)), what="the holder running")
        waiter = await submit(dev_client, queue, key, runs, seconds=0)
        await eventually(
            lambda: permits(dev_client, key), lambda s: len(s.waiters) == 1, what="one waiting"
        )
        yield Target(queue, key, holder, waiter, runs)
        await normal_job_completes(dev_client, queue)
    await end_singletons(dev_client)


async def _both(client: Client, target: Target) -> tuple[str, str, SemaphoreState]:
    holder = await operations.status(client, target.holder)
    waiter = await operations.status(client, target.waiter)
    return waiter.status, holder.status, await permits(client, target.key)


async def _true(value: object) -> bool:
    return bool(value)


def request(target: Target, **change: Any) -> dict[str, Any]:
    """A well-formed acquire for a made-up holder, changed by ``change``."""
    base = {
        "key": target.key,
        "limit": 1,
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
    "missing-ticket": "drop:ticket",
    "limit-zero": {"limit": 0},
    "limit-huge": {"limit": 10**9},
    "limit-string": {"limit": "3"},
    "limit-float": {"limit": 1.5},
    "priority-zero": {"priority": 0},
    "priority-nine": {"priority": 9},
    "other-key": {"key": "someone-else"},
    "long-holder": {"holder": "h" * 2000},
    "long-ticket": {"ticket": "t" * 65},
    "run-id-not-uuid": {"run_id": "../../etc"},
    "empty-ticket": {"ticket": ""},
    "extra-field": {"admin": True},
    "nested-garbage": {"holder": {"$where": [1, {"a": None}]}},
    "unicode-key": {"key": "\u202e\u0000"},
}
RELEASE_CASES: dict[str, Any] = {
    "null": None,
    "number": 7,
    "string": "all",
    "empty-object": {},
    "long-holder": release(holder="h" * 5000),
    "extra-field": release(everyone=True),
    "ticket-number": release(ticket=12),
    "run-id-not-uuid": release(run_id="run-1"),
}


def acquire_arg(target: Target, case: Any) -> Any:
    if case == "drop:ticket":
        return {k: v for k, v in request(target).items() if k != "ticket"}
    if isinstance(case, dict) and case:
        return request(target, **case)
    return case


def rejected_in_a_row(report: object) -> int:
    """Dropped messages recorded by the job's latest audit entry (consecutive ones fold)."""
    assert isinstance(report, JobReport)
    if not report.audit or report.audit[-1].action != "rejected":
        return 0
    found = re.match(r"^\((\d+) in a row\) ", report.audit[-1].detail or "")
    return int(found.group(1)) if found else 1


async def healthy(client: Client, workflow_id: str) -> None:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    failed = [
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]
    assert not failed, f"workflow task failed: {failed[0].workflow_task_failed_event_attributes}"


async def send_and_check(client: Client, target: Target, name: str, args: list[Any]) -> None:
    """Send one bad signal: it is counted and dropped, and nothing else changes."""
    before_state = await permits(client, target.key)
    before = await started_count(client)
    handle = client.get_workflow_handle(concurrency_workflow_id(target.key))
    await handle.signal(name, args=args)
    after = await eventually(
        lambda: permits(client, target.key),
        lambda s: s.rejected == before_state.rejected + 1,
        what="the signal counted as rejected",
    )
    assert after.last_rejection
    assert [p.request for p in after.holders] == [p.request for p in before_state.holders]
    assert [p.request for p in after.waiters] == [p.request for p in before_state.waiters]
    assert [p.request.holder for p in after.holders] == [target.holder]
    await healthy(client, concurrency_workflow_id(target.key))
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
    ("name", "args"),
    [
        ("acquire-two-args", [{}, {}]),
        ("acquire-no-args", []),
        ("release-two-args", [None, None]),
        ("unknown-name", ["x"]),
    ],
)
async def test_bad_arity_or_name_is_counted_and_dropped(
    dev_client: Client, target: Target, name: str, args: list[Any]
) -> None:
    signal = {
        "acquire-two-args": names.SIGNAL_ACQUIRE,
        "acquire-no-args": names.SIGNAL_ACQUIRE,
        "release-two-args": names.SIGNAL_RELEASE_PERMIT,
        "unknown-name": "steal_permit",
    }[name]
    await send_and_check(dev_client, target, signal, args)


async def test_a_release_with_a_forged_ticket_frees_nothing(
    dev_client: Client, target: Target
) -> None:
    state = await permits(dev_client, target.key)
    holder = state.holders[0].request
    handle = dev_client.get_workflow_handle(concurrency_workflow_id(target.key))
    forged = {"holder": holder.holder, "run_id": holder.run_id, "ticket": "guessed"}
    await handle.signal(names.SIGNAL_RELEASE_PERMIT, forged)
    await handle.signal(names.SIGNAL_RELEASE_PERMIT, forged)  # and once more
    after = await permits(dev_client, target.key)  # the query runs after both signals
    assert [p.request for p in after.holders] == [holder]
    assert len(after.waiters) == 1
    assert started(target.runs) == [target.holder]


@pytest.mark.parametrize(
    "grant",
    [None, {"key": "k"}, {"key": "KEY", "ticket": "guessed"}, {"key": "other", "ticket": "t"}],
    ids=["null", "missing-ticket", "guessed-ticket", "other-key"],
)
async def test_a_forged_grant_does_not_let_a_waiter_run(
    dev_client: Client, target: Target, grant: Any
) -> None:
    if isinstance(grant, dict) and grant.get("key") == "KEY":
        grant = {**grant, "key": target.key}
    handle = dev_client.get_workflow_handle(target.waiter)
    before = rejected_in_a_row(await operations.status(dev_client, target.waiter))
    await handle.signal(names.SIGNAL_PERMIT_GRANTED, grant)
    report = await eventually(
        lambda: operations.status(dev_client, target.waiter),
        lambda r: rejected_in_a_row(r) == before + 1,
        what="the forged grant recorded",
    )
    assert isinstance(report, JobReport)
    assert report.status == JobStatus.PENDING  # due, still waiting for its permit
    assert started(target.runs) == [target.holder]
    await healthy(dev_client, target.waiter)


async def test_an_acquire_for_a_missing_workflow_is_taken_back_and_the_waiter_runs(
    dev_client: Client, target: Target
) -> None:
    """Last in the module: a forged request jumps the queue (priority 1); when the holder is
    cancelled the forged one is granted, cannot be told, is taken back, and the real waiter
    runs."""
    handle = dev_client.get_workflow_handle(concurrency_workflow_id(target.key))
    await handle.signal(names.SIGNAL_ACQUIRE, request(target, priority=1))
    await eventually(
        lambda: permits(dev_client, target.key), lambda s: len(s.waiters) == 2, what="2 waiting"
    )
    before = await permits(dev_client, target.key)
    await operations.cancel(dev_client, target.holder)
    await eventually(
        lambda: _both(dev_client, target),
        lambda both: both[0] == JobStatus.DONE,
        timeout=60,
        what="the waiter done",
    )
    after = await permits(dev_client, target.key)
    assert after.reclaimed == before.reclaimed + 1
    assert started(target.runs) == [target.holder, target.waiter]
    await healthy(dev_client, concurrency_workflow_id(target.key))
