"""Typed handlers (``@handler(name, payload=Model)``): the handler gets the model instance,
the worker checks the payload again, the CLI, the API and the operations library refuse a
payload that does not match the published schema (nothing started), and ``GET /handlers`` /
``jobctl handlers`` list names, schemas and serving workers.

The dev-server tests share one ``jobctl worker`` process serving tests.typed_handlers on this
module's task queue; the API runs in this process (no handler module is imported for it to
validate: it reads the schema the worker published). Pure tests need no server.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from jobctl.activities.context import DuplicateHandler, HandlerRegistry, JobContext, PermanentError
from jobctl.starter import operations
from jobctl.starter.api import create_app
from jobctl.starter.dev.devserver import DevServer
from jobctl.starter.errors import SpecError
from jobctl.starter.operations.handlers import HandlerCatalog, catalog_of
from jobctl.workflows import inbox
from jobctl.workflows.models import WorkerHandlers
from jobctl.workflows.models.registry import MAX_SCHEMA, MAX_SCHEMAS
from tests.handlers import record
from tests.helpers.cli import jobs_here
from tests.helpers.poll import eventually
from tests.helpers.processes import Workers, cli_env
from tests.helpers.temporal import end_singletons
from tests.hostile.common import assert_nothing_started, started_count
from tests.typed_handlers import CHARGE, RECEIPT, ChargeRequest, charge

MODULES = "tests.handlers,tests.typed_handlers"
GOOD = {"customer": "ada", "amount_cents": 200}


@dataclass(frozen=True)
class Typed:
    """A worker serving the typed handlers on ``queue``; ``env`` for CLI calls."""

    client: Client
    queue: str
    env: dict[str, str]
    worker: str  # its identity


@pytest.fixture(scope="module")
async def typed(
    dev_server: DevServer, dev_client: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Typed]:
    queue = f"typed-{uuid.uuid4().hex[:8]}"
    env = cli_env(dev_server.address, queue, JOBS_HANDLER_MODULES=MODULES)
    workers = Workers(env, tmp_path_factory.mktemp("typed-workers"))
    proc = workers.start()
    try:
        await eventually(  # the worker published before it polled; wait for the registry
            lambda: operations.known_handlers(dev_client, queue),
            lambda known: known.schema(CHARGE) is not None,
            what="the typed handler's schema published",
        )
        yield Typed(dev_client, queue, env, workers.identity(proc))
    finally:
        workers.stop_all()
        await end_singletons(dev_client)


def spec(payload: Any, handler: str = CHARGE, **extra: Any) -> dict[str, Any]:
    job_id = f"typed-{uuid.uuid4().hex[:10]}"
    return {"id": job_id, "name": "typed", "handler": handler, "payload": payload, **extra}


async def finished(typed: Typed, data: dict[str, Any], status: str) -> Any:
    now = datetime.now(UTC)
    await operations.schedule(typed.client, data, now=now, task_queue=typed.queue)
    return await eventually(
        lambda: operations.status(typed.client, data["id"]),
        lambda report: report.status == status,
        timeout=60,
        what=f"{data['id']} {status}",
    )


def in_process(typed: Typed) -> httpx.AsyncClient:
    app = create_app(token="", client=typed.client, task_queue=typed.queue)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


# -- the worker side --------------------------------------------------------------------------


async def test_a_typed_handler_receives_the_model_instance(typed: Typed) -> None:
    report = await finished(typed, spec({**GOOD, "tags": ["vip"]}, delay=0), "done")
    assert report.result == {
        "type": "ChargeRequest",  # ctx.payload was the model, defaults filled in
        "customer": "ada",
        "amount_cents": 200,
        "currency": "EUR",
        "tags": ["vip"],
        "address": None,
    }
    receipt = await finished(typed, spec({"customer": "ada", "total": 2}, RECEIPT, delay=0), "done")
    assert receipt.result == {"customer": "ADA", "total": 4}  # an async handler's model result


async def test_a_payload_the_worker_refuses_goes_straight_to_the_dlq(typed: Typed) -> None:
    """Odd amounts pass the JSON schema (the door) but not the model's own validator: a
    PermanentError, one attempt of three, parked."""
    report = await finished(
        typed, spec({**GOOD, "amount_cents": 3}, delay=0, max_attempts=3), "dead"
    )
    assert len(report.attempts) == 1 and report.attempts[0].outcome == "failed"
    assert "payload does not match ChargeRequest" in (report.last_error or "")
    assert "amounts must be even" in (report.last_error or "")


async def test_untyped_handlers_keep_working(typed: Typed) -> None:
    report = await finished(typed, spec({"anything": [1, {"x": None}]}, "log", delay=0), "done")
    assert report.result == {"logged": True}


# -- the doors ----------------------------------------------------------------------------------

BAD = {"customer": 5, "extra": "x", "address": {"city": "", "zip": "abc"}}
BAD_FIELDS = {
    "payload.customer",
    "payload.amount_cents",
    "payload.extra",
    "payload.address.city",
    "payload.address.zip",
}


async def test_the_library_refuses_a_bad_payload(typed: Typed) -> None:
    before = await started_count(typed.client, typed.queue)
    with pytest.raises(SpecError) as refused:
        await operations.schedule(typed.client, spec(BAD, delay=0), task_queue=typed.queue)
    assert {field for field, _ in refused.value.problems} == BAD_FIELDS
    assert refused.value.exit_code == 2
    assert dict(refused.value.problems)["payload.amount_cents"] == "is required"
    with pytest.raises(SpecError):  # the batch path: the same check per item
        [result] = await operations.schedule_many(
            typed.client, [spec(BAD, delay=0)], task_queue=typed.queue
        )
        raise result.error or AssertionError("a bad payload was started")
    await assert_nothing_started(typed.client, before, typed.queue)


async def test_the_api_refuses_a_bad_payload_with_422(typed: Typed) -> None:
    before = await started_count(typed.client, typed.queue)
    async with in_process(typed) as http:
        answer = await http.post("/jobs", json=spec(BAD, delay=0))
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert body["error"] and {problem["field"] for problem in body["detail"]} == BAD_FIELDS
    await assert_nothing_started(typed.client, before, typed.queue)


async def test_the_cli_refuses_a_bad_payload_with_exit_2(typed: Typed) -> None:
    before = await started_count(typed.client, typed.queue)
    args = ("schedule", "typed", "--handler", CHARGE, "--payload", json.dumps(BAD), "--in", "1h")
    answer = await jobs_here(typed.env, *args)
    assert answer.returncode == 2, answer
    for field in BAD_FIELDS:
        assert f"error: {field}: " in answer.stderr
    await assert_nothing_started(typed.client, before, typed.queue)


async def test_a_good_payload_passes_every_door(typed: Typed) -> None:
    async with in_process(typed) as http:
        created = await http.post("/jobs", json=spec(GOOD, delay="1h"))
    assert created.status_code == 201, created.text
    args = ("schedule", "typed", "--handler", CHARGE, "--payload", json.dumps(GOOD), "--in", "1h")
    answer = await jobs_here(typed.env, *args)
    assert answer.returncode == 0, answer


# -- listing ----------------------------------------------------------------------------------


async def test_get_handlers_lists_names_schemas_and_workers(typed: Typed) -> None:
    async with in_process(typed) as http:
        answer = await http.get("/handlers")
    assert answer.status_code == 200, answer.text
    rows = {row["name"]: row for row in answer.json()["handlers"]}
    assert rows[CHARGE]["payload_schema"] == ChargeRequest.model_json_schema()
    assert rows[CHARGE]["workers"] == [typed.worker] and not rows[CHARGE]["builtin"]
    assert rows["log"]["payload_schema"] is None and rows["log"]["builtin"]
    assert rows["test.record"]["payload_schema"] is None  # untyped, published
    app = create_app(token="t0ken", client=typed.client, task_queue=typed.queue)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        assert (await http.get("/handlers")).status_code == 401  # behind the token like the rest


async def test_jobs_handlers_prints_a_table_and_json(typed: Typed) -> None:
    table = await jobs_here(typed.env, "handlers")
    assert table.returncode == 0, table
    line = next(row for row in table.stdout.splitlines() if row.startswith(CHARGE))
    assert "ChargeRequest {address, amount_cents*, currency, customer*, tags}" in line
    assert typed.worker in line
    assert "log (built-in)" in table.stdout and "any JSON object" in table.stdout
    as_json = await jobs_here(typed.env, "handlers", "--json")
    rows = {row["name"]: row for row in json.loads(as_json.stdout)["handlers"]}
    assert rows[RECEIPT]["payload_schema"]["title"] == "Receipt"


# -- pure ---------------------------------------------------------------------------------------


def test_validate_spec_checks_the_payload_against_a_catalog() -> None:
    catalog = HandlerCatalog({CHARGE}, {CHARGE: ChargeRequest.model_json_schema()})
    now = datetime.now(UTC)
    with pytest.raises(SpecError) as refused:
        operations.validate_spec(spec({"customer": "a"}, delay=0), catalog, now)
    assert refused.value.problems == [("payload.amount_cents", "is required")]
    assert operations.validate_spec(spec(GOOD, delay=0), catalog, now).payload == GOOD
    # a plain set of names checks names only (as before typed handlers)
    assert operations.validate_spec(spec({"customer": 1}, delay=0), {CHARGE}, now)


def test_a_name_registered_twice_names_both_modules() -> None:
    handlers = HandlerRegistry()
    handlers.register("dup")(record)
    with pytest.raises(DuplicateHandler, match=r"'tests\.handlers'.*'tests\.typed_handlers'"):
        handlers.register("dup", payload=ChargeRequest)(charge)
    with pytest.raises(TypeError, match="pydantic model"):
        handlers.register("x", payload=dict)  # type: ignore[arg-type]


def test_the_typed_wrapper_raises_permanent_error() -> None:
    handlers = HandlerRegistry()
    handlers.register(CHARGE, payload=ChargeRequest)(charge)
    run = handlers.get(CHARGE)
    assert run is not None and not HandlerRegistry.is_async(run)
    ctx: JobContext[Any] = JobContext(
        job_id="j", name="n", attempt=1, max_attempts=1, scheduled_at=datetime.now(UTC),
        idempotency_key="k", payload={"customer": "a"}, worker="w",
    )  # fmt: skip
    with pytest.raises(PermanentError, match=r"payload\.amount_cents: Field required"):
        run(ctx)
    assert json.loads(handlers.schemas()[CHARGE]) == ChargeRequest.model_json_schema()


def entry(worker: str, at: int, schemas: dict[str, str], names: list[str]) -> WorkerHandlers:
    published = datetime(2026, 1, 1, at, tzinfo=UTC)
    return WorkerHandlers(worker=worker, handlers=names, published_at=published, schemas=schemas)


def test_the_newest_worker_decides_a_schema_and_garbage_is_ignored() -> None:
    old = entry("old", 1, {"h": '{"title": "Old"}'}, ["h", "g"])
    new = entry("new", 2, {"h": '{"title": "New"}', "g": "not json"}, ["h", "g"])
    catalog = catalog_of([old, new])
    assert catalog.schema("h") == {"title": "New"} and catalog.schema("g") is None
    assert catalog.workers == {"h": ["new", "old"], "g": ["new", "old"]}
    assert catalog_of([entry("a", 3, {}, ["h"]), old]).schema("h") is None  # untyped now


@pytest.mark.parametrize(
    ("schemas", "reason"),
    [
        ({"other": "{}"}, "not among its handlers"),
        ({"h": "x" * (MAX_SCHEMA + 1)}, "over"),
        ({f"h{i}": "x" * MAX_SCHEMA for i in range(MAX_SCHEMAS // MAX_SCHEMA + 1)}, "total"),
    ],
)
def test_the_registry_bounds_published_schemas(schemas: dict[str, str], reason: str) -> None:
    names = ["h", *(f"h{i}" for i in range(10))]
    published = entry("w", 1, schemas, names)
    with pytest.raises(inbox.Invalid, match=reason):
        inbox.check_worker_handlers(published, published.published_at)


def test_old_publications_still_read() -> None:
    """What workers published before typed handlers (no schemas) validates, schemas empty."""
    raw = {"worker": "w", "handlers": ["log"], "published_at": "2026-01-01T00:00:00Z"}
    assert inbox.WORKER_HANDLERS_ARG.validate_python(raw).schemas == {}
