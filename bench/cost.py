"""Cost per job in Temporal Cloud billable actions, history events, workflow tasks and
visibility writes.

    python -m bench.cost [--slots 5]

One fresh dev server (SQLite file, WAL, metrics endpoint) with our worker and the baseline's.
Each case runs alone in a window; everything the server did in it is counted: the histories
of every run open meanwhile, by the rules in bench/actions.py, plus the activity heartbeats
and queries that reached the server (its metrics endpoint).

Our jobs are scheduled with the defaults a user gets, 45 s ahead (NOTICE, more than the
default dispatch lead); one more one-shot row is due 2 s ahead (within the lead, so its
attempt starts as it reaches the worker). Cases:

- one-shot with a no-op handler: ours, the raw pattern (bench/baseline.py: a timer, then one
  activity) and a Temporal Schedule limited to one action, starting a workflow that runs that
  same activity (no timer: the Schedule waits);
- a job that fails twice, then succeeds;
- a dead-letter round trip: parked after its attempts, requeued, succeeds (the dead-letter
  queue workflow's share included);
- issue 44's features, per job of five: a rate key, a batch member (its share of the batch
  and its callback), a job in a chain of ``after``;
- one cron slot: ours (``*/3 * * * * *``) and a Temporal Schedule firing every 3 s, each
  measured over ``--slots`` slots, from one handler start to the one ``--slots`` later.

The bench itself sends no query (it waits on describe and on the handlers' start records).
Prints a table and writes JSON (per case: actions by kind, events, workflow tasks, the
visibility-store writes the server's history service made (its ``task_requests`` of the
visibility tasks: a start, an upsert, a close), and the dev server's own ``action`` counter
for comparison).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.service import RPCError

from bench.baseline import QUEUE as BASELINE_QUEUE
from bench.baseline import BaselineJob
from bench.common import OURS_QUEUE, start_records, write_result
from bench.meter import MeteredServer, Reading, Window, metered_side, read, window
from jobctl.activities.registry import load_handlers
from jobctl.starter import dlq, operations
from jobctl.starter.operations import batches
from jobctl.workflows.models import JOB_STATUS

SETTLE = 2.0  # after a case: late heartbeats, the DLQ recording a release
# Our cases' notice: more than the default dispatch_lead (30 s), as for a job scheduled ahead.
NOTICE = "45s"
CRON_EVERY = 3  # seconds between cron slots, both sides


class Bench:
    def __init__(self, server: MeteredServer, client: Client, records: Path) -> None:
        self.server, self.client, self.records = server, client, records
        self.handlers = load_handlers("bench.handlers").names()

    async def measured(self, body: Callable[[], Awaitable[None]]) -> Window:
        before = await self.server.settled()
        await body()
        await asyncio.sleep(SETTLE)
        return await window(self.client, before, await self.server.settled())

    async def ours(self, job_id: str, **fields: Any) -> str:
        """Schedule one of our jobs with the defaults a user gets: due NOTICE from now (longer
        than the dispatch lead, so it sleeps on the server and its attempt is checked and
        recorded before run_at); ``fields`` add to or override that."""
        spec = {"id": job_id, "name": job_id, "delay": NOTICE, **fields}
        await operations.schedule(self.client, spec, self.handlers, datetime.now(UTC))
        return job_id

    async def finish(self, job_id: str) -> None:
        await self.client.get_workflow_handle(job_id).result()

    async def finish_once_started(self, job_id: str, timeout: float = 120) -> None:
        """:meth:`finish` for a job a workflow starts (a batch's member or callback)."""
        async with asyncio.timeout(timeout):
            while True:
                with contextlib.suppress(RPCError):
                    return await self.finish(job_id)
                await asyncio.sleep(0.5)

    async def wait_dead(self, job_id: str, timeout: float) -> None:
        handle = self.client.get_workflow_handle(job_id)
        async with asyncio.timeout(timeout):
            while (await handle.describe()).typed_search_attributes.get(JOB_STATUS) != "dead":
                await asyncio.sleep(0.5)

    def starts_since(self, since: float) -> list[float]:
        """Handler start times (epoch seconds) recorded at or after ``since``, in order."""
        rows = start_records(self.records)
        return sorted(row["started"] for row in rows if row["started"] >= since)

    async def slot_boundary(self, since: float, nth: int) -> Reading:
        """Read the counters half a slot after the ``nth`` handler start since ``since``:
        every boundary at the same phase of a slot, away from its burst of work."""
        while len(starts := self.starts_since(since)) < nth:
            await asyncio.sleep(0.2)
        await asyncio.sleep(max(0.0, starts[nth - 1] + CRON_EVERY / 2 - time.time()))
        return await read(self.server)

    async def slots(self, count: int, since: float) -> Window:
        """``count`` whole slots of a periodic job: from half a slot after its first handler
        start to half a slot after the one ``count`` later."""
        async with asyncio.timeout((count + 3) * CRON_EVERY + 90):
            before = await self.slot_boundary(since, 1)
            after = await self.slot_boundary(since, count + 1)
        return await window(self.client, before, after)

    def schedule(self, key: str, every: float, actions: int | None = None) -> Schedule:
        """A Temporal Schedule starting the baseline's workflow with a due time in the past,
        so it runs its one activity at once (the Schedule did the waiting)."""
        return Schedule(
            action=ScheduleActionStartWorkflow(
                BaselineJob.run, args=[key, 0.0], id=f"{key}-wf", task_queue=BASELINE_QUEUE
            ),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=every))]),
            state=ScheduleState(
                limited_actions=actions is not None, remaining_actions=actions or 0
            ),
        )

    async def scheduled_runs(self, key: str) -> list[str]:
        query = f'TemporalScheduledById = "{key}" AND ExecutionStatus = "Completed"'
        return [wf.id async for wf in self.client.list_workflows(query)]


async def one_shots(bench: Bench) -> list[dict[str, Any]]:
    rows = []

    async def ours() -> None:
        await bench.finish(await bench.ours("one-shot", handler="bench.noop"))

    rows.append((await bench.measured(ours)).row("one-shot no-op", "ours"))

    async def ours_due_now() -> None:  # within its dispatch lead: it starts as it arrives
        await bench.finish(await bench.ours("one-shot-now", handler="bench.noop", delay="2s"))

    rows.append((await bench.measured(ours_due_now)).row("one-shot no-op, due now", "ours"))

    async def raw() -> None:
        due = datetime.now(UTC).timestamp() + 2
        await bench.client.execute_workflow(
            BaselineJob.run, args=["b-one-shot", due], id="b-one-shot", task_queue=BASELINE_QUEUE
        )

    rows.append((await bench.measured(raw)).row("one-shot no-op", "raw"))

    async def schedule() -> None:
        await bench.client.create_schedule("sched-once", bench.schedule("sched-once", 2, 1))
        async with asyncio.timeout(120):
            while not await bench.scheduled_runs("sched-once"):
                await asyncio.sleep(0.5)

    rows.append((await bench.measured(schedule)).row("one-shot no-op", "schedule"))
    await bench.client.get_schedule_handle("sched-once").delete()
    return rows


async def failures(bench: Bench) -> list[dict[str, Any]]:
    rows = []

    async def flaky() -> None:
        payload = {"seconds": 0, "fail_times": 2}
        await bench.finish(
            await bench.ours("flaky", handler="demo.sleep", payload=payload, backoff_base=1)
        )

    rows.append((await bench.measured(flaky)).row("fails twice, then ok", "ours"))

    def round_trip(job_id: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            poison = {"seconds": 0, "fail_times": 2}
            parked = await bench.ours(
                job_id, handler="demo.sleep", payload=poison, max_attempts=2, backoff_base=1
            )
            await bench.wait_dead(parked, timeout=120)
            await dlq.release(bench.client, parked, "requeue")
            await bench.finish(parked)

        return run

    # The first park on a fresh server also starts the dead-letter-queue workflow; the second
    # is what every later dead job costs.
    first = await bench.measured(round_trip("round-trip"))
    rows.append(first.row("DLQ round trip, first park", "ours"))
    rows.append((await bench.measured(round_trip("round-trip-2"))).row("DLQ round trip", "ours"))
    return rows


GROUP = 5  # jobs per case below: the per-job figure of a key's limiter, a batch, a chain


async def groups(bench: Bench) -> list[dict[str, Any]]:
    """Issue 44's features, each over GROUP no-op jobs due NOTICE ahead, per job: a rate key
    (its limiter started by the first job), a batch with an ``on_complete`` callback (the
    batch's workflow and the callback included), a chain where each job runs after the one
    before."""
    rows = []

    async def rated() -> None:
        limited = {"handler": "bench.noop", "rate_key": "cost-rate", "rate": "10/s"}
        ids = [await bench.ours(f"rated-{i}", **limited) for i in range(GROUP)]
        await asyncio.gather(*(bench.finish(job_id) for job_id in ids))

    rows.append((await bench.measured(rated)).row("rate-limited one-shot", "ours", per=GROUP))

    async def batch() -> None:
        member = {"name": "m", "handler": "bench.noop", "delay": NOTICE}
        request = {"id": "cost-batch", "on_complete": {"name": "cb", "handler": "bench.noop"}}
        await batches.schedule_batch(
            bench.client, request, [member] * GROUP, bench.handlers, datetime.now(UTC)
        )
        members = [f"cost-batch.{i}" for i in range(GROUP)]
        await asyncio.gather(*(bench.finish_once_started(job_id) for job_id in members))
        await bench.finish_once_started("cost-batch.on_complete")  # once the reports are in

    rows.append((await bench.measured(batch)).row("batch member (+ callback)", "ours", per=GROUP))

    async def chain() -> None:
        ids = [f"chain-{i}" for i in range(GROUP)]
        for i, job_id in enumerate(ids):
            after = {"after": [ids[i - 1]]} if i else {}
            await bench.ours(job_id, handler="bench.noop", **after)
        await bench.finish(ids[-1])

    rows.append((await bench.measured(chain)).row("job after another (chain)", "ours", per=GROUP))
    return rows


async def cron_slots(bench: Bench, slots: int) -> list[dict[str, Any]]:
    since = datetime.now(UTC).timestamp()
    cron = {"id": "cron", "name": "cron", "handler": "bench.noop", "cron": "*/3 * * * * *"}
    await operations.schedule(bench.client, cron, bench.handlers, datetime.now(UTC))
    ours = await bench.slots(slots, since)
    await operations.cancel(bench.client, "cron")
    await asyncio.sleep(CRON_EVERY + SETTLE)  # the cron and its slot settle before the next case

    since = datetime.now(UTC).timestamp()
    handle = await bench.client.create_schedule(
        "sched-cron", bench.schedule("sched-cron", CRON_EVERY)
    )
    theirs = await bench.slots(slots, since)
    await handle.delete()
    return [
        ours.row("cron slot", "ours", per=slots),
        theirs.row("cron slot", "schedule", per=slots),
    ]


async def measure(slots: int) -> list[dict[str, Any]]:
    async with metered_side() as (server, client, workers, records):
        workers.ours(server, records)
        workers.baseline(server, records)
        bench = Bench(server, client, records)
        rows = await one_shots(bench)
        rows += await failures(bench)
        rows += await groups(bench)
        rows += await cron_slots(bench, slots)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'case':27} {'side':9} {'actions':>7} {'events':>7} {'wf tasks':>8} {'vis wr':>6} "
        f"{'srv ctr':>7}"
    )
    lines = [head + "  actions by kind"]
    for r in rows:
        kinds = ", ".join(f"{k} {v:g}" for k, v in r["by_kind"].items())
        lines.append(
            f"{r['case']:27} {r['side']:9} {r['actions']:7.1f} {r['events']:7.1f} "
            f"{r['tasks']:8.1f} {r['visibility_writes']:6.1f} {r['server_action_metric']:7.1f}  "
            f"{kinds}"
        )
    return "\n".join(lines)


async def main(slots: int) -> None:
    os.environ["JOBS_TASK_QUEUE"] = OURS_QUEUE
    rows = await measure(slots)
    print(table(rows))
    path = write_result("cost", {"slots": slots, "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--slots", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.slots))
