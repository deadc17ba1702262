"""Hostile messages to every workflow, sent with the bare ``temporal`` CLI (issue 13).

Every signal, update and query of JobWorkflow (waiting and dead), CronJobWorkflow, the
dead-letter queue and the handler registry gets wrong types, nulls, over-long ids, huge
strings, nested garbage, bad dates, bad limits, unicode, extra or missing arguments and
unknown names. Each case asserts the CLI's answer, the record the workflow keeps of a dropped
signal (audit trail / DLQ log), that the workflow is healthy afterwards (a query answers, no
WORKFLOW_TASK_FAILED in its history) and that nothing was started; after each family a normal
job still runs and a real requeue through the DLQ still works. Workflows started by hand with
a bad input must fail at once with a clear non-retryable error.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError

from jobctl.starter import dlq, operations
from jobctl.starter.dev.devserver import DevServer
from jobctl.workflows.models import (
    CronReport,
    DlqState,
    JobReport,
    JobStatus,
    WorkerHandlers,
    parse_spec,
)
from jobctl.workflows.names import DLQ_WORKFLOW_ID, REGISTRY_WORKFLOW_ID
from tests.helpers.poll import eventually
from tests.helpers.processes import temporal, temporal_signal
from tests.helpers.temporal import end_singletons, running_worker
from tests.hostile.common import assert_nothing_started, normal_job_completes, started_count

pytestmark = [pytest.mark.devserver, pytest.mark.asyncio(loop_scope="session")]

POISON_ONCE = {"seconds": 0, "fail_times": 1, "permanent": True}
LONG_ID = "x" * 2000
RECORD_TIMEOUT = 30.0
FLOOD_TIMEOUT = 240.0
# The server refusing a continue-as-new because new signals arrived while it was sent: the
# next task handles them and rolls over (the DLQ's design, not a failing workflow).
CLOSE_REFUSED = {
    WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND,
    WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND,
}
_STREAK = re.compile(r"^\((\d+) in a row\) ")


@dataclass
class Targets:
    queue: str
    address: str
    waiting: str  # a JobWorkflow waiting for its run_at (an hour ahead)
    dead: str  # a JobWorkflow parked in the DLQ
    cron: str  # a CronJobWorkflow


async def schedule(client: Client, queue: str, **spec: Any) -> str:
    job_id = f"{spec.pop('prefix', 'job')}-{uuid.uuid4().hex[:8]}"
    body = {"id": job_id, "name": "hostile-target", **spec}
    handlers = {"log", "demo.sleep"}
    await operations.schedule(
        client, body, handlers=handlers, now=datetime.now(UTC), task_queue=queue
    )
    return job_id


async def wait_status(client: Client, job_id: str, status: str) -> None:
    async def reached() -> bool:
        return (await operations.status(client, job_id)).status == status

    await eventually(reached, what=f"{job_id} {status}", timeout=RECORD_TIMEOUT)


async def park_poison(client: Client, queue: str) -> str:
    job_id = await schedule(
        client, queue, prefix="poison", handler="demo.sleep", payload=POISON_ONCE, delay=0
    )
    await wait_status(client, job_id, "dead")

    async def indexed() -> bool:
        return any(e.job_id == job_id for e in await dlq.recent_entries(client))

    await eventually(indexed, what=f"{job_id} in the DLQ index", timeout=RECORD_TIMEOUT)
    return job_id


@pytest.fixture(scope="module")
async def targets(dev_client: Client, dev_server: DevServer) -> AsyncIterator[Targets]:
    await end_singletons(dev_client)
    queue = f"hostile-{uuid.uuid4().hex[:8]}"
    async with running_worker(dev_client, queue):
        await dev_client.start_workflow(
            "HandlerRegistryWorkflow",
            [WorkerHandlers(worker="hostile", handlers=["log"], published_at=datetime.now(UTC))],
            id=REGISTRY_WORKFLOW_ID,
            task_queue=queue,
        )
        # Started directly (no start delay), so its handlers run from the first message.
        waiting = f"waiting-{uuid.uuid4().hex[:8]}"
        now = datetime.now(UTC)
        raw = {
            "id": waiting,
            "name": "hostile-target",
            "handler": "log",
            "run_at": now + timedelta(hours=1),
        }
        await dev_client.start_workflow(
            "JobWorkflow", parse_spec(raw, now, waiting), id=waiting, task_queue=queue
        )
        cron = await schedule(dev_client, queue, prefix="cron", handler="log", cron="0 3 * * *")
        dead = await park_poison(dev_client, queue)
        yield Targets(queue, dev_server.address, waiting, dead, cron)
    await end_singletons(dev_client)


# -- what a workflow records, and its health ---------------------------------------------------


async def rejections(client: Client, workflow_id: str) -> int:
    """How many dropped messages the workflow has recorded (for a job or cron: in a row, its
    latest audit entry)."""
    if workflow_id == DLQ_WORKFLOW_ID:
        state: DlqState = await client.get_workflow_handle(workflow_id).query(
            "state", result_type=DlqState
        )
        return state.totals.get("rejected", 0)
    if workflow_id == REGISTRY_WORKFLOW_ID:
        found = re.match(r"(\d+) invalid message", await registry_details(client))
        return int(found.group(1)) if found else 0
    report = await operations.status(client, workflow_id)
    audit = report.audit
    if not audit or audit[-1].action != "rejected":
        return 0
    found = _STREAK.match(audit[-1].detail or "")
    return int(found.group(1)) if found else 1


async def latest_rejection(client: Client, workflow_id: str) -> str:
    """The reason the workflow recorded for the latest message it dropped."""
    handle = client.get_workflow_handle(workflow_id)
    if workflow_id == DLQ_WORKFLOW_ID:
        state: DlqState = await handle.query("state", result_type=DlqState)
        return next(line.detail for line in reversed(state.log) if line.action == "rejected")
    if workflow_id == REGISTRY_WORKFLOW_ID:
        return await registry_details(client)
    report = await operations.status(client, workflow_id)
    return report.audit[-1].detail or ""


async def registry_details(client: Client) -> str:
    """The registry's current details (the Web UI's text): its count of dropped messages."""
    handle = client.get_workflow_handle(REGISTRY_WORKFLOW_ID)
    metadata: WorkflowMetadata = await handle.query(
        "__temporal_workflow_metadata", result_type=WorkflowMetadata
    )
    return metadata.current_details


async def assert_healthy(client: Client, workflow_id: str) -> None:
    """A query answers, and no workflow task of the current run has failed, but for the
    server's own closes under a signal flood (CLOSE_REFUSED: a continue-as-new refused for
    newer signals, or buffered signals flushed by force), which the next task recovers from."""
    handle = client.get_workflow_handle(workflow_id)
    if workflow_id == REGISTRY_WORKFLOW_ID:
        assert "log" in await handle.query("handlers", result_type=list[str])
    elif workflow_id == DLQ_WORKFLOW_ID:
        await handle.query("state", result_type=DlqState)
    else:
        report = await operations.status(client, workflow_id)
        assert isinstance(report, JobReport | CronReport)
    history = await handle.fetch_history()
    failed = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        and e.workflow_task_failed_event_attributes.cause not in CLOSE_REFUSED
    ]
    assert not failed, f"workflow task failed: {failed[0].workflow_task_failed_event_attributes}"


async def still_works(client: Client, targets: Targets) -> None:
    """A normal job runs on time, and a real requeue through the DLQ (bare CLI) works."""
    await normal_job_completes(client, targets.queue)
    await requeue_by_cli(client, targets.address, await park_poison(client, targets.queue))
    for workflow_id in (DLQ_WORKFLOW_ID, REGISTRY_WORKFLOW_ID, targets.waiting, targets.cron):
        await assert_healthy(client, workflow_id)


# -- the cases -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One hostile message: ``target`` names a Targets field or a singleton, ``inputs`` are
    JSON texts (one --input each; a str prefixed "@" is written to a file, --input-file),
    ``expect`` a fragment of the recorded reason (signal) or of the CLI's answer."""

    target: str
    kind: str  # signal | update | query
    name: str
    inputs: tuple[str, ...]
    expect: str
    refused: bool = True  # update/query: the CLI answers an error (else the query answers)

    def __str__(self) -> str:
        shown = " ".join(i[:24] for i in self.inputs) or "(no input)"
        return f"{self.target}:{self.kind}:{self.name}:{shown}"


def js(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


NOW = datetime.now(UTC)
ENTRY = {
    "job_id": "some-job",
    "name": "n",
    "handler": "log",
    "attempts": 1,
    "parked_at": NOW.isoformat(),
}
RELEASE = {"job_id": "some-job", "action": "requeue", "applied": True, "status": "dead", "round": 1}
PUBLISH = {"worker": "w", "handlers": ["log"], "published_at": NOW.isoformat()}
NOTE_600 = {"job_id": "some-job", "note": "n" * 600}
ACTOR_300 = {"job_id": "some-job", "actor": "a" * 300}

DLQ_SIGNALS = [
    Case("dlq", "signal", "requeue", (js(LONG_ID),), "is not a job id"),
    Case("dlq", "signal", "requeue", ("@" + "y" * 300_000,), "is not a job id"),
    Case("dlq", "signal", "requeue", (js(""),), "no job id given"),
    Case("dlq", "signal", "requeue", ("null",), "(got null)"),
    Case("dlq", "signal", "requeue", (js({"x": 1}),), "no job id given"),
    Case("dlq", "signal", "requeue", ("[1, 2]",), "(got [1, 2])"),
    Case("dlq", "signal", "requeue", ("42",), "(got 42)"),
    Case("dlq", "signal", "requeue", (js(DLQ_WORKFLOW_ID),), "reserved"),
    Case("dlq", "signal", "requeue", (js(REGISTRY_WORKFLOW_ID),), "reserved"),
    Case("dlq", "signal", "requeue", (js(NOTE_600),), "note is 600 characters"),
    Case("dlq", "signal", "requeue", (js(ACTOR_300),), "actor must be"),
    Case("dlq", "signal", "requeue", (js("job with spaces"),), "is not a job id"),
    Case("dlq", "signal", "requeue", (js("ünïcødé-✓"),), "is not a job id"),
    Case("dlq", "signal", "requeue", (), "takes exactly one argument (got 0)"),
    Case("dlq", "signal", "requeue", (js("a"), js("b")), "takes exactly one argument (got 2)"),
    Case("dlq", "signal", "discard", (js(LONG_ID),), "is not a job id"),
    Case("dlq", "signal", "discard", (js({"job_id": {"nested": [[[]]]}}),), "discard: "),
    Case("dlq", "signal", "park", (js({"job_id": "x"}),), "Field required"),
    Case("dlq", "signal", "park", (js({**ENTRY, "job_id": LONG_ID}),), "is not a job id"),
    Case("dlq", "signal", "park", (js({**ENTRY, "name": "n" * 10_000}),), "must be 1-200"),
    Case("dlq", "signal", "park", (js({**ENTRY, "parked_at": "0001-01-01T00:00:00Z"}),), "1970"),
    Case("dlq", "signal", "park", (js({**ENTRY, "attempts": -5}),), "impossible"),
    Case("dlq", "signal", "park", (js({**ENTRY, "attempts": "many"}),), "attempts"),
    Case("dlq", "signal", "park", (js({**ENTRY, "round": "first"}),), "round"),
    Case("dlq", "signal", "job_released", (js({**RELEASE, "job_id": LONG_ID}),), "not a job id"),
    Case("dlq", "signal", "job_released", (js("garbage"),), '(got "garbage")'),
    Case("dlq", "signal", "job_released", (js({**RELEASE, "action": "explode"}),), "action"),
    Case("dlq", "signal", "frobnicate", (js("x"),), "unknown signal"),
    Case("dlq", "query", "entries", ("-1",), "QueryResult", refused=False),
    Case("dlq", "query", "entries", ("1000000000000",), "QueryResult", refused=False),
    Case("dlq", "query", "entries", (js("abc"),), "limit must be an integer"),
    Case("dlq", "query", "entries", ("1.5",), "limit must be an integer"),
    Case("dlq", "query", "log", ("-5",), "QueryResult", refused=False),
    Case("dlq", "query", "log", ("null",), "limit must be an integer"),
    Case("dlq", "query", "entries", ("1", "2"), "positional argument"),
    Case("dlq", "query", "no-such-query", (), "no-such-query"),
]

JOB_MESSAGES = [
    Case("waiting", "update", "pause", (js({"until": "9999-12-31T23:59:59Z"}),), "10 years"),
    Case("waiting", "update", "pause", (js({"until": "0001-01-01T00:00:00Z"}),), "1970"),
    Case("waiting", "update", "pause", (js({"until": "not a date"}),), "ISO-8601"),
    Case("waiting", "update", "pause", (js({"until": "2030-01-01T00:00:00"}),), "offset"),
    Case("waiting", "update", "pause", (js({"until": "2000-01-01T00:00:00Z"}),), "in the past"),
    Case("waiting", "update", "pause", (js({"actor": "a" * 300}),), "actor must be"),
    Case("waiting", "update", "pause", (js({"note": "n" * 600}),), "note is 600"),
    Case("waiting", "update", "pause", ("[1, 2]",), "PauseRequest"),
    Case("waiting", "update", "pause", (), "argument"),
    Case("waiting", "update", "resume", ("{}",), "cannot resume"),
    Case("waiting", "update", "trigger", (js({"note": "n" * 600}),), "note is 600"),
    Case("waiting", "update", "trigger", (js({"actor": 5}),), "actor"),
    Case("waiting", "update", "explode", ("{}",), "explode"),
    Case("waiting", "signal", "cancel_requested", (js({"actor": "a" * 300}),), "actor must be"),
    Case("waiting", "signal", "cancel_requested", ("[1]",), "(got [1])"),
    Case("waiting", "signal", "cancel_requested", ("{}", "{}"), "at most one argument (got 2)"),
    Case("waiting", "signal", "requeue", (js({"note": "n" * 600}),), "note is 600"),
    Case("waiting", "signal", "requeue", ("42",), "(got 42)"),
    Case("waiting", "signal", "discard", (js({"actor": ["x"]}),), "actor"),
    Case("waiting", "signal", "fly", (), "unknown signal"),
    Case("waiting", "query", "status", (js("x"),), "QueryResult", refused=False),
    Case("dead", "signal", "requeue", (js({"note": "n" * 600}),), "note is 600"),
    Case("dead", "signal", "discard", ("[[[[]]]]",), "discard: "),
    Case("dead", "signal", "requeue", (js("ünï"), "1", "2"), "at most one argument (got 3)"),
    # The pre-1.0 shape (a bare source string) is refused, not taken as a requeue.
    Case("dead", "signal", "requeue", (js("dead-letter-queue"),), "instance of ReleaseRequest"),
]

CRON_MESSAGES = [
    Case("cron", "update", "pause", (js({"until": "9999-12-31T23:59:59Z"}),), "10 years"),
    Case("cron", "update", "pause", (js({"until": "2000-01-01T00:00:00Z"}),), "in the past"),
    Case("cron", "update", "update", (js({"cron": "0 0 30 2 *"}),), "can never fire"),
    Case("cron", "update", "update", (js({"timezone": "Mars/Olympus"}),), "Mars/Olympus"),
    Case("cron", "update", "update", (js({"overlap": "explode"}),), "overlap"),
    Case("cron", "update", "update", (js({"note": "n" * 600}),), "note is 600"),
    Case("cron", "update", "update", (js({"bogus": 1}),), "bogus"),
    Case("cron", "update", "resume", (), "not paused"),
    Case("cron", "update", "trigger", (js({"actor": "a" * 300}),), "actor must be"),
    Case("cron", "signal", "cancel_requested", (js("x"),), '(got "x")'),
    Case("cron", "signal", "slot_finished", (js({"job_id": "x", "status": "exploded"}),), "status"),
    Case("cron", "signal", "slot_finished", ("null",), "slot_finished"),
    Case("cron", "signal", "slot_finished", (), "exactly one argument (got 0)"),
    Case("cron", "signal", "requeue", (js("x"),), "unknown signal"),
    Case("cron", "query", "status", ("1",), "QueryResult", refused=False),
]

REGISTRY_MESSAGES = [
    Case(
        "registry",
        "signal",
        "publish",
        (js({**PUBLISH, "handlers": ["log"] * 1001}),),
        "limit is 1000",
    ),
    Case(
        "registry",
        "signal",
        "publish",
        (js({**PUBLISH, "handlers": ["bad name!"]}),),
        "not a handler name",
    ),
    Case("registry", "signal", "publish", (js({**PUBLISH, "worker": ""}),), "worker must be"),
    Case(
        "registry",
        "signal",
        "publish",
        (js({**PUBLISH, "worker": "w" * 10_000}),),
        "worker must be",
    ),
    Case(
        "registry",
        "signal",
        "publish",
        (js({**PUBLISH, "published_at": "9999-12-31T00:00:00Z"}),),
        "a day ahead",
    ),
    Case("registry", "signal", "publish", (js("x"),), "publish"),
    Case("registry", "signal", "publish", (), "exactly one argument"),
    Case("registry", "signal", "forget", ("{}",), "unknown signal"),
    Case("registry", "query", "handlers", ("1",), "QueryResult", refused=False),
]


def workflow_id(targets: Targets, case: Case) -> str:
    singletons = {"dlq": DLQ_WORKFLOW_ID, "registry": REGISTRY_WORKFLOW_ID}
    return singletons.get(case.target) or str(getattr(targets, case.target))


def cli_args(case: Case, target_id: str, tmp_path: Path) -> list[str]:
    verb = {"signal": ["signal"], "update": ["update", "execute"], "query": ["query"]}
    args = ["workflow", *verb[case.kind], "--workflow-id", target_id, "--name", case.name]
    for index, text in enumerate(case.inputs):
        if text.startswith("@"):  # too big for a command line: a file of JSON
            path = tmp_path / f"input-{index}.json"
            path.write_text(js(text[1:]))
            args += ["--input-file", str(path)]
        else:
            args += ["--input", text]
    return args


async def run_case(client: Client, targets: Targets, case: Case, tmp_path: Path) -> None:
    target_id = workflow_id(targets, case)
    before_started = await started_count(client, targets.queue)
    before = await rejections(client, target_id) if case.kind == "signal" else 0
    answer = await asyncio.to_thread(
        temporal, targets.address, *cli_args(case, target_id, tmp_path)
    )
    if case.kind == "signal":
        assert answer.returncode == 0, answer.stderr

        async def recorded() -> bool:
            return await rejections(client, target_id) > before

        await eventually(recorded, what=f"{case} recorded as rejected", timeout=RECORD_TIMEOUT)
        assert case.expect in await latest_rejection(client, target_id)
    elif case.refused:
        assert answer.returncode != 0, answer.stdout
        assert case.expect in answer.stderr, answer.stderr
    else:
        assert answer.returncode == 0, answer.stderr
        assert case.expect in answer.stdout, answer.stdout
    await assert_healthy(client, target_id)
    await assert_nothing_started(client, before_started, targets.queue)


@pytest.mark.parametrize("case", DLQ_SIGNALS, ids=str)
async def test_dlq(dev_client: Client, targets: Targets, case: Case, tmp_path: Path) -> None:
    await run_case(dev_client, targets, case, tmp_path)


async def test_dlq_family_leaves_everything_working(dev_client: Client, targets: Targets) -> None:
    await still_works(dev_client, targets)


@pytest.mark.parametrize("case", JOB_MESSAGES, ids=str)
async def test_job(dev_client: Client, targets: Targets, case: Case, tmp_path: Path) -> None:
    await run_case(dev_client, targets, case, tmp_path)


async def test_job_family_leaves_everything_working(dev_client: Client, targets: Targets) -> None:
    assert (await operations.status(dev_client, targets.waiting)).status == JobStatus.SCHEDULED
    assert (await operations.status(dev_client, targets.dead)).status == JobStatus.DEAD
    await still_works(dev_client, targets)


@pytest.mark.parametrize("case", CRON_MESSAGES, ids=str)
async def test_cron(dev_client: Client, targets: Targets, case: Case, tmp_path: Path) -> None:
    await run_case(dev_client, targets, case, tmp_path)


async def test_cron_family_leaves_everything_working(dev_client: Client, targets: Targets) -> None:
    report = await operations.status(dev_client, targets.cron)
    assert report.status == JobStatus.SCHEDULED
    await still_works(dev_client, targets)


@pytest.mark.parametrize("case", REGISTRY_MESSAGES, ids=str)
async def test_registry(dev_client: Client, targets: Targets, case: Case, tmp_path: Path) -> None:
    await run_case(dev_client, targets, case, tmp_path)


async def test_registry_family_leaves_everything_working(
    dev_client: Client, targets: Targets
) -> None:
    handle = dev_client.get_workflow_handle(REGISTRY_WORKFLOW_ID)
    assert await handle.query("handlers", result_type=list[str]) == ["log"]
    await still_works(dev_client, targets)


# -- workflows started by hand with a bad input ----------------------------------------------------

SPEC = {"name": "n", "handler": "log", "run_at": (NOW + timedelta(hours=1)).isoformat()}
CRON = {"name": "n", "handler": "log", "cron": "0 3 * * *"}
INVALID = "InvalidWorkflowInput"
DEEP: Any = []
for _ in range(80):
    DEEP = [DEEP]


@dataclass(frozen=True)
class Start:
    workflow_type: str
    inputs: tuple[Any, ...]  # values, one --input each
    expect: str  # a fragment of the failure message
    failure_type: str = INVALID

    def __str__(self) -> str:
        # The test id: what is refused and why. Not the inputs, which carry random job ids:
        # every run, and every pytest-xdist worker, must collect the same ids.
        return f"{self.workflow_type}:{self.expect}"


def spec(**fields: Any) -> dict[str, Any]:
    return {"id": f"hand-{uuid.uuid4().hex[:6]}", **SPEC, **fields}


def cron(spec_fields: dict[str, Any] | None = None, **start: Any) -> dict[str, Any]:
    return {"spec": {"id": f"hand-{uuid.uuid4().hex[:6]}", **CRON, **(spec_fields or {})}, **start}


STARTS = [
    Start("JobWorkflow", (), "takes exactly one argument (got 0)"),
    Start("JobWorkflow", (spec(), spec()), "takes exactly one argument (got 2)"),
    Start("JobWorkflow", ({"x": 1},), "Field required"),
    Start("JobWorkflow", ([1, 2],), "should be an object"),
    Start("JobWorkflow", (None,), "should be an object"),
    Start("JobWorkflow", (spec(run_at="0001-01-01T00:00:00Z"),), "1970"),
    Start("JobWorkflow", (spec(run_at="9999-12-31T23:59:59Z"),), "at most 10 years ahead"),
    Start("JobWorkflow", (spec(run_at="2030-01-01T00:00:00"),), "offset"),
    Start("JobWorkflow", ({**spec(), "run_at": None, "cron": "0 3 * * *"},), "needs run_at"),
    Start("JobWorkflow", (spec(id=DLQ_WORKFLOW_ID),), "reserved"),
    Start("JobWorkflow", (spec(id=""),), "not a job id"),
    Start("JobWorkflow", (spec(max_attempts=10**6),), "max_attempts"),
    Start(
        "JobWorkflow",
        (spec(payload={"deep": DEEP}),),
        "payload",
    ),
    Start("CronJobWorkflow", (), "takes exactly one argument"),
    Start("CronJobWorkflow", (cron({"cron": "0 0 30 2 *"}),), "can never fire"),
    Start("CronJobWorkflow", (cron({"cron": "61 * * * *"}),), "cron"),
    Start("CronJobWorkflow", (cron(event_budget=0),), "event_budget"),
    Start("CronJobWorkflow", (cron({"cron": None, "run_at": SPEC["run_at"]}),), "needs cron"),
    Start(
        "CronJobWorkflow", (cron(state={"running": {LONG_ID: NOW.isoformat()}}),), "not a job id"
    ),
    Start(
        "CronJobWorkflow",
        (cron(state={"last_slot": "9999-12-31T23:00:00Z"}),),
        "has no slot after",
        "CronHasNoNextSlot",
    ),
    Start("DeadLetterQueueWorkflow", ({"entries": 5},), "entries"),
    Start("DeadLetterQueueWorkflow", ("x", "y"), "takes exactly one argument (got 2)"),
    Start("HandlerRegistryWorkflow", ("x",), "valid array"),
]


@pytest.mark.parametrize("start", STARTS, ids=str)
async def test_start(dev_client: Client, targets: Targets, start: Start, tmp_path: Path) -> None:
    before = await started_count(dev_client, targets.queue, every_type=True)
    workflow = f"hand-started-{uuid.uuid4().hex[:8]}"
    args = ["workflow", "start", "--type", start.workflow_type, "--task-queue", targets.queue]
    args += ["--workflow-id", workflow]
    for value in start.inputs:
        args += ["--input", json.dumps(value, allow_nan=True)]
    answer = await asyncio.to_thread(temporal, targets.address, *args)
    assert answer.returncode == 0, answer.stderr
    handle = dev_client.get_workflow_handle(workflow)
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), RECORD_TIMEOUT)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == start.failure_type and cause.non_retryable
    assert start.expect in cause.message, cause.message
    history = await handle.fetch_history()
    types = [e.event_type for e in history.events]
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in types
    # Only the workflow started here: no child, no slot job.
    assert await started_count(dev_client, targets.queue, every_type=True) == before + 1


async def test_start_family_leaves_everything_working(dev_client: Client, targets: Targets) -> None:
    await still_works(dev_client, targets)


# The flood's own server: one run accepts FLOOD_SIGNAL_LIMIT signals (Temporal's default is
# 10,000) and is told to continue as new after ~1,000 events, so 2,400 invalid requeues prove
# what 10,800 did against the defaults (a run that did not roll over would refuse the rest)
# in a fifth of the time.
FLOOD_SIGNAL_LIMIT = 1_500
FLOOD_DYNAMIC_CONFIG: dict[str, object] = {
    "history.maximumSignalsPerExecution": FLOOD_SIGNAL_LIMIT,
    "limit.historyCount.suggestContinueAsNew": 1_000,
}


@pytest.mark.timeout(400)  # FLOOD_TIMEOUT (240 s) for the DLQ to count the flood
async def test_a_flood_of_invalid_signals_rolls_the_dlq_over() -> None:
    """More invalid requeues than one DLQ run may receive, in waves: it continues as new,
    loses no count and fails no workflow task; a park and a requeue still work after."""
    server = DevServer(db_file=None, dynamic_config=FLOOD_DYNAMIC_CONFIG)
    client = await server.start()
    queue = f"flood-{uuid.uuid4().hex[:8]}"
    try:
        async with running_worker(client, queue):
            await park_poison(client, queue)  # the DLQ is running from here on
            handle = client.get_workflow_handle(DLQ_WORKFLOW_ID)
            generation = (await handle.query("state", result_type=DlqState)).generation
            await flood(handle, waves=6, wave=400)
            state: DlqState = await handle.query("state", result_type=DlqState)
            assert FLOOD_SIGNAL_LIMIT < 6 * 400  # more than one run could take
            assert state.generation > generation  # continued as new at least once
            assert len(state.log) <= 500
            await assert_no_task_failed_in_any_run(client)
            await normal_job_completes(client, queue)
            await requeue_by_cli(client, server.address, await park_poison(client, queue))
    finally:
        server.stop()


async def flood(handle: WorkflowHandle[Any, Any], waves: int, wave: int) -> None:
    """``waves`` times ``wave`` invalid requeues (64 in flight); after each wave, wait until the
    DLQ has counted every one of them so far."""
    start: DlqState = await handle.query("state", result_type=DlqState)
    gate = asyncio.Semaphore(64)

    async def send(index: int) -> None:
        async with gate:
            await handle.signal("requeue", f"not a job id #{index}")

    for number in range(waves):
        await asyncio.gather(*(send(number * wave + i) for i in range(wave)))
        expected = start.totals.get("rejected", 0) + (number + 1) * wave

        async def counted(expected: int = expected) -> bool:
            state: DlqState = await handle.query("state", result_type=DlqState)
            return state.totals.get("rejected", 0) >= expected

        await eventually(
            counted, what=f"{(number + 1) * wave} rejections counted", timeout=FLOOD_TIMEOUT
        )


async def assert_no_task_failed_in_any_run(client: Client) -> None:
    """No DLQ run failed a workflow task, but for the server's refused closes (CLOSE_REFUSED)."""
    async for execution in client.list_workflows(f'WorkflowId = "{DLQ_WORKFLOW_ID}"'):
        history = await client.get_workflow_handle(
            DLQ_WORKFLOW_ID, run_id=execution.run_id
        ).fetch_history()
        causes = {
            e.workflow_task_failed_event_attributes.cause
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        }
        assert causes <= CLOSE_REFUSED, causes


async def requeue_by_cli(client: Client, address: str, job_id: str) -> None:
    """A real requeue through the DLQ with the bare ``temporal`` CLI; the job then runs."""
    sent = temporal_signal(address, DLQ_WORKFLOW_ID, "requeue", job_id)
    assert sent.returncode == 0, sent.stderr
    await wait_status(client, job_id, "done")
