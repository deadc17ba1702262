"""The HTTP API end to end: `jobctl api` and `jobctl worker` processes on a real dev server."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from jobctl.starter.api import create_app
from jobctl.starter.dev.devserver import DevServer, free_port
from tests.helpers.api import Stack, new_id, wait_status
from tests.helpers.poll import eventually_sync
from tests.helpers.processes import JOBS, Api, cli_env

pytestmark = pytest.mark.devserver


def test_create_get_list_and_page(stack: Stack) -> None:
    http = stack.http
    ids = [new_id() for _ in range(3)]
    for job_id in ids:
        created = http.post(
            "/jobs",
            json={
                "id": job_id,
                "name": "page me",
                "handler": "log",
                "payload": {"n": 1},
                "delay": 0,
            },
        )
        assert created.status_code == 201, created.text
        assert created.json()["job_id"] == job_id and created.json()["next_run_at"]
    for job_id in ids:
        done = wait_status(http, job_id, "done")
        assert done["attempts"][0]["outcome"] == "succeeded"
        assert done["result"] == {"logged": True}
    first = http.get("/jobs", params={"status": "done", "limit": 2}).json()
    assert len(first["jobs"]) == 2 and first["next_page_token"]
    second = http.get(
        "/jobs", params={"status": "done", "limit": 2, "page_token": first["next_page_token"]}
    ).json()
    # The three jobs that closed last are this test's (the server lists newest first): two on
    # the first page, the third first on the second; no row on both pages.
    newest = [row["job_id"] for row in first["jobs"]] + [second["jobs"][0]["job_id"]]
    assert sorted(newest) == sorted(ids), (first, second)
    assert not {row["job_id"] for row in first["jobs"]} & {row["job_id"] for row in second["jobs"]}
    bad = http.get("/jobs", params={"page_token": "%%%"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "page_token"
    assert http.get("/jobs", params={"status": "bogus"}).status_code == 422


def test_controls_and_their_refusals(stack: Stack) -> None:
    http = stack.http
    job_id = new_id()
    assert (
        http.post(
            "/jobs", json={"id": job_id, "name": "later", "handler": "log", "delay": "1h"}
        ).status_code
        == 201
    )
    until = (datetime.now(UTC) + timedelta(days=365)).isoformat()  # within 10 years ahead
    paused = http.post(f"/jobs/{job_id}/pause", json={"until": until})
    assert paused.status_code == 200 and paused.json()["status"] == "paused"
    assert http.post(f"/jobs/{job_id}/resume").json()["status"] == "scheduled"
    again = http.post(f"/jobs/{job_id}/resume")
    assert again.status_code == 409 and "not paused" in again.json()["detail"]
    assert http.post(f"/jobs/{job_id}/pause").json()["status"] == "paused"
    assert http.post(f"/jobs/{job_id}/trigger").status_code == 200
    wait_status(http, job_id, "done")
    finished = http.post(f"/jobs/{job_id}/trigger")
    assert finished.status_code == 409 and finished.json()["error"] == "conflict"

    to_cancel = new_id()
    http.post("/jobs", json={"id": to_cancel, "name": "cancel me", "handler": "log", "delay": "2h"})
    assert http.delete(f"/jobs/{to_cancel}").status_code == 202
    wait_status(http, to_cancel, "cancelled")
    assert http.delete(f"/jobs/{to_cancel}").status_code == 409
    for method, path in [
        ("GET", "/jobs/nope-1"),
        ("DELETE", "/jobs/nope-1"),
        ("POST", "/jobs/nope-1/trigger"),
        ("POST", "/jobs/nope-1/pause"),
        ("POST", "/jobs/nope-1/resume"),
        ("POST", "/dlq/nope-1/requeue"),
        ("POST", "/dlq/nope-1/discard"),
    ]:
        answer = http.request(method, path)
        assert answer.status_code == 404, (method, path, answer.text)
        assert answer.json() == {"error": "not_found", "detail": "no job with id 'nope-1'"}


def test_cron_through_the_api(stack: Stack) -> None:
    http = stack.http
    cron_id = new_id("cron")
    created = http.post(
        "/jobs",
        json={
            "id": cron_id,
            "name": "cron",
            "handler": "log",
            "cron": "0 3 * * *",
            "timezone": "Europe/Berlin",
        },
    )
    assert created.status_code == 201
    report = http.get(f"/jobs/{cron_id}").json()
    assert report["kind"] == "cron" and len(report["next_slots"]) == 5
    assert report["next_slots"][0]["local"].endswith("03:00:00+01:00")
    changed = http.patch(f"/jobs/{cron_id}", json={"cron": "30 4 * * *", "overlap": "allow_all"})
    assert changed.status_code == 200 and changed.json()["cron"] == "30 4 * * *"
    refused = http.patch(f"/jobs/{cron_id}", json={"cron": "0 0 31 4 *"})
    assert refused.status_code == 422 and refused.json()["detail"][0]["field"] == "cron"
    one_shot = new_id()
    http.post("/jobs", json={"id": one_shot, "name": "x", "handler": "log", "delay": "1h"})
    assert http.patch(f"/jobs/{one_shot}", json={"cron": "* * * * *"}).status_code == 409
    preview = http.get(
        "/cron/preview",
        params={
            "expr": "30 1 * * *",
            "tz": "America/New_York",
            "after": "2025-11-01T00:00:00-04:00",
            "n": 2,
        },
    )
    assert preview.json() == [
        {"local": "2025-11-01T01:30:00-04:00", "utc": "2025-11-01T05:30:00Z"},
        {"local": "2025-11-02T01:30:00-04:00", "utc": "2025-11-02T05:30:00Z"},
    ]
    bad = http.get("/cron/preview", params={"expr": "* * * *"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "cron"
    assert http.delete(f"/jobs/{cron_id}").status_code == 202


def test_poison_job_life_create_retries_dlq_requeue_runs_again(stack: Stack) -> None:
    http = stack.http
    job_id = new_id("poison")
    http.post(
        "/jobs",
        json={
            "id": job_id,
            "name": "poison",
            "handler": "demo.sleep",
            "payload": {"seconds": 0, "fail_times": 3},
            "delay": 0,
            "max_attempts": 3,
            "backoff_base": 1,
        },
    )
    dead = wait_status(http, job_id, "dead")
    assert [a["outcome"] for a in dead["attempts"]] == ["failed"] * 3
    listed = eventually_sync(
        lambda: [e for e in http.get("/dlq").json()["entries"] if e["job_id"] == job_id],
        interval=0.3,
        what=f"{job_id} listed in /dlq",
    )
    entry = listed[0]
    assert entry["attempts"] == 3 and "demo failure on attempt 3" in entry["last_error"]
    assert http.post(f"/dlq/{job_id}/requeue").json() == {"job_id": job_id, "action": "requeue"}
    done = wait_status(http, job_id, "done")
    assert [(a["attempt"], a["round"]) for a in done["attempts"]][-1] == (4, 2)
    again = http.post(f"/dlq/{job_id}/requeue")
    assert again.status_code == 409
    assert "not dead" in again.json()["detail"] or "finished" in again.json()["detail"]

    other = new_id("poison")
    http.post(
        "/jobs", json={"id": other, "name": "poison", "handler": "test.permanent", "delay": 0}
    )
    wait_status(http, other, "dead")
    assert http.post(f"/dlq/{other}/discard").status_code == 200
    eventually_sync(
        lambda: http.delete(f"/jobs/{other}").status_code,
        lambda code: code == 409,
        interval=0.3,
        what=f"{other} discarded (cancel refused)",
    )


def test_idempotent_create(stack: Stack) -> None:
    http = stack.http
    job_id = new_id()
    body = {"id": job_id, "name": "once", "handler": "log", "delay": "30m"}
    first = http.post("/jobs", json=body)
    second = http.post("/jobs", json=body)
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["job_id"] == second.json()["job_id"] == job_id
    assert second.json()["created"] is False
    assert second.json()["next_run_at"] == first.json()["next_run_at"]
    changed = http.post("/jobs", json={**body, "name": "different"})
    assert changed.status_code == 409 and "already exists" in changed.json()["detail"]


HTTP_BAD_INPUT: list[tuple[str, dict[str, Any], str]] = [
    ("naive datetime", {"run_at": "2030-01-01T09:00:00"}, "run_at"),
    ("run_at and delay", {"run_at": "2030-01-01T09:00:00Z", "delay": 10}, "run_at, delay"),
    ("no time at all", {}, "run_at, delay, cron"),
    ("negative delay", {"delay": -5}, "delay"),
    ("unparseable delay", {"delay": "soon"}, "delay"),
    ("more than 10 years ahead", {"run_at": "2045-01-01T00:00:00Z"}, "run_at"),
    ("malformed handler name", {"delay": 5, "handler": "no such handler"}, "handler"),
    ("payload not an object", {"delay": 5, "payload": [1, 2]}, "payload"),
    ("max_attempts 0", {"delay": 5, "max_attempts": 0}, "max_attempts"),
    ("max_attempts 101", {"delay": 5, "max_attempts": 101}, "max_attempts"),
    ("lease above timeout", {"delay": 5, "lease": 600, "timeout": 300}, "timeout"),
    ("lease under a second", {"delay": 5, "lease": 0.5}, "lease"),
    ("id with illegal characters", {"delay": 5, "id": "bad id!"}, "id"),
    ("empty name", {"delay": 5, "name": ""}, "name"),
    ("bad timezone", {"delay": 5, "timezone": "Mars/Olympus_Mons"}, "timezone"),
    ("jitter above 1", {"delay": 5, "jitter": 1.5}, "jitter"),
    ("zero backoff base", {"delay": 5, "backoff_base": 0}, "backoff_base"),
    ("unknown field", {"delay": 5, "colour": "red"}, "colour"),
    ("cron that never fires", {"cron": "0 0 30 2 *"}, "cron"),
    ("cron with four fields", {"cron": "* * * *"}, "cron"),
    ("after an unknown job", {"delay": 5, "after": ["no-such-job-here"]}, "after"),
    ("after the same job twice", {"delay": 5, "after": ["a", "a"]}, "after"),
    (
        "a dependency policy alone",
        {"delay": 5, "on_failed_dependency": "run"},
        "on_failed_dependency",
    ),
]


async def test_bad_input_answers_422_naming_the_field_and_starts_nothing(
    stack: Stack, dev_client: Client
) -> None:
    http = stack.http
    for case, fields, field in HTTP_BAD_INPUT:
        job_id = new_id("bad")
        body = {"id": job_id, "name": "bad", "handler": "log", **fields}
        answer = http.post("/jobs", json=body)
        assert answer.status_code == 422, (case, answer.text)
        assert answer.json()["error"] == "invalid"
        named = [problem["field"] for problem in answer.json()["detail"]]
        assert named == [field], (case, answer.json())
        with pytest.raises(RPCError) as missing:
            await dev_client.get_workflow_handle(job_id).describe()
        assert missing.value.status == RPCStatusCode.NOT_FOUND, case
    for raw in (b"not json", b"[1, 2]", b""):
        answer = http.post("/jobs", content=raw, headers={"Content-Type": "application/json"})
        assert answer.status_code == 422 and answer.json()["detail"][0]["field"] == "body"


async def test_a_handler_no_worker_serves_is_201_with_a_warning(
    stack: Stack, dev_client: Client
) -> None:
    """Issue 41: a well-formed name is not invalid input because no worker serves it now."""
    job_id = new_id("unserved")
    body = {"id": job_id, "name": "u", "handler": "no.such.handler", "delay": 3600}
    answer = stack.http.post("/jobs", json=body)
    await dev_client.get_workflow_handle(job_id).cancel()
    assert answer.status_code == 201, answer.text
    [warning] = answer.json()["warnings"]
    assert "serves handler 'no.such.handler': the job waits for one" in warning
    plain = stack.http.post("/jobs", json={**body, "id": new_id("plain"), "handler": "log"})
    assert plain.status_code == 201 and plain.json()["warnings"] == [], plain.text


async def test_a_body_over_the_limit_is_refused_before_parsing(
    stack: Stack, dev_client: Client
) -> None:
    http = stack.http
    job_id = new_id("big")
    body = json.dumps(
        {
            "id": job_id,
            "name": "big",
            "handler": "log",
            "delay": 5,
            "payload": {"blob": "x" * 400_000},
        }
    ).encode()
    answer = http.post("/jobs", content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 413 and answer.json()["error"] == "too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: the API must count itself
        for start in range(0, len(body), 65536):
            yield body[start : start + 65536]

    chunked = http.post("/jobs", content=chunks(), headers={"Content-Type": "application/json"})
    assert chunked.status_code == 413
    with pytest.raises(RPCError):
        await dev_client.get_workflow_handle(job_id).describe()
    # Just under the limit is fine (the payload limit itself is the model's: 256 KiB).
    small = {
        "id": new_id(),
        "name": "ok",
        "handler": "log",
        "delay": 5,
        "payload": {"blob": "x" * 200_000},
    }
    assert http.post("/jobs", json=small).status_code == 201


def in_process(app: FastAPI) -> httpx.AsyncClient:
    """The API in this process, through httpx's ASGI transport (no server, no port)."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def test_temporal_unreachable_is_503_and_bad_input_still_422(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")  # nothing listens there
    async with in_process(create_app(token="", task_queue="nowhere")) as http:
        health = await http.get("/healthz")
        assert health.status_code == 503 and health.json()["temporal"] == "unreachable"
        good = {"name": "x", "handler": "log", "delay": 5}
        down = await http.post("/jobs", json=good)
        assert down.status_code == 503 and down.json()["error"] == "unavailable"
        assert "Traceback" not in down.text
        assert (await http.post("/jobs", json={**good, "delay": -1})).status_code == 422
        assert (await http.get("/jobs/anything")).status_code == 503


PROTECTED = [
    ("POST", "/jobs"),
    ("GET", "/jobs"),
    ("GET", "/jobs/x"),
    ("DELETE", "/jobs/x"),
    ("PATCH", "/jobs/x"),
    ("POST", "/jobs/x/trigger"),
    ("POST", "/jobs/x/pause"),
    ("POST", "/jobs/x/resume"),
    ("GET", "/dlq"),
    ("POST", "/dlq/x/requeue"),
    ("POST", "/dlq/x/discard"),
    ("GET", "/cron/preview?expr=*+*+*+*+*"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
]


async def test_a_token_protects_every_endpoint_but_healthz(dev_client: Client) -> None:
    token = "s3cret-token"
    async with in_process(create_app(token=token, client=dev_client, task_queue="auth")) as http:
        for method, path in PROTECTED:
            for headers in (
                {},
                {"Authorization": "Bearer wrong"},
                {"Authorization": f"Basic {token}"},
                {"Authorization": token},
            ):
                answer = await http.request(method, path, headers=headers)
                assert answer.status_code == 401, (method, path, headers)
                assert answer.headers["WWW-Authenticate"] == "Bearer"
        assert (await http.get("/healthz")).status_code == 200
        good = {"Authorization": f"Bearer {token}"}
        assert (await http.get("/jobs", headers=good)).status_code == 200
        schema = (await http.get("/openapi.json", headers=good)).json()
        assert schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


def test_binding_beyond_loopback_needs_a_token(dev_server: DevServer) -> None:
    env = cli_env(dev_server.address, "bind")
    env.pop("JOBS_API_TOKEN", None)
    refused = subprocess.run(
        [JOBS, "api", "--host", "0.0.0.0", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert refused.returncode == 2
    assert (
        refused.stderr.strip() == "error: host: binding to 0.0.0.0 needs JOBS_API_TOKEN set "
        "(a bearer token)"
    )
    api = Api({**env, "JOBS_API_TOKEN": "t"}, host="0.0.0.0").start()
    api.stop()


def test_openapi_and_docs_are_served(stack: Stack) -> None:
    schema = stack.http.get("/openapi.json").json()
    paths = set(schema["paths"])
    assert {
        "/jobs",
        "/jobs/{job_id}",
        "/jobs/{job_id}/trigger",
        "/jobs/{job_id}/pause",
        "/jobs/{job_id}/resume",
        "/dlq",
        "/dlq/{job_id}/requeue",
        "/dlq/{job_id}/discard",
        "/cron/preview",
        "/healthz",
    } <= paths
    body = schema["paths"]["/jobs"]["post"]["requestBody"]["content"]["application/json"]
    assert "max_attempts" in body["schema"]["properties"]
    assert "swagger-ui" in stack.http.get("/docs").text.lower()


def test_list_by_every_status_including_cancelling_and_discarded(stack: Stack) -> None:
    """``GET /jobs?status=`` takes every public status (cancelling and discarded too) and
    lists by the status ``GET /jobs/{id}`` shows; ``jobctl list --status`` agrees."""
    http = stack.http
    for status in (
        "scheduled",
        "pending",
        "running",
        "retrying",
        "paused",
        "done",
        "dead",
        "cancelled",
        "cancelling",
        "discarded",
    ):
        answer = http.get("/jobs", params={"status": status, "limit": 5})
        assert answer.status_code == 200, (status, answer.text)
    job_id = new_id("term")
    http.post("/jobs", json={"id": job_id, "name": "x", "handler": "log", "delay": "1h"})
    assert http.delete(f"/jobs/{job_id}").status_code == 202
    shown = wait_status(http, job_id, "cancelled")
    assert shown["status"] == "cancelled" and shown["ran_at"] is None
    deadline = time.monotonic() + 30
    while job_id not in {
        r["job_id"] for r in http.get("/jobs", params={"status": "cancelled"}).json()["jobs"]
    }:
        assert time.monotonic() < deadline, "not listed as cancelled"
        time.sleep(0.3)
    [row] = [
        r
        for r in http.get("/jobs", params={"status": "cancelled"}).json()["jobs"]
        if r["job_id"] == job_id
    ]
    # Cancelled an hour before its run_at: its time is when it closed, not a future run time.
    assert row["run_at"] == row["closed_at"]
    listed = subprocess.run(
        [JOBS, "list", "--status", "cancelled", "--json", "--limit", "1000"],
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert job_id in {r["job_id"] for r in json.loads(listed.stdout)["jobs"]}


async def test_a_batch_with_temporal_gone_answers_within_a_single_jobs_bound() -> None:
    """Issue 41: the server stops after the API connected. A batch of 100 valid specs
    answers one 503-class result per spec in about the time one ``POST /jobs`` takes to say
    503 (the specs after the first unreachable start are not tried one by one)."""
    server = DevServer(db_file=None)
    client = await server.start()
    try:
        async with in_process(create_app(token="", client=client, task_queue="gone")) as http:
            assert (await http.get("/handlers")).status_code == 200  # connected and cached
            server.stop()
            good = {"name": "x", "handler": "log", "delay": 60}
            began = time.monotonic()
            single = await http.post("/jobs", json=good)
            single_took = time.monotonic() - began
            began = time.monotonic()
            batch = await http.post("/jobs/batch", json={"jobs": [good] * 100})
            batch_took = time.monotonic() - began
    finally:
        server.stop()
    assert single.status_code == 503 and single.json()["error"] == "unavailable"
    results = batch.json()["results"]
    assert batch.status_code == 200 and len(results) == 100
    assert {(r["ok"], r["status"], r["error"]) for r in results} == {(False, 503, "unavailable")}
    # Measured here: both about the SDK's retry bound for one call; a margin for a busy box.
    assert batch_took <= 2 * single_took + 5, (single_took, batch_took)
