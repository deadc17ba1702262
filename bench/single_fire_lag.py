"""Fire lag of a lone job: run_at to handler start, one job at a time, on the dev server.

    python -m bench.single_fire_lag [--runs 20]

Also prints the history size of a finished job (events and workflow tasks): the server work
one job costs.
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime, timedelta

from temporalio.api.enums.v1 import EventType

from activities.registry import load_handlers
from bench.common import fresh_server, summary, write_result
from starter import operations
from worker import WorkerSettings, build_worker
from workflows.models import JobReport


async def main(runs: int) -> None:
    async with fresh_server() as (_, client):
        job_worker = build_worker(client, WorkerSettings(task_queue="jobs"), load_handlers())
        lags, events, tasks = [], 0, 0
        async with job_worker.worker:
            for i in range(runs):
                run_at = datetime.now(UTC) + timedelta(seconds=2)
                spec = {"name": f"lag-{i}", "handler": "log", "run_at": run_at}
                job = await operations.schedule(client, spec, ["log"])
                handle = client.get_workflow_handle(job.job_id, result_type=JobReport)
                report = await handle.result()
                lags.append((report.attempts[0].started_at - run_at).total_seconds() * 1000)
                history = await handle.fetch_history()
                events = len(history.events)
                tasks = sum(
                    e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
                    for e in history.events
                )
        job_worker.close()
    stats = summary(lags)
    print(
        f"single-job fire lag over {runs} runs (ms): "
        + "  ".join(f"{k} {v:.1f}" for k, v in stats.items() if k != "n")
    )
    print(f"history of one successful job: {events} events, {tasks} workflow tasks")
    path = write_result(
        "single_fire_lag", {"fire_lag_ms": stats, "history_events": events, "workflow_tasks": tasks}
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    asyncio.run(main(parser.parse_args().runs))
