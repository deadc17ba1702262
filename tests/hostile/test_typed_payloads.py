"""Hostile payloads for a typed handler (``test.typed.charge``, a pydantic model with extra
fields forbidden), at each door: the operations library, the HTTP API (in this process) and
the CLI (in this process). Each is refused with per-field problems (SpecError / 422 / exit
2), with a bounded answer, and nothing starts; a normal job and a typed job still run.

One ``jobctl worker`` serving tests.typed_handlers publishes the schema the doors check.
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

from jobctl.starter import operations
from jobctl.starter.api import create_app
from jobctl.starter.dev.devserver import DevServer
from jobctl.starter.errors import SpecError
from tests.helpers.cli import jobs_here
from tests.helpers.poll import eventually
from tests.helpers.processes import Workers, cli_env
from tests.helpers.temporal import end_singletons
from tests.hostile.common import assert_nothing_started, normal_job_completes, started_count
from tests.typed_handlers import CHARGE

pytestmark = pytest.mark.devserver

MAX_ANSWER = 10_000  # characters of a refusal, whatever the payload's size


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def ok(**fields: Any) -> dict[str, Any]:
    return {"customer": "ada", "amount_cents": 2, **fields}


# name -> (payload, a field the refusal must name). The API reads a body deeper than its
# own limit as no JSON at all: that refusal names the field "body".
HOSTILE: dict[str, tuple[dict[str, Any], str]] = {
    "customer-a-number": ({"customer": 5, "amount_cents": 2}, "payload.customer"),
    "customer-null": ({"customer": None, "amount_cents": 2}, "payload.customer"),
    "customer-an-object": ({"customer": {"$gt": ""}, "amount_cents": 2}, "payload.customer"),
    "amount-a-string": ({"customer": "ada", "amount_cents": "2"}, "payload.amount_cents"),
    "amount-a-bool": ({"customer": "ada", "amount_cents": True}, "payload.amount_cents"),
    "amount-a-float": ({"customer": "ada", "amount_cents": 2.5}, "payload.amount_cents"),
    "amount-negative": ({"customer": "ada", "amount_cents": -2}, "payload.amount_cents"),
    "amount-huge": ({"customer": "ada", "amount_cents": 10**30}, "payload.amount_cents"),
    "currency-not-allowed": (ok(currency="BTC"), "payload.currency"),
    "empty": ({}, "payload.customer"),
    "missing-amount": ({"customer": "ada"}, "payload.amount_cents"),
    "customer-huge": (ok(customer="x" * 200_000), "payload.customer"),
    "extra-huge-string": (ok(junk="x" * 200_000), "payload.junk"),
    "many-extra-fields": (ok(**{f"k{i}": i for i in range(5_000)}), "payload.k0"),
    "extra-bidi-key": (ok(**{"\u202enote": 1}), "payload.\u202enote"),
    "tags-not-a-list": (ok(tags="vip"), "payload.tags"),
    "tags-too-many": (ok(tags=["t"] * 11), "payload.tags"),
    "tags-deeply-nested": (ok(tags=[nested(60)]), "payload.tags.0"),
    "nesting-beyond-the-spec-limit": (ok(tags=nested(100)), "payload"),
    "address-a-string": (ok(address="Paris"), "payload.address"),
    "address-deep-wrong": (
        ok(address={"city": {"a": {"b": [1]}}, "zip": "1"}),
        "payload.address.city",
    ),
    "address-extra": (ok(address={"city": "P", "zip": "75001", "x": 1}), "payload.address.x"),
}
DOORS = ["library", "api", "cli"]
BEYOND_BODY_LIMIT = "nesting-beyond-the-spec-limit"


@dataclass(frozen=True)
class Typed:
    client: Client
    queue: str
    env: dict[str, str]


@pytest.fixture(scope="module")
async def typed(
    dev_server: DevServer, dev_client: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Typed]:
    queue = f"hostile-typed-{uuid.uuid4().hex[:8]}"
    env = cli_env(
        dev_server.address, queue, JOBS_HANDLER_MODULES="tests.handlers,tests.typed_handlers"
    )
    workers = Workers(env, tmp_path_factory.mktemp("hostile-typed"))
    workers.start()
    try:
        await eventually(
            lambda: operations.known_handlers(dev_client, queue),
            lambda known: known.schema(CHARGE) is not None,
            what="the typed handler's schema published",
        )
        yield Typed(dev_client, queue, env)
        await normal_job_completes(dev_client, queue)  # after every hostile case
    finally:
        workers.stop_all()
        await end_singletons(dev_client)


def spec(payload: dict[str, Any]) -> dict[str, Any]:
    job_id = f"hostile-typed-{uuid.uuid4().hex[:10]}"
    return {"id": job_id, "name": "hostile", "handler": CHARGE, "payload": payload, "delay": 0}


async def refusal(typed: Typed, door: str, data: dict[str, Any]) -> tuple[set[str], str]:
    """The fields a door's refusal names, and the refusal as text (its whole answer)."""
    if door == "library":
        with pytest.raises(SpecError) as refused:
            await operations.schedule(typed.client, data, task_queue=typed.queue)
        assert refused.value.exit_code == 2
        return {field for field, _ in refused.value.problems}, str(refused.value)
    if door == "api":
        app = create_app(token="", client=typed.client, task_queue=typed.queue)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            answer = await http.post("/jobs", json=data)
        assert answer.status_code == 422, answer.text[:500]
        body = answer.json()
        assert set(body) == {"error", "detail"} and isinstance(body["detail"], list)
        return {problem["field"] for problem in body["detail"]}, answer.text
    args = ["schedule", "hostile", "--handler", CHARGE, "--in", "0"]
    cli = await jobs_here(typed.env, *args, "--payload", json.dumps(data["payload"]))
    assert cli.returncode == 2, cli.stderr[:500]
    lines = cli.stderr.splitlines()
    assert lines and all(line.startswith("error: ") for line in lines), cli.stderr[:500]
    return {line.removeprefix("error: ").split(": ")[0] for line in lines}, cli.stderr


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("case", list(HOSTILE))
async def test_a_hostile_payload_is_refused_at_the_door(typed: Typed, door: str, case: str) -> None:
    payload, field = HOSTILE[case]
    before = await started_count(typed.client, typed.queue)
    fields, text = await refusal(typed, door, spec(payload))
    if door == "api" and case == BEYOND_BODY_LIMIT:
        field = "body"
    assert field in fields, (fields, text[:500])
    assert all(name.startswith(("payload", "body")) for name in fields), fields
    assert len(text) < MAX_ANSWER, len(text)
    await assert_nothing_started(typed.client, before, typed.queue)


async def test_a_typed_job_still_runs(typed: Typed) -> None:
    data = spec({"customer": "ada", "amount_cents": 4})
    await operations.schedule(typed.client, data, now=datetime.now(UTC), task_queue=typed.queue)
    report = await eventually(
        lambda: operations.status(typed.client, data["id"]),
        lambda report: report.status == "done",
        timeout=30,
        what="the typed job done",
    )
    assert report.result["type"] == "ChargeRequest"  # type: ignore[union-attr]
