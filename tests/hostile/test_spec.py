"""Hostile specs and control arguments through the operations library (the door the CLI, the
API and Python callers share): dates out of range, loose types, non-finite numbers, deep or
broken payloads, reserved ids. Each case asserts the SpecError (field and reason), that
nothing started, and each family ends with a normal job that still runs."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus

from jobctl.activities.registry import load_handlers
from jobctl.starter import board, dlq, operations
from jobctl.starter.errors import JobNotFound, SpecError
from jobctl.worker import WorkerSettings, publish_handlers
from jobctl.workflows.models import (
    JOB_STATUS,
    MAX_PAYLOAD_DEPTH,
    RESERVED_IDS,
    CronUpdate,
    JobSpec,
    JobStatus,
)
from jobctl.workflows.names import DLQ_WORKFLOW_ID, REGISTRY_WORKFLOW_ID
from jobctl.workflows.registry_workflow import HandlerRegistryWorkflow
from tests.helpers.poll import eventually
from tests.helpers.temporal import end_singletons, running_worker
from tests.hostile.common import (
    assert_nothing_started,
    normal_job_completes,
    started_count,
)

pytestmark = pytest.mark.devserver

QUEUE = f"hostile-spec-{uuid.uuid4().hex[:8]}"
HANDLERS = {"log"}
BASE: dict[str, Any] = {"name": "hostile", "handler": "log", "delay": 60}
NOW = datetime.now(UTC)
ELEVEN_YEARS = (NOW + timedelta(days=11 * 366)).isoformat()
NINE_YEARS = NOW + timedelta(days=9 * 365)


def nested(depth: int) -> dict[str, Any]:
    """A payload object ``depth`` levels deep (the payload itself is level 1)."""
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def nested_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def spec(**fields: Any) -> dict[str, Any]:
    """BASE with ``fields``; a run_at or cron replaces the delay."""
    data = {**BASE, **fields}
    if ("run_at" in fields or "cron" in fields) and "delay" not in fields:
        del data["delay"]
    return data


@pytest.fixture(scope="module")
async def client(dev_client: Client) -> AsyncIterator[Client]:
    """The session's dev server; the singletons this module starts end with it."""
    yield dev_client
    await end_singletons(dev_client)


async def refused(client: Client, data: dict[str, Any]) -> list[tuple[str, str]]:
    """Schedule through the library; return the problems, after checking nothing started."""
    before = await started_count(client, QUEUE)
    with pytest.raises(SpecError) as err:
        await operations.schedule(client, data, handlers=HANDLERS, task_queue=QUEUE)
    await assert_nothing_started(client, before, QUEUE)
    return err.value.problems


def assert_problem(problems: list[tuple[str, str]], field: str, reason: str) -> None:
    assert any(f == field and reason in r for f, r in problems), problems


async def normal_job_runs(client: Client) -> None:
    async with running_worker(client, QUEUE):
        await normal_job_completes(client, QUEUE)


# -- dates ----------------------------------------------------------------------------------

BEFORE_1970 = "must not be before 1970-01-01T00:00:00Z"
TEN_YEARS = "must be at most 10 years ahead"
ISO = "must be an ISO-8601 date-time with an offset"
OFFSET = "must include a timezone offset"

DATES = [
    ("year 1", "0001-01-01T00:00:00Z", BEFORE_1970),
    ("year 1 with an offset (no UTC instant)", "0001-01-01T00:00:00+01:00", BEFORE_1970),
    ("a second before 1970", "1969-12-31T23:59:59Z", BEFORE_1970),
    ("year 9999", "9999-06-01T00:00:00Z", TEN_YEARS),
    ("year 9999 west of UTC (no UTC instant)", "9999-12-31T23:59:59-14:00", TEN_YEARS),
    ("eleven years ahead", ELEVEN_YEARS, TEN_YEARS),
    ("naive", "2030-01-01T09:00:00", OFFSET),
    ("a date without a time", "2030-01-01", OFFSET),
    ("Unix time as a number", 1900000000, ISO),
    ("Unix time as a float", 1900000000.5, ISO),
    ("Unix time as a string", "1900000000", ISO),
    ("a bool", True, ISO),
    ("words", "tomorrow at nine", ISO),
    ("an object", {"year": 2030}, ISO),
    ("a naive datetime object", datetime(2030, 1, 1, 9), OFFSET),
    ("an aware datetime before 1970", datetime(1960, 1, 1, tzinfo=UTC), BEFORE_1970),
]


@pytest.mark.parametrize(("run_at", "reason"), [d[1:] for d in DATES], ids=[d[0] for d in DATES])
async def test_run_at_out_of_range_or_not_iso_is_refused(
    client: Client, run_at: Any, reason: str
) -> None:
    assert_problem(await refused(client, spec(run_at=run_at)), "run_at", reason)


def test_the_range_is_inclusive_at_1970_and_nine_years_ahead_is_fine() -> None:
    now = datetime.now(UTC)
    lowercase = NINE_YEARS.strftime("%Y-%m-%dt%H:%M:%Sz")  # RFC 3339 allows "t" and "z"
    for run_at in ("1970-01-01T00:00:00Z", NINE_YEARS.isoformat(), NINE_YEARS, lowercase):
        assert operations.validate_spec(spec(run_at=run_at), HANDLERS, now).run_at


CRON_FIELDS_AT_DEFAULT = [
    ("dst_gap", "shift"),
    ("overlap", "skip"),
    ("catchup_window", 60),
    ("schedule_jitter", 0),
]


@pytest.mark.parametrize(("field", "value"), CRON_FIELDS_AT_DEFAULT, ids=str)
async def test_a_cron_only_field_on_a_one_shot_is_refused_even_at_its_default(
    client: Client, field: str, value: Any
) -> None:
    assert_problem(await refused(client, spec(**{field: value})), field, "only applies to cron")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (5, "greater than or equal to 10"),
        ("31d", "less than or equal to 2592000"),
        ("soon", ""),
        (True, ""),
        (float("inf"), ""),
    ],
    ids=["below 10 s", "above 30 days", "words", "a bool", "infinity"],
)
async def test_a_handler_wait_out_of_bounds_is_refused(
    client: Client, value: Any, reason: str
) -> None:
    assert_problem(await refused(client, spec(handler_wait=value)), "handler_wait", reason)


def test_a_recorded_one_shot_spec_with_every_field_set_still_decodes() -> None:
    """A workflow's recorded spec carries every field at its default: not a cron-only field
    given at the door, so it decodes."""
    recorded = JobSpec.model_validate(spec()).model_dump(mode="json")
    assert "dst_gap" in recorded and JobSpec.model_validate(recorded).cron is None


def test_data_decoded_without_a_clock_is_not_rejudged() -> None:
    """A workflow decodes its recorded input without a "now": neither the 10-year bound nor
    the backoff floor applies there (histories recorded before them still replay)."""
    old = JobSpec.model_validate(spec(run_at="2100-01-01T00:00:00Z", backoff_base=0.2))
    assert old.backoff_base == 0.2 and old.run_at and old.run_at.year == 2100


async def test_a_normal_job_still_runs_after_the_dates(client: Client) -> None:
    await normal_job_runs(client)


# -- strict numbers --------------------------------------------------------------------------

INTEGER = "Input should be a valid integer"
NUMBER = "Input should be a valid number"
FINITE = "Input should be a finite number"
FLOOR = "must be at least 1s"
CRON = {"cron": "0 3 * * *"}

NUMBERS = [
    ("max_attempts true", {"max_attempts": True}, "max_attempts", INTEGER),
    ("max_attempts false", {"max_attempts": False}, "max_attempts", INTEGER),
    ("max_attempts as text", {"max_attempts": "5"}, "max_attempts", INTEGER),
    ("max_attempts 2.0", {"max_attempts": 2.0}, "max_attempts", INTEGER),
    ("max_attempts 2.5", {"max_attempts": 2.5}, "max_attempts", INTEGER),
    ("jitter true", {"jitter": True}, "jitter", NUMBER),
    ("jitter as text", {"jitter": "0.5"}, "jitter", NUMBER),
    ("jitter NaN", {"jitter": float("nan")}, "jitter", FINITE),
    ("backoff_base true", {"backoff_base": True}, "backoff_base", NUMBER),
    ("backoff_max true", {"backoff_max": True}, "backoff_max", NUMBER),
    ("lease true", {"lease": True}, "lease", NUMBER),
    ("timeout true", {"timeout": True}, "timeout", NUMBER),
    ("dispatch_lead true", {"dispatch_lead": True}, "dispatch_lead", NUMBER),
    ("delay true", {"delay": True}, "delay", NUMBER),
    ("delay false", {"delay": False}, "delay", NUMBER),
    ("delay NaN text", {"delay": "nan"}, "delay", FINITE),
    ("delay infinity", {"delay": float("inf")}, "delay", FINITE),
    ("lease infinity text", {"lease": "inf"}, "lease", FINITE),
    ("catchup_window true", {**CRON, "catchup_window": True}, "catchup_window", NUMBER),
    ("schedule_jitter true", {**CRON, "schedule_jitter": True}, "schedule_jitter", NUMBER),
    ("backoff_base 0.5", {"backoff_base": 0.5}, "backoff_base", FLOOR),
    ("backoff_base 500ms", {"backoff_base": "500ms"}, "backoff_base", FLOOR),
    ("backoff_base 0.999", {"backoff_base": 0.999}, "backoff_base", FLOOR),
]


@pytest.mark.parametrize(
    ("fields", "field", "reason"), [n[1:] for n in NUMBERS], ids=[n[0] for n in NUMBERS]
)
async def test_loose_or_unhonourable_numbers_are_refused(
    client: Client, fields: dict[str, Any], field: str, reason: str
) -> None:
    assert_problem(await refused(client, spec(**fields)), field, reason)


def test_durations_still_take_text_and_one_second_is_the_floor() -> None:
    now = datetime.now(UTC)
    data = spec(delay="90s", backoff_base="1s", backoff_max="5m", lease=30, max_attempts=3)
    checked = operations.validate_spec(data, HANDLERS, now)
    assert (checked.backoff_base, checked.backoff_max, checked.lease) == (1, 300, 30)
    assert checked.run_at == now + timedelta(seconds=90)


async def test_a_normal_job_still_runs_after_the_numbers(client: Client) -> None:
    await normal_job_runs(client)


# -- payloads and text -------------------------------------------------------------------------

NOT_FINITE = "JSON numbers must be finite"
SURROGATE = "contains a lone surrogate"
DEEP = f"is nested more than {MAX_PAYLOAD_DEPTH} levels deep"
UNICODE = "unable to parse raw data as a unicode string"

PAYLOADS = [
    ("NaN", {"payload": {"x": float("nan")}}, "payload", NOT_FINITE),
    ("Infinity", {"payload": {"x": float("inf")}}, "payload", NOT_FINITE),
    ("-Infinity", {"payload": {"x": float("-inf")}}, "payload", NOT_FINITE),
    ("NaN deep in a list", {"payload": {"x": [1, {"y": float("nan")}]}}, "payload", NOT_FINITE),
    ("65 levels", {"payload": nested(MAX_PAYLOAD_DEPTH + 1)}, "payload", DEEP),
    ("500 levels", {"payload": nested(500)}, "payload", DEEP),
    ("100000 levels", {"payload": nested(100_000)}, "payload", DEEP),
    ("65 levels of lists", {"payload": {"x": nested_list(MAX_PAYLOAD_DEPTH)}}, "payload", DEEP),
    ("surrogate key", {"payload": {"\udc00": 1}}, "payload", SURROGATE),
    ("surrogate value", {"payload": {"x": ["ok", "\ud800"]}}, "payload", SURROGATE),
    ("surrogate name", {"name": "bad \ud800 name"}, "name", UNICODE),
    ("surrogate idempotency key", {"idempotency_key": "k\udfff"}, "idempotency_key", UNICODE),
    ("surrogate id", {"id": "job-\ud800"}, "id", "must be 1-200 characters"),
]


@pytest.mark.parametrize(
    ("fields", "field", "reason"), [p[1:] for p in PAYLOADS], ids=[p[0] for p in PAYLOADS]
)
async def test_broken_payloads_and_text_are_refused(
    client: Client, fields: dict[str, Any], field: str, reason: str
) -> None:
    assert_problem(await refused(client, spec(**fields)), field, reason)


async def test_a_payload_at_the_depth_limit_runs(client: Client) -> None:
    job_id = f"deep-{uuid.uuid4().hex[:8]}"
    data = spec(id=job_id, delay=0, payload=nested(MAX_PAYLOAD_DEPTH))
    async with running_worker(client, QUEUE):
        await operations.schedule(client, data, handlers=HANDLERS, task_queue=QUEUE)
        await wait_status(client, job_id, JobStatus.DONE)
        await normal_job_completes(client, QUEUE)


async def wait_status(client: Client, job_id: str, status: JobStatus) -> None:
    await eventually(
        lambda: operations.status(client, job_id),
        lambda report: report.status == status,
        what=f"{job_id} {status}",
    )


# -- reserved ids -------------------------------------------------------------------------------

RESERVED = "is reserved for the system"


@pytest.mark.parametrize("job_id", sorted(RESERVED_IDS))
@pytest.mark.parametrize("kind", ["one-shot", "cron"])
async def test_a_reserved_id_is_no_job_id(client: Client, job_id: str, kind: str) -> None:
    data = spec(id=job_id, **(CRON if kind == "cron" else {}))
    assert_problem(await refused(client, data), "id", RESERVED)


OPERATIONS: dict[str, Callable[[Client, str], Awaitable[Any]]] = {
    "status": lambda c, i: operations.status(c, i),
    "cancel": lambda c, i: operations.cancel(c, i, actor="hostile"),
    "pause": lambda c, i: operations.pause(c, i),
    "pause until": lambda c, i: operations.pause(c, i, until=NINE_YEARS),
    "resume": lambda c, i: operations.resume(c, i),
    "trigger": lambda c, i: operations.trigger(c, i),
    "update cron": lambda c, i: operations.update_cron(c, i, CronUpdate(cron="* * * * *")),
    "dlq requeue": lambda c, i: dlq.release(c, i, "requeue"),
    "dlq discard": lambda c, i: dlq.release(c, i, "discard"),
}


@pytest.fixture(scope="module")
async def singletons(client: Client) -> AsyncIterator[None]:
    """The DLQ (a job parked by a handler's permanent failure) and the handler registry, live."""
    async with running_worker(client, QUEUE):
        await publish_handlers(client, WorkerSettings(task_queue=QUEUE), load_handlers())
        job_id = f"parked-{uuid.uuid4().hex[:8]}"
        data = spec(id=job_id, handler="test.permanent", delay=0)
        await operations.schedule(client, data, handlers={"test.permanent"}, task_queue=QUEUE)
        await wait_status(client, job_id, JobStatus.DEAD)
        await eventually(
            lambda: dlq.recent_entries(client),
            lambda entries: job_id in {e.job_id for e in entries},
            what="the parked job in the DLQ index",
        )
    # No worker from here on: a cancellation that reached them would still be recorded.
    yield


@pytest.mark.parametrize("job_id", sorted(RESERVED_IDS))
@pytest.mark.parametrize("operation", list(OPERATIONS))
async def test_every_job_operation_refuses_a_reserved_id(
    client: Client, singletons: None, job_id: str, operation: str
) -> None:
    with pytest.raises(SpecError) as err:
        await OPERATIONS[operation](client, job_id)
    reason = f"{job_id!r} {RESERVED} ({RESERVED_IDS[job_id]}); it is not a job"
    assert err.value.problems == [("job_id", reason)]


async def test_the_singletons_were_never_touched(client: Client, singletons: None) -> None:
    for singleton in (DLQ_WORKFLOW_ID, REGISTRY_WORKFLOW_ID):
        handle = client.get_workflow_handle(singleton)
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        kinds = {event.event_type async for event in handle.fetch_history_events()}
        assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED not in kinds
    async with running_worker(client, QUEUE):  # the DLQ's query still answers, with the job
        assert [e.job_id for e in await dlq.recent_entries(client)][-1].startswith("parked-")


async def test_a_workflow_that_is_not_a_job_is_not_found(client: Client) -> None:
    other = f"not-a-job-{uuid.uuid4().hex[:8]}"
    handle = await client.start_workflow(
        HandlerRegistryWorkflow.run, [], id=other, task_queue=QUEUE
    )
    try:
        for call in (operations.status, operations.trigger, operations.cancel):
            with pytest.raises(JobNotFound, match="HandlerRegistryWorkflow"):
                await call(client, other)
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    finally:
        await handle.terminate("test over")


async def test_system_workflows_never_appear_in_listings_or_the_board(
    client: Client, singletons: None
) -> None:
    listed = {row.job_id for row in (await operations.list_jobs(client, limit=1000)).jobs}
    for status in JobStatus:
        page = await operations.list_jobs(client, status=status.value, limit=1000)
        listed |= {row.job_id for row in page.jobs}
    snapshot = await board.Snapshot(client, datetime.now(UTC)).build()
    on_board = {card.job_id for column in snapshot.columns.values() for card in column.cards}
    assert listed and on_board  # the parked job at least: the listings are not empty
    assert not (listed | on_board) & set(RESERVED_IDS)


async def test_a_normal_job_still_runs_after_the_reserved_ids(
    client: Client, singletons: None
) -> None:
    await normal_job_runs(client)


# -- control arguments ---------------------------------------------------------------------------

UNTIL = [
    ("year 1", "0001-01-01T00:00:00Z", BEFORE_1970),
    ("year 9999", "9999-06-01T00:00:00Z", TEN_YEARS),
    ("eleven years ahead", ELEVEN_YEARS, TEN_YEARS),
    ("Unix time as text", "1900000000", ISO),
    ("Unix time as a number", 1900000000, ISO),
    ("naive", "2030-01-01T09:00:00", OFFSET),
]


@pytest.fixture(scope="module")
async def waiting_job(client: Client) -> str:
    job_id = f"waiting-{uuid.uuid4().hex[:8]}"
    data = spec(id=job_id, delay="1h")
    await operations.schedule(client, data, handlers=HANDLERS, task_queue=QUEUE)
    return job_id


@pytest.mark.parametrize(("until", "reason"), [u[1:] for u in UNTIL], ids=[u[0] for u in UNTIL])
async def test_pause_until_out_of_range_is_refused(
    client: Client, waiting_job: str, until: Any, reason: str
) -> None:
    before = await started_count(client, QUEUE)
    with pytest.raises(SpecError) as err:
        await operations.pause(client, waiting_job, until=until)
    assert_problem(err.value.problems, "until", reason)
    await assert_nothing_started(client, before, QUEUE)
    desc = await client.get_workflow_handle(waiting_job).describe()
    assert desc.typed_search_attributes.get(JOB_STATUS) == JobStatus.SCHEDULED


PREVIEWS = [
    ("year 9999", "* * * * *", "9999-06-01T00:00:00Z", 5, TEN_YEARS),
    ("year 1", "* * * * *", "0001-01-01T00:00:00Z", 5, BEFORE_1970),
    ("Unix time", "* * * * *", "1900000000", 5, ISO),
    ("naive", "* * * * *", "2030-01-01T00:00:00", 5, OFFSET),
    ("slots past year 9999", "0 0 29 2 *", NINE_YEARS.isoformat(), 3000, "ask for fewer"),
]


@pytest.mark.parametrize(
    ("expr", "after", "count", "reason"), [p[1:] for p in PREVIEWS], ids=[p[0] for p in PREVIEWS]
)
def test_cron_preview_after_out_of_range_is_refused(
    expr: str, after: str, count: int, reason: str
) -> None:
    with pytest.raises(SpecError) as err:
        operations.preview_cron(expr, "UTC", after, count)
    assert_problem(err.value.problems, "after", reason)


async def test_a_normal_job_still_runs_after_the_control_arguments(
    client: Client, waiting_job: str
) -> None:
    await normal_job_runs(client)
