"""Crons on a test server: start one, read its report, wait until its slot jobs reported."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from jobctl.starter import operations
from jobctl.workflows.cron_workflow import CronJobWorkflow
from jobctl.workflows.models import CronInput, CronReport, parse_spec
from tests.helpers.poll import eventually


async def start_cron(
    env: WorkflowEnvironment | Client,
    task_queue: str,
    event_budget: int = 10_000,
    **spec: Any,
) -> WorkflowHandle[Any, Any]:
    """Start a cron (``log`` every ``cron``) on the test server's clock, or on a dev server's
    (this machine's clock) when given a client."""
    if isinstance(env, Client):
        client, now = env, datetime.now(UTC)
    else:
        client, now = env.client, await env.get_current_time()
        spec = {**time_skipping_lead(env), **spec}
    parsed = parse_spec(
        {"name": "cron", "handler": "log", **spec}, now, new_id=f"cron-{uuid.uuid4().hex[:12]}"
    )
    return await client.start_workflow(
        CronJobWorkflow.run,
        CronInput(spec=parsed, event_budget=event_budget),
        id=parsed.id,
        task_queue=task_queue,
    )


def slots_longer_than_the_interval(seconds: float, **spec: Any) -> dict[str, Any]:
    """A cron every 2 s whose slot's handler sleeps ``seconds`` (real time: the dev server),
    holding its lease by heartbeats every second."""
    return {
        "cron": "*/2 * * * * *",
        "handler": "demo.sleep",
        "payload": {"seconds": seconds},
        "lease": 2,
        **spec,
    }


def time_skipping_lead(env: WorkflowEnvironment) -> dict[str, Any]:
    """``dispatch_lead: 0`` on the time-skipping server: a slot's job started ahead waits for
    its time in the worker, in real seconds the server cannot skip (with the lead, each slot
    would cost the test up to 10 s). The ahead start is tested on the dev server."""
    return {"dispatch_lead": 0} if env.supports_time_skipping else {}


async def report(env: WorkflowEnvironment | Client, cron_id: str) -> CronReport:
    client = env if isinstance(env, Client) else env.client
    result = await operations.status(client, cron_id)
    assert isinstance(result, CronReport)
    return result


def waiting_buffered(current: CronReport) -> bool:
    """A buffered slot not yet started: between its running slot's end and its own start the
    cron's ``running`` is empty for a moment (the child start is awaited)."""
    ran = {r.slot for r in current.recent_slots if r.outcome == "ran"}
    return any(r.outcome == "buffered" and r.slot not in ran for r in current.recent_slots)


async def settle(
    env: WorkflowEnvironment | Client, cron_id: str, timeout: float = 30
) -> CronReport:
    """Real-time pause until every started slot job (and a buffered one) has reported back.
    A timeout names how each slot job still running stands, by its own report."""
    try:
        return await eventually(
            lambda: report(env, cron_id),
            lambda current: not current.running and not waiting_buffered(current),
            interval=0.1,
            timeout=timeout,
            what=f"{cron_id} settled",
        )
    except AssertionError as err:
        client = env if isinstance(env, Client) else env.client
        running = (await report(env, cron_id)).running
        stands = [await operations.status(client, job_id) for job_id in running]
        raise AssertionError(f"{err}\nslot jobs still running: {stands!r}") from None
