"""Rate limits under load: 3 workers, 2,000 jobs on a key limited to 20/s, and beside it a
second key limited to 5/s (300 jobs by default), every job due at the same moment.

    python -m bench.limits [--jobs 2000 --rate 20/s --second-jobs 300 --second-rate 5/s]

Reported per key, from the handlers' own start records and each job's reservation (the
``start_at`` of the ``rate_granted`` signal in its history):

- starts per second over every 10 s window (sliding, one per start, inside the key's run)
  against the rate ± 10 %: min and max;
- each start's lateness: the handler's start minus the start its limiter allowed (p50, p99,
  max), and how many began before it (none may, beyond the clock slack of two processes);
- the spacing of the reservations themselves (never closer than 1/rate with burst 1).

The second key's figures show whether the first's flood slows it. Results go to
bench/results/limits-<stamp>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import time
from datetime import UTC, datetime
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from bench.common import (
    OURS_QUEUE,
    gather_limited,
    read_starts,
    side,
    summary,
    wait_for_starts,
    write_result,
)
from jobctl.activities.registry import load_handlers
from jobctl.starter import operations
from jobctl.workflows import names
from jobctl.workflows.models.ratelimit import RateGrant
from jobctl.workflows.rates import parse_rate

CALLERS = 50
WINDOW = 10.0
TOLERANCE = 0.10  # the bound: the rate ± 10 % over every 10 s window


async def reservation(client: Client, job_id: str) -> float | None:
    """The start a job's limiter allowed it (epoch seconds), from its history."""
    history = await client.get_workflow_handle(job_id).fetch_history()
    for event in history.events:
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            continue
        attrs = event.workflow_execution_signaled_event_attributes
        if attrs.signal_name == names.SIGNAL_RATE_GRANTED:
            (grant,) = await client.data_converter.decode(attrs.input.payloads, [RateGrant])
            return float(grant.start_at.timestamp())
    return None


def windows(starts: list[float], width: float = WINDOW) -> list[float]:
    """Starts per second in every ``width``-second window that begins at a start and ends
    by the last one (the key's run, no ramp-down past its end)."""
    ordered = sorted(starts)
    rates = []
    j = 0
    for i, first in enumerate(ordered):
        if first + width > ordered[-1]:
            break
        while j < len(ordered) and ordered[j] < first + width:
            j += 1
        rates.append((j - i) / width)
    return rates


def key_figures(
    rate: str, jobs: list[str], begun: dict[str, float], allowed: dict[str, float | None]
) -> dict[str, Any]:
    per_second = parse_rate(rate).per_second
    starts = [begun[j] for j in jobs if j in begun]
    reserved = sorted(a for j in jobs if (a := allowed.get(j)) is not None)
    pairs = sorted((a, j) for j in jobs if j in begun and (a := allowed.get(j)) is not None)
    late = [begun[j] - a for a, j in pairs]
    rates = windows(starts)
    gaps = [b - a for a, b in itertools.pairwise(reserved)]
    low, high = per_second * (1 - TOLERANCE), per_second * (1 + TOLERANCE)
    return {
        "rate": rate,
        "jobs": len(jobs),
        "started": len(starts),
        "reserved": len(reserved),
        "run_seconds": max(starts) - min(starts) if starts else None,
        "windows": len(rates),
        "window_rate_min": min(rates) if rates else None,
        "window_rate_max": max(rates) if rates else None,
        "windows_outside_10pct": sum(1 for r in rates if not low <= r <= high),
        "lateness": summary(late) if late else None,
        "began_early": sum(1 for x in late if x < 0),
        "earliest": min(late) if late else None,
        "min_reservation_gap": min(gaps) if gaps else None,
        "reserved_span": reserved[-1] - reserved[0] if reserved else None,
        # Raw, relative to the first reservation: for plots and second looks.
        "reserved_at": [round(r - reserved[0], 4) for r in reserved] if reserved else [],
        "lateness_by_start": [
            [round(a - reserved[0], 4), round(begun[j] - a, 4)] for a, j in pairs
        ],
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    os.environ["JOBS_TASK_QUEUE"] = OURS_QUEUE
    handlers = load_handlers("bench.handlers").names()
    async with side() as (server, client, workers, records):
        for _ in range(args.workers):
            workers.ours(server, records)
        due = time.time() + args.ahead
        run_at = datetime.fromtimestamp(due, UTC)
        plan = [(f"a-{i}", "key-a", args.rate) for i in range(args.jobs)]
        plan += [(f"b-{i}", "key-b", args.second_rate) for i in range(args.second_jobs)]

        async def one(job_id: str, key: str, rate: str) -> None:
            now = datetime.now(UTC)
            spec = {
                "id": job_id,
                "name": "limited",
                "handler": "bench.noop",
                "run_at": run_at,
                "rate_key": key,
                "rate": rate,
                "dispatch_lead": args.lead,
            }
            await operations.start(client, operations.validate_spec(spec, handlers, now), now)

        began = time.monotonic()
        await gather_limited(CALLERS, (one(*item) for item in plan))
        scheduling = time.monotonic() - began
        print(f"scheduled {len(plan)} jobs in {scheduling:.1f}s; due in {due - time.time():.1f}s")
        expected = args.jobs / parse_rate(args.rate).per_second
        await wait_for_starts(records, len(plan), timeout=args.ahead + expected * 2 + 300)
        starts = read_starts(records)
        begun = {key: start for key, (_, start) in starts.items()}
        found = await gather_limited(CALLERS, (reservation(client, j) for j, _, _ in plan))
        allowed = {j: a for (j, _, _), a in zip(plan, found, strict=True)}
    a_jobs = [j for j, k, _ in plan if k == "key-a"]
    b_jobs = [j for j, k, _ in plan if k == "key-b"]
    return {
        "workers": args.workers,
        "schedule_seconds": scheduling,
        "key_a": key_figures(args.rate, a_jobs, begun, allowed),
        "key_b": key_figures(args.second_rate, b_jobs, begun, allowed),
    }


def show(name: str, row: dict[str, Any]) -> None:
    late = row["lateness"] or {}
    print(
        f"{name} {row['rate']:>5}: {row['started']}/{row['jobs']} started over "
        f"{row['run_seconds'] or 0:.1f}s; 10 s windows ({row['windows']}): "
        f"{row['window_rate_min'] or 0:.1f}-{row['window_rate_max'] or 0:.1f}/s, "
        f"{row['windows_outside_10pct']} outside ±10 %; lateness p50 {late.get('p50', 0):.3f}s "
        f"p99 {late.get('p99', 0):.3f}s max {late.get('max', 0):.3f}s; "
        f"began early {row['began_early']} (earliest {row['earliest'] or 0:+.4f}s); "
        f"closest reservations {row['min_reservation_gap'] or 0:.4f}s apart",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rate", default="20/s")
    parser.add_argument("--second-jobs", type=int, default=300)
    parser.add_argument("--second-rate", default="5/s")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--ahead", type=float, default=150, help="notice: run_at this far ahead")
    parser.add_argument(
        "--lead", type=float, default=120, help="dispatch_lead: each job asks its limiter then"
    )
    args = parser.parse_args()
    result = asyncio.run(run(args))
    show("key a", result["key_a"])
    show("key b", result["key_b"])
    path = write_result("limits", {**vars(args), **result})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
