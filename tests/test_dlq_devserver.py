"""The dead-letter queue end to end on a real dev server: the CLI, the bare `temporal` binary,
batch operations, and poison jobs in bulk."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.query.v1 import WorkflowQuery
from temporalio.api.workflowservice.v1 import QueryWorkflowRequest
from temporalio.client import Client, WorkflowHandle

from jobctl.activities.registry import load_handlers
from jobctl.starter import dlq, operations
from jobctl.starter.dev.devserver import DevServer
from jobctl.workflows.backoff import retry_delay_bounds
from jobctl.workflows.models import DlqState, JobStatus
from jobctl.workflows.names import DLQ_WORKFLOW_ID
from tests.helpers.cli import jobs_here_blocking as ask
from tests.helpers.dev_servers import dev_server_fixtures
from tests.helpers.poll import eventually
from tests.helpers.processes import (
    Workers,
    cli_env,
    jobs_json,
    temporal,
    temporal_signal,
    wait_for_async,
)
from tests.helpers.temporal import running_worker

# A server of this module's own: these tests list every dead job, so the dead jobs other
# modules leave on the session's server must not be there.
dev_server, dev_client = dev_server_fixtures("module")


# Alone (after the parallel pass): beside four other files, the DLQ workflow's query under
# rollovers overran the SDK's 2 s deadlock bound in 3 of 4 runs on 2026-12-07 (an open defect
# of the DLQ workflow on a busy machine, not hidden by this: the test checks behaviour).
pytestmark = [pytest.mark.devserver, pytest.mark.alone]

POISON_ONCE = json.dumps({"seconds": 0, "fail_times": 1, "permanent": True})


def park_one(cli: dict[str, str], name: str = "poison", handler: str = "demo.sleep") -> str:
    job_id = f"{name}-{uuid.uuid4().hex[:8]}"
    payload = POISON_ONCE if handler == "demo.sleep" else "{}"
    jobs_json(
        cli,
        "schedule",
        name,
        "--handler",
        handler,
        "--payload",
        payload,
        "--in",
        "0",
        "--id",
        job_id,
    )
    return job_id


async def wait_parked(client: Client, job_ids: set[str], timeout: float = 60) -> None:
    """Until the DLQ index and the visibility listing both hold exactly these jobs."""
    deadline = time.monotonic() + timeout
    while True:
        indexed = {e.job_id for e in await dlq.recent_entries(client)}
        listed = {e.job_id for e in (await dlq.list_dead(client, limit=1000)).entries}
        if indexed == job_ids == listed:
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"index - expected {sorted(indexed - job_ids)[:10]}, "
                f"expected - index {sorted(job_ids - indexed)[:10]}, "
                f"listed - expected {sorted(listed - job_ids)[:10]}, "
                f"expected - listed {sorted(job_ids - listed)[:10]}"
            )
        await asyncio.sleep(0.3)


async def test_requeue_three_ways_and_discard(
    cli: dict[str, str], workers: Workers, dev_client: Client, dev_server: DevServer
) -> None:
    workers.start()
    by_cli, by_temporal_dlq, by_temporal_job, to_discard = (park_one(cli) for _ in range(4))
    everyone = {by_cli, by_temporal_dlq, by_temporal_job, to_discard}
    for job_id in everyone:
        await wait_for_async(cli, job_id, "dead")
    await wait_parked(dev_client, everyone)
    listed = jobs_json(cli, "dlq", "list")["entries"]
    assert {e["job_id"] for e in listed} == everyone
    assert all(e["attempts"] == 1 and "demo failure" in e["last_error"] for e in listed)
    parked = [e["parked_at"] for e in listed]
    assert parked == sorted(parked, reverse=True)  # newest first

    assert ask(cli, "dlq", "requeue", by_cli).returncode == 0
    signal_dlq = temporal_signal(dev_server.address, DLQ_WORKFLOW_ID, "requeue", by_temporal_dlq)
    assert signal_dlq.returncode == 0, signal_dlq.stderr
    signal_job = temporal(
        dev_server.address,
        "workflow",
        "signal",
        "--workflow-id",
        by_temporal_job,
        "--name",
        "requeue",
    )
    assert signal_job.returncode == 0, signal_job.stderr
    assert ask(cli, "dlq", "discard", to_discard).returncode == 0

    for job_id in (by_cli, by_temporal_dlq, by_temporal_job):
        report = await wait_for_async(cli, job_id, "done")
        assert [(a["attempt"], a["round"], a["outcome"]) for a in report["attempts"]] == [
            (1, 1, "failed"),
            (2, 2, "succeeded"),
        ]
    await wait_parked(dev_client, set())
    discarded = await dev_client.get_workflow_handle(to_discard).describe()
    assert discarded.status is not None and discarded.status.name == "FAILED"
    log = jobs_json(cli, "dlq", "log", "--limit", "100")
    done = {(line["action"], line["job_id"]) for line in log}
    assert {("requeued", j) for j in (by_cli, by_temporal_dlq, by_temporal_job)} <= done
    assert ("discarded", to_discard) in done

    # Not dead: the CLI refuses clearly and nothing happens.
    again = ask(cli, "dlq", "requeue", by_cli)
    assert again.returncode == 5 and "finished" in again.stderr
    waiting = jobs_json(cli, "schedule", "later", "--handler", "log", "--in", "1h")["job_id"]
    refused = ask(cli, "dlq", "requeue", waiting)
    assert refused.returncode == 5
    assert (
        refused.stderr.strip() == f"error: cannot requeue: job '{waiting}' is scheduled, not dead"
    )


async def test_bulk_requeue_and_discard_by_handler_are_safe_to_repeat(
    cli: dict[str, str], workers: Workers, dev_client: Client
) -> None:
    workers.start()
    demo = {park_one(cli) for _ in range(5)}
    permanent = {park_one(cli, handler="test.permanent") for _ in range(3)}
    for job_id in demo | permanent:
        await wait_for_async(cli, job_id, "dead")
    await wait_parked(dev_client, demo | permanent)

    first = jobs_json(cli, "dlq", "requeue", "--all", "--handler", "demo.sleep")
    assert first == {"action": "requeue", "count": 5}
    for job_id in demo:
        report = await wait_for_async(cli, job_id, "done")
        assert len(report["attempts"]) == 2
    await wait_parked(dev_client, permanent)
    second = jobs_json(cli, "dlq", "requeue", "--all", "--handler", "demo.sleep")
    assert second == {"action": "requeue", "count": 0}
    for job_id in demo:  # ran once more each, not twice
        assert len(jobs_json(cli, "status", job_id)["attempts"]) == 2

    assert jobs_json(cli, "dlq", "discard", "--all")["count"] == 3
    await wait_parked(dev_client, set())
    assert jobs_json(cli, "dlq", "discard", "--all")["count"] == 0


async def test_an_empty_dlq_answers_empty_lists_never_null(
    dev_client: Client, dev_server: DevServer, task_queue: str
) -> None:
    """``entries`` and ``log`` on a DLQ with nothing in it: the payload is ``[]``, and so is
    what ``jobctl dlq list`` / ``jobctl dlq log`` print. The bare temporal CLI (1.9.1) prints
    every empty JSON list as null, nested ones too (``state``'s ``entries``, whose payload is
    ``{"entries": [], ...}``): its rendering, not our answer."""
    from tests.helpers.temporal import end_singletons

    try:
        async with running_worker(dev_client, task_queue):
            handle = await dev_client.start_workflow(
                "DeadLetterQueueWorkflow", DlqState(), id=DLQ_WORKFLOW_ID, task_queue=task_queue
            )
            for query in ("entries", "log"):
                raw = await raw_query(dev_client, query)
                assert raw == b"[]", (query, raw)
                assert await handle.query(query) == []
                shown = await asyncio.to_thread(bare_query, dev_server.address, query)
                assert shown in ([[]], [None]), shown
            state = await raw_query(dev_client, "state")
            assert json.loads(state)["entries"] == []
            bare_state = await asyncio.to_thread(bare_query, dev_server.address, "state")
            # Whatever the CLI shows for an empty list, it shows the same for both.
            assert bare_state[0]["entries"] == shown[0]
            env = cli_env(dev_server.address, task_queue)
            listed = await asyncio.to_thread(ask, env, "dlq", "log", "--json")
            assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stderr
    finally:
        await end_singletons(dev_client)


async def raw_query(client: Client, query: str) -> bytes:
    """The query's answer as the worker encoded it (no client-side decoding)."""
    response = await client.workflow_service.query_workflow(
        QueryWorkflowRequest(
            namespace=client.namespace,
            execution=WorkflowExecution(workflow_id=DLQ_WORKFLOW_ID),
            query=WorkflowQuery(query_type=query),
        )
    )
    [payload] = response.query_result.payloads
    assert payload.metadata["encoding"] == b"json/plain"
    return bytes(payload.data)


def bare_query(address: str, query: str) -> Any:
    result = temporal(
        address,
        "workflow",
        "query",
        "--workflow-id",
        DLQ_WORKFLOW_ID,
        "--name",
        query,
        "-o",
        "json",
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["queryResult"]


# The longest a retry may start after its delay while 200 jobs retry at once on 2 cores: a
# retry held back longer is taken as lost. Not a latency figure: measured 0.42 s on a quiet
# machine, 16.1 s beside a four-worker suite run, 71 s beside two CPU burners (the dev server
# and the one in-process worker share the cores with them).
LATE_RETRY_SLACK = 90.0


@pytest.mark.timeout(400)  # waits up to 240 s for the 200 to park
async def test_two_hundred_poison_jobs_end_dead_with_five_jittered_attempts(
    dev_client: Client, task_queue: str
) -> None:
    handlers = load_handlers().names()
    spec: dict[str, Any] = {
        "name": "poison",
        "handler": "demo.sleep",
        "payload": {"seconds": 0, "always_fail": True},
        "delay": 0,
        "max_attempts": 5,
        "backoff_base": 1.0,
        "jitter": 0.5,
    }
    try:
        async with running_worker(dev_client, task_queue):
            started = time.monotonic()
            ids = [
                (
                    await operations.schedule(
                        dev_client,
                        {**spec, "id": f"p200-{i}-{uuid.uuid4().hex[:6]}"},
                        handlers,
                        task_queue=task_queue,
                    )
                ).job_id
                for i in range(200)
            ]
            await wait_parked(dev_client, set(ids), timeout=240)
            elapsed = time.monotonic() - started
            reports = await asyncio.gather(*(operations.status(dev_client, j) for j in ids))
    finally:
        from tests.helpers.temporal import end_singletons

        await end_singletons(dev_client)
    print(f"200 poison jobs parked in {elapsed:.1f}s")
    for report in reports:
        assert report.status == JobStatus.DEAD
        assert [a.attempt for a in report.attempts] == [1, 2, 3, 4, 5]
        assert all(a.outcome == "failed" and a.error_type == "DemoFailure" for a in report.attempts)
    for attempt in (1, 2, 3, 4):
        delays = [r.attempts[attempt - 1].retry_delay or 0.0 for r in reports]
        low, high = retry_delay_bounds(attempt, 1.0, 300, 0.5)
        assert all(low <= d <= high for d in delays)
        # Spread by jitter, not identical: distinct draws covering most of the jitter range.
        assert len(set(delays)) > 190
        assert max(delays) - min(delays) > 0.6 * (high - low)
        gaps = [
            (r.attempts[attempt].started_at - r.attempts[attempt - 1].started_at).total_seconds()
            for r in reports
        ]
        # The contract: a retry starts no sooner than its delay, and the server does fire it.
        # How the server batches its timers is not ours to promise (a gap spread of 0.148 s
        # where 0.15 s was asserted failed once under load), so the spread is asserted on the
        # delays drawn above, and the gaps only against the delays.
        assert all(gap >= delay for gap, delay in zip(gaps, delays, strict=True))
        late = max(gap - delay for gap, delay in zip(gaps, delays, strict=True))
        print(f"retry {attempt}: latest start {late:.2f}s after its delay")
        assert late <= LATE_RETRY_SLACK


@dataclass
class Waves:
    """Waves of poison jobs parked in the DLQ, each then requeued or discarded by its plan.

    Index mod 6: 0 requeue via DLQ, 1 discard via DLQ, 2 requeue on the job, 3 discard on the
    job, 4 left dead, 5 requeue via DLQ twice."""

    client: Client
    task_queue: str
    handlers: list[str]
    plan: dict[str, int]
    per_wave: int
    limit: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(20))

    @property
    def dlq(self) -> WorkflowHandle[Any, Any]:
        return self.client.get_workflow_handle(DLQ_WORKFLOW_ID)

    def of(self, wave: int) -> dict[str, int]:
        return {j: g for j, g in self.plan.items() if j.startswith(f"w{wave}-")}

    async def schedule(self, wave: int) -> None:
        async def one(job_id: str) -> None:
            spec = {
                "id": job_id,
                "name": f"wave-{wave}",
                "handler": "demo.sleep",
                "payload": json.loads(POISON_ONCE),
                "delay": 0,
                "max_attempts": 1,
            }
            async with self.limit:
                await operations.schedule(
                    self.client, spec, self.handlers, task_queue=self.task_queue
                )

        await asyncio.gather(*(one(j) for j in self.of(wave)))

    async def act(self, job_id: str, group: int) -> None:
        async with self.limit:
            if group in (0, 5):
                await self.dlq.signal("requeue", job_id)
            if group == 5:
                await self.dlq.signal("requeue", job_id)
            if group == 1:
                await self.dlq.signal("discard", job_id)
            if group in (2, 3):
                action = "requeue" if group == 2 else "discard"
                await self.client.get_workflow_handle(job_id).signal(action)

    async def act_on(self, wave: int) -> None:
        query = f'JobName = "wave-{wave}" AND JobStatus = "dead"'
        await eventually(
            lambda: self.client.count_workflows(query),
            lambda counted: counted.count >= self.per_wave,
            timeout=180,
            interval=0.5,
            what=f"wave {wave} dead",
        )
        await asyncio.gather(*(self.act(j, g) for j, g in self.of(wave).items()))
        # Pace the waves by the DLQ's own progress, so the parked set stays within the
        # index's MAX_ENTRIES and the index can be compared with visibility at the end.
        released = sum(
            1 for j, g in self.plan.items() if g != 4 and int(j[1:].split("-")[0]) <= wave
        )
        await eventually(
            lambda: self.dlq.query("state"),
            lambda state: (
                state["totals"].get("requeued", 0) + state["totals"].get("discarded", 0) >= released
            ),
            timeout=180,
            interval=0.5,
            what=f"wave {wave} released",
        )

    async def count(self, status: str) -> int:
        query = f'TaskQueue = "{self.task_queue}" AND WorkflowType = "JobWorkflow" AND {status}'
        return (await self.client.count_workflows(query)).count


@pytest.mark.timeout(700)  # four waves, each allowed 180 s to park and 180 s to release
async def test_parks_interleaved_with_requeues_and_discards_across_dlq_rollovers(
    tmp_path_factory: pytest.TempPathFactory, task_queue: str
) -> None:
    """Every job ends in the state its last request put it in; the DLQ continued-as-new
    several times on the way and never lost or doubled a park, requeue or discard."""
    server = DevServer(
        db_file=None,  # in memory: this checks the DLQ, not persistence
        # A low suggestion makes the DLQ roll over often, so a few hundred parks cross several
        # generations (1,200 parks at 500 took ~110 s of a two-worker run; 480 parks at 150
        # reached generation 6 in 68 s, 320 at 75 generation 5 in 43 s, on the same machine;
        # later, on a quiet machine: 320 at 75 generation 5 in 32 s, 192 at 45 generation 6
        # in 13-16 s).
        dynamic_config={"limit.historyCount.suggestContinueAsNew": 45},
    )
    client = await server.start()
    waves, per_wave = 4, 48
    plan = {f"w{w}-{i}": i % 6 for w in range(waves) for i in range(per_wave)}
    run = Waves(client, task_queue, sorted(load_handlers().names()), plan, per_wave)
    groups = {g: {j for j, x in plan.items() if x == g} for g in range(6)}
    expected_dead = groups[4]
    try:
        async with running_worker(client, task_queue):
            started = time.monotonic()
            await run.schedule(0)
            for wave in range(waves):
                # Parks of the next wave interleave with this wave's requeues and discards.
                await asyncio.gather(
                    run.schedule(wave + 1) if wave + 1 < waves else asyncio.sleep(0),
                    run.act_on(wave),
                )
            await eventually(
                lambda: run.count('ExecutionStatus != "Running"'),
                lambda done: done == len(plan) - len(expected_dead),
                timeout=300,
                interval=1,
                what="every released job closed",
            )
            await wait_parked(client, expected_dead, timeout=120)
            elapsed = time.monotonic() - started
            # A second requeue may still be on its way when the jobs have settled.
            state = await eventually(
                lambda: run.dlq.query("state"),
                lambda state: state["totals"].get("ignored", 0) >= len(groups[5]),
                interval=0.5,
                what="every second requeue ignored",
            )
            dlq_events = [
                wf.history_length
                async for wf in client.list_workflows(f'WorkflowId = "{DLQ_WORKFLOW_ID}"')
            ]
            by_status = {
                status: await run.count(f'ExecutionStatus = "{status}"')
                for status in ("Completed", "Failed", "Running")
            }
    finally:
        server.stop()
    print(
        f"{len(plan)} parks + {len(plan) - len(expected_dead)} releases settled in {elapsed:.0f}s; "
        f"DLQ generation {state['generation']}, totals {state['totals']}, "
        f"DLQ history events per run {dlq_events} (sum {sum(dlq_events)})"
    )
    requeued = groups[0] | groups[2] | groups[5]
    discarded = groups[1] | groups[3]
    assert by_status == {
        "Completed": len(requeued),
        "Failed": len(discarded),
        "Running": len(expected_dead),
    }
    totals = state["totals"]
    assert totals["parked"] == len(plan)
    assert totals["requeued"] == len(requeued)
    assert totals["discarded"] == len(discarded)
    assert totals["ignored"] == len(groups[5])  # each second requeue, and nothing else
    assert state["generation"] >= 3
    assert {e["job_id"] for e in state["entries"]} == expected_dead
