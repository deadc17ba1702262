"""Issue 41: an accepted job reaches only a worker that serves its handler (dev server).

Each job's attempts wait on its handler's own queue, which only workers serving that handler
poll: with unlike workers on one task queue every job runs on one that has its handler; a
job whose handler no worker serves is accepted with a warning, waits (its status says for
what), and runs when such a worker starts, or goes dead after ``handler_wait`` saying why.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from temporalio.client import Client

from jobctl.activities.context import HandlerRegistry
from jobctl.activities.registry import load_handlers
from jobctl.connection.client import connect
from jobctl.starter import operations
from jobctl.worker import WorkerSettings, build_worker, publish_handlers
from jobctl.workflows.models import JobStatus
from tests.helpers.poll import eventually
from tests.helpers.temporal import until_polled

PLUGIN = "test.record"  # served by the "plugin" worker only


def registry_of(*handlers: str) -> HandlerRegistry:
    """A registry serving only ``handlers`` (of the built-in and test handlers)."""
    full = load_handlers("tests.handlers")
    subset = HandlerRegistry()
    for name in handlers:
        fn = full.get(name)
        assert fn is not None, name
        subset.register(name)(fn)
    return subset


@asynccontextmanager
async def worker_of(
    client: Client, queue: str, identity: str, *handlers: str, publish: bool = False
) -> AsyncIterator[None]:
    """A worker serving ``handlers`` on its own connection (the SDK allows one worker per
    task queue per connection; these stand for separate processes)."""
    own = await connect(client.service_client.config.target_host, "default")
    settings = WorkerSettings(task_queue=queue, identity=identity)
    registry = registry_of(*handlers)
    async with build_worker(own, settings, registry).running():
        if publish:
            await publish_handlers(own, settings, registry)
            await until_polled(own, queue, *handlers)
        yield


def record_spec(path: Path, n: int, **extra: Any) -> dict[str, Any]:
    key = f"r{n}-{uuid.uuid4().hex[:6]}"
    payload = {"path": str(path), "seconds": 0}
    return {"name": "r", "handler": PLUGIN, "delay": 0, "payload": payload, "id": key, **extra}


async def settled(client: Client, job_id: Any, timeout: float = 60) -> Any:
    return await eventually(
        lambda: operations.status(client, job_id),
        lambda r: r.status in (JobStatus.DONE, JobStatus.DEAD),
        timeout=timeout,
        what=f"{job_id} settled",
    )


async def test_unlike_workers_on_one_queue_run_every_job_where_its_handler_is(
    dev_client: Client, tmp_path: Path
) -> None:
    queue = f"route-{uuid.uuid4().hex[:8]}"
    lines = tmp_path / "lines.jsonl"
    async with (
        worker_of(dev_client, queue, "plain", "log"),
        worker_of(dev_client, queue, "plugin", "log", PLUGIN),
    ):
        specs = [record_spec(lines, n) for n in range(12)]
        specs += [
            {"name": "l", "handler": "log", "delay": 0, "id": f"l{n}-{uuid.uuid4().hex[:6]}"}
            for n in range(6)
        ]
        for spec in specs:
            await operations.schedule(dev_client, spec, {"log", PLUGIN}, task_queue=queue)
        reports = [await settled(dev_client, spec["id"]) for spec in specs]
    assert [r.status for r in reports] == [JobStatus.DONE] * len(specs)
    plugin_runs = [json.loads(line) for line in lines.read_text().splitlines()]
    assert len([x for x in plugin_runs if x["event"] == "start"]) == 12  # once each
    assert {x["worker"] for x in plugin_runs} == {"plugin"}
    assert all(len(r.attempts) == 1 for r in reports)


async def test_a_job_no_worker_serves_is_accepted_waits_saying_why_and_runs_later(
    dev_client: Client, tmp_path: Path
) -> None:
    queue = f"wait-{uuid.uuid4().hex[:8]}"
    lines = tmp_path / "lines.jsonl"
    async with worker_of(dev_client, queue, "plain", "log"):
        catalog = await operations.known_handlers(dev_client, queue)  # advisory: refuses none
        spec = record_spec(lines, 0)
        scheduled = await operations.schedule(dev_client, spec, catalog, task_queue=queue)
        waiting: Any = await eventually(
            lambda: operations.status(dev_client, spec["id"]),
            lambda r: r.status == JobStatus.PENDING and getattr(r, "status_detail", None),
            timeout=30,
            what="pending with a reason",
        )
        # A typo of a served name is accepted too, with a did-you-mean.
        typo = {"name": "t", "handler": "lgo", "delay": 3600, "id": f"t-{uuid.uuid4().hex[:6]}"}
        typo_answer = await operations.schedule(dev_client, typo, catalog, task_queue=queue)
        # A normal job still runs meanwhile.
        plain = {"name": "l", "handler": "log", "delay": 0, "id": f"l-{uuid.uuid4().hex[:6]}"}
        plain_answer = await operations.schedule(dev_client, plain, catalog, task_queue=queue)
        assert (await settled(dev_client, plain["id"])).status == JobStatus.DONE
        async with worker_of(dev_client, queue, "plugin", PLUGIN):
            done = await settled(dev_client, spec["id"])
    [warning] = scheduled.warnings
    assert f"no live worker on task queue {queue!r} serves handler {PLUGIN!r}" in warning
    assert "up to handler_wait, 1d" in warning
    assert waiting.status_detail == (
        f"waiting for a worker with handler {PLUGIN!r} on task queue {queue!r}"
    )
    assert waiting.attempts == []
    assert plain_answer.warnings == []
    [typo_warning] = typo_answer.warnings
    assert "no worker has published this handler (did you mean 'log'?)" in typo_warning
    assert done.status == JobStatus.DONE and [a.worker for a in done.attempts] == ["plugin"]


async def test_handler_wait_ends_a_job_no_worker_serves_with_a_clear_error(
    dev_client: Client, tmp_path: Path
) -> None:
    queue = f"bound-{uuid.uuid4().hex[:8]}"
    async with worker_of(dev_client, queue, "plain", "log"):
        spec = record_spec(tmp_path / "never.jsonl", 0, handler_wait=10)
        await operations.schedule(dev_client, spec, {"log", PLUGIN}, task_queue=queue)
        dead = await settled(dev_client, spec["id"], timeout=40)
        plain = {"name": "l", "handler": "log", "delay": 0, "id": f"l-{uuid.uuid4().hex[:6]}"}
        await operations.schedule(dev_client, plain, {"log"}, task_queue=queue)
        assert (await settled(dev_client, plain["id"])).status == JobStatus.DONE
    assert dead.status == JobStatus.DEAD
    assert dead.attempts == []  # nothing ran, nothing was spent
    assert dead.last_error == (
        f"no worker serving handler {PLUGIN!r} took the attempt within 10s (handler_wait)"
    )
    assert not (tmp_path / "never.jsonl").exists()


SETS = {
    "w1": ("log", PLUGIN),
    "w2": ("log", "demo.sleep"),
    "w3": (PLUGIN, "demo.sleep"),
}


async def test_drill_three_unlike_workers_stopped_and_started_midway_run_all_300(
    dev_client: Client, tmp_path: Path
) -> None:
    """300 jobs over three handlers, due over 20 s, on three workers with different handler
    sets (and a fourth on another queue serving the plugin); two workers stop and start
    again midway. Every job runs, once to its end, on a worker of its queue that serves it."""
    queue = f"drill-{uuid.uuid4().hex[:8]}"
    lines = tmp_path / "lines.jsonl"
    specs: list[dict[str, Any]] = []
    for n in range(300):
        handler = ("log", PLUGIN, "demo.sleep")[n % 3]
        spec: dict[str, Any] = {"name": "d", "handler": handler, "delay": (n % 20) + 1}
        spec["id"] = f"d{n}-{uuid.uuid4().hex[:6]}"
        if handler == PLUGIN:
            spec["payload"] = {"path": str(lines), "seconds": 0.05}
        elif handler == "demo.sleep":
            spec["payload"] = {"seconds": 0.05}
        specs.append(spec)
    running: dict[str, AsyncExitStack] = {}

    async def start(name: str) -> None:
        running[name] = AsyncExitStack()
        await running[name].enter_async_context(worker_of(dev_client, queue, name, *SETS[name]))

    async def stop(name: str) -> None:  # a clean stop: its waiting attempts are handed over
        await running.pop(name).aclose()

    async with worker_of(dev_client, f"other-{queue}", "elsewhere", PLUGIN):
        try:
            for name in SETS:
                await start(name)
            for spec in specs:
                await operations.schedule(
                    dev_client, spec, {"log", PLUGIN, "demo.sleep"}, task_queue=queue
                )
            await asyncio.sleep(6)
            await stop("w3")  # w1 alone serves the plugin, w2 alone demo.sleep
            await asyncio.sleep(4)
            await start("w3")
            await stop("w1")  # w3 alone serves the plugin, w2 alone log
            await asyncio.sleep(4)
            await start("w1")
            reports = [await settled(dev_client, s["id"], timeout=120) for s in specs]
        finally:
            for name in list(running):
                await stop(name)
    statuses = {r.status for r in reports}
    assert statuses == {JobStatus.DONE}, [(r.job_id, r.status, r.last_error) for r in reports]
    for spec, report in zip(specs, reports, strict=True):
        ran_on = [a.worker for a in report.attempts if a.outcome == "succeeded"]
        assert len(ran_on) == 1, (spec["id"], report.attempts)
        assert spec["handler"] in SETS[ran_on[0]], (spec["id"], ran_on)
    plugin_done = [json.loads(x) for x in lines.read_text().splitlines()]
    assert {x["worker"] for x in plugin_done} <= {"w1", "w3"}  # never "elsewhere"
    done_keys = [x["key"] for x in plugin_done if x["event"] == "done"]
    assert sorted(done_keys) == sorted(s["id"] for s in specs if s["handler"] == PLUGIN)
