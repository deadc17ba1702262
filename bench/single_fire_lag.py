"""Fire lag of a lone job and of a lone cron's slots: the handler's own start (noted by
``bench.noop``) minus the time it was due, one at a time, on the dev server.

    python -m bench.single_fire_lag [--runs 20] [--slots 20]

Cases: a one-shot job due 2 s after it is scheduled; the slots of a ``*/3 * * * * *`` cron
(each slot's job started up to 10 s ahead and handed to the worker at once); and the same
cron with ``dispatch_lead 0`` (each slot's job started at the slot's time, the shape every
cron had before the ``cron-lean-waits`` patch). Also prints the history size of a finished
one-shot job (events and workflow tasks): the server work one job costs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from bench.common import fresh_server, summary, write_result
from bench.handlers import RECORDS_ENV
from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.worker import WorkerSettings, build_worker
from jobctl.workflows.models import JobReport

CRON = "*/3 * * * * *"


def lags_ms(records: Path, prefix: str) -> list[float]:
    """Handler start minus due time (ms) of every start noted for keys with ``prefix``."""
    if not records.exists():
        return []
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    return [(r["started"] - r["scheduled"]) * 1000 for r in rows if r["key"].startswith(prefix)]


async def one_shots(client: Client, runs: int, handlers: list[str]) -> tuple[int, int]:
    """``runs`` jobs one after another; the size of the last one's history."""
    events = tasks = 0
    for i in range(runs):
        run_at = datetime.now(UTC) + timedelta(seconds=2)
        spec = {"id": f"lag-{i}", "name": f"lag-{i}", "handler": "bench.noop", "run_at": run_at}
        job = await operations.schedule(client, spec, handlers)
        handle = client.get_workflow_handle(job.job_id, result_type=JobReport)
        await handle.result()
        history = await handle.fetch_history()
        events = len(history.events)
        tasks = sum(
            e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for e in history.events
        )
    return events, tasks


async def cron_slots(
    client: Client, cron_id: str, slots: int, handlers: list[str], records: Path, **spec: Any
) -> None:
    """Run a cron until ``slots`` of its slots started their handler, then cancel it."""
    data = {"id": cron_id, "name": cron_id, "handler": "bench.noop", "cron": CRON, **spec}
    await operations.schedule(client, data, handlers)
    async with asyncio.timeout(slots * 3 + 60):
        while len(lags_ms(records, cron_id + "@")) < slots:
            await asyncio.sleep(0.5)
    await operations.cancel(client, cron_id)


async def main(runs: int, slots: int) -> None:
    with tempfile.TemporaryDirectory(prefix="jobs-lag-") as tmp:
        records = Path(tmp) / "starts.jsonl"
        os.environ[RECORDS_ENV] = str(records)
        handlers = load_handlers("bench.handlers")
        settings = WorkerSettings(task_queue="jobs")
        async with (
            fresh_server() as (_, client),
            build_worker(client, settings, handlers).running(),
        ):
            events, tasks = await one_shots(client, runs, handlers.names())
            await cron_slots(client, "cron-lean", slots, handlers.names(), records)
            await cron_slots(
                client, "cron-at-slot", slots, handlers.names(), records, dispatch_lead=0
            )
        cases = {
            "one-shot": lags_ms(records, "lag-"),
            f"cron {CRON}": lags_ms(records, "cron-lean@")[:slots],
            f"cron {CRON}, dispatch_lead 0": lags_ms(records, "cron-at-slot@")[:slots],
        }
    stats = {case: summary(lags) for case, lags in cases.items()}
    for case, stat in stats.items():
        print(
            f"{case:<38} fire lag (ms) over {stat['n']:.0f}: "
            + "  ".join(f"{k} {v:.1f}" for k, v in stat.items() if k != "n")
        )
    print(f"history of one successful job: {events} events, {tasks} workflow tasks")
    path = write_result(
        "single_fire_lag", {"fire_lag_ms": stats, "history_events": events, "workflow_tasks": tasks}
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--slots", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.slots))
