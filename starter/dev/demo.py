"""A short demo: a few jobs, one flaky and one poison, watched until they settle.

Run it against a running stack with ``python -m jobctl.starter.dev.demo`` (``jobctl dev
--demo`` runs it for you once the stack is up).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

from temporalio.client import Client

from jobctl.connection.client import connect
from jobctl.starter import operations
from jobctl.starter.errors import JobExists
from jobctl.workflows.models import JobReport, JobStatus

# (short key for the job id, spec)
DEMO_JOBS: list[tuple[str, dict[str, Any]]] = [
    ("hello", {"name": "say hello", "handler": "log", "payload": {"message": "hi"}, "delay": "3s"}),
    (
        "report",
        {
            "name": "nightly report",
            "handler": "demo.sleep",
            "payload": {"seconds": 4},
            "delay": "5s",
        },
    ),
    (
        "flaky",
        {
            "name": "flaky upload",
            "handler": "demo.sleep",
            "payload": {"seconds": 1, "fail_times": 2},
            "delay": "5s",
            "backoff_base": 2,
        },
    ),
    (
        "poison",
        {
            "name": "poison pill",
            "handler": "demo.sleep",
            "payload": {"seconds": 0.5, "always_fail": True},
            "delay": "5s",
            "max_attempts": 4,
            "backoff_base": 2,
        },
    ),
    (
        "digest",
        {
            "name": "tomorrow's digest",
            "handler": "log",
            "payload": {"message": "later"},
            "delay": "24h",
        },
    ),
]
SETTLED = {JobStatus.DONE, JobStatus.DEAD, JobStatus.CANCELLED}


async def run_demo(client: Client, watch_seconds: float = 90.0) -> list[str]:
    """Schedule the demo jobs and print each status change until they settle."""
    stamp = datetime.now(UTC).strftime("%H%M%S")
    # Handler names as the workers published them to the handler registry (the same check
    # as `jobctl schedule` and the API; the demo imports no handler module).
    handlers = await operations.known_handlers(client)
    ids = []
    for key, job in DEMO_JOBS:
        try:
            scheduled = await operations.schedule(
                client, {**job, "id": f"demo-{stamp}-{key}"}, handlers
            )
        except JobExists:
            continue
        ids.append(scheduled.job_id)
        print(f"[demo] scheduled {scheduled.job_id:24} {job['name']!r} ({job['handler']})")
    seen: dict[str, tuple[str, int]] = {}
    deadline = time.monotonic() + watch_seconds
    watched = [job_id for job_id in ids if not job_id.endswith("-digest")]
    while time.monotonic() < deadline:
        for job_id in watched:
            report = await operations.status(client, job_id)
            assert isinstance(report, JobReport)
            state = (report.status.value, len(report.attempts))
            if seen.get(job_id) != state:
                seen[job_id] = state
                failing = report.status in (JobStatus.RETRYING, JobStatus.DEAD)
                extra = f" - {report.last_error}" if failing else ""
                print(
                    f"[demo] {job_id:24} {report.status.value:9} "
                    f"attempts={len(report.attempts)}{extra}",
                    flush=True,
                )
        if all(job_id in seen and seen[job_id][0] in SETTLED for job_id in watched):
            break
        await asyncio.sleep(0.5)
    print(
        "[demo] in another shell: source .venv/bin/activate, then try "
        "jobctl list · jobctl status <id> · jobctl dlq list"
    )
    return ids


async def main() -> None:
    await run_demo(await connect())


if __name__ == "__main__":
    asyncio.run(main())
