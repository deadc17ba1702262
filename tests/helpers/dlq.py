"""The dead-letter queue's audit log, and a job that dies once (permanently) then succeeds."""

from __future__ import annotations

from temporalio.client import Client

from jobctl.starter import dlq
from jobctl.workflows.models import DlqLogLine
from tests.helpers.poll import eventually

POISON_ONCE = {
    "handler": "demo.sleep",
    "payload": {"seconds": 0, "fail_times": 1, "permanent": True},
}


async def dlq_log(client: Client) -> list[DlqLogLine]:
    return await dlq.audit_log(client, 500)


async def wait_for_log(
    client: Client, action: str, job_id: str, count: int = 1
) -> list[DlqLogLine]:
    async def lines() -> list[DlqLogLine]:
        return [x for x in await dlq_log(client) if x.action == action and x.job_id == job_id]

    return await eventually(
        lines, lambda found: len(found) >= count, what=f"{count} {action} of {job_id}"
    )
