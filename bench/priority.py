"""Priority and fairness under a backlog, ours (as we ship them: the dev server with
matching's priority and fairness on, workers with their default prefetch and slot gate, jobs
carrying priority and fairness keys) vs the same run with both off (the server's arrival
order, and the same jobs without priority or fairness keys, so every gate is FIFO).

* priority: ``--low`` priority-5 jobs due now queue behind busy workers (``--slots`` handler
  slots, each handler ``--seconds`` long); a priority-1 job due 2 s after the last of them is
  scheduled. Its lag (handler start - run_at) is the figure; the issue asks for <= 2 s with
  2,000 queued.
* fairness: tenant A submits ``--ratio`` times tenant B's ``--tenant-b`` jobs, interleaved
  and due evenly over a window in which they are ``--load`` (1.6) times what the worker can
  run, so A's backlog grows; B's p99 wait (handler start - run_at) vs B's p99 alone over the
  same window (the issue asks for <= 2x). ``--cap-a N`` also puts tenant A's jobs under a
  concurrency limit of N on our side (below ``--slots``, it keeps slots free for B);
  ``--slots-per-key N`` instead limits every fairness key to N of the worker's slots
  (``JOBS_SLOTS_PER_KEY``, no Temporal work). ``--split`` runs each side's workflows and
  activities in two worker processes (``JOBS_WORKER_ROLE``) instead of one.

    python -m bench.priority [--low 2000] [--tenant-b 50] [--ratio 20] [--prefetch N]
                             [--cap-a N] [--slots-per-key N] [--split] [--rounds 3]

Fairness runs ``--rounds`` pairs on our side (the verdict is their median p99 ratio) and one
pair with fairness off.

Handlers are ``test.record`` (tests/handlers.py): one start line per attempt, with its run_at.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import Workers, gather_limited, percentile, side, write_result
from jobctl.starter.dev.devserver import DevServer
from jobctl.starter.jobsclient import JobsClient

QUEUE = "bench-jobs"  # bench.common's worker queue
OFF = {"matching.useNewMatcher": False, "matching.enableFairness": False}


def start_times(records: Path) -> dict[str, tuple[float, float]]:
    """idempotency key -> (when its first handler start was, that start's lag after run_at)."""
    times: dict[str, tuple[float, float]] = {}
    if records.exists():
        for line in records.read_text().splitlines():
            row = json.loads(line)
            if row["event"] == "start":
                times.setdefault(row["key"], (row["at"], row["at"] - row["scheduled_at"]))
    return times


def starts(records: Path) -> dict[str, float]:
    """idempotency key -> lag (s) of its first handler start after its run_at."""
    return {key: lag for key, (_, lag) in start_times(records).items()}


async def until_started(records: Path, count: int, timeout: float) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while len(lags := starts(records)) < count and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    return lags


async def submit(
    client: JobsClient, records: Path, seconds: float, key: str, at: datetime, **fields: Any
) -> None:
    await client.schedule(
        key,
        handler="test.record",
        payload={"path": str(records), "seconds": seconds},
        at=at,
        idempotency_key=key,
        **fields,
    )


def start_worker(
    server: DevServer, workers: Workers, records: Path, args: argparse.Namespace, enabled: bool
) -> None:
    extra = {} if args.prefetch is None else {"JOBS_PREFETCH": str(args.prefetch)}
    if enabled and args.slots_per_key is not None:
        extra["JOBS_SLOTS_PER_KEY"] = str(args.slots_per_key)
    # --split: a workflows worker and an activities worker (JOBS_WORKER_ROLE) instead of one
    # worker for both, on both sides (a deployment shape, not a feature being compared).
    for role in ("workflows", "activities") if args.split else ("all",):
        workers.ours(
            server,
            records,
            JOBS_HANDLER_MODULES="tests.handlers",
            JOBS_MAX_CONCURRENT_JOBS=str(args.slots),
            JOBS_WORKER_ROLE=role,
            **extra,
        )


def fields(enabled: bool, **values: Any) -> dict[str, Any]:
    """The job's priority/fairness fields on our side; none on the side without them."""
    return values if enabled else {}


async def priority_run(args: argparse.Namespace, enabled: bool) -> dict[str, Any]:
    async with side(dynamic_config={} if enabled else OFF) as (server, _, workers, records):
        client = await JobsClient.connect(server.address, task_queue=QUEUE)
        start_worker(server, workers, records, args, enabled)
        now = datetime.now(UTC)
        tag = uuid.uuid4().hex[:6]
        low = fields(enabled, priority=5)
        lows = [
            submit(client, records, args.seconds, f"low-{tag}-{i}", now, **low)
            for i in range(args.low)
        ]
        await gather_limited(50, lows)
        queued = args.low - len(starts(records))
        urgent_at = datetime.now(UTC) + timedelta(seconds=2)
        urgent = fields(enabled, priority=1)
        await submit(client, records, args.seconds, "urgent", urgent_at, **urgent)
        lags = await until_started(records, args.low + 1, timeout=args.low * args.seconds + 300)
        times = start_times(records)
        after = sum(1 for key, (at, _) in times.items() if at > times["urgent"][0])
        return {
            "enabled": enabled,
            "queued_when_urgent_arrived": queued,
            "urgent_lag_s": round(lags["urgent"], 3),
            "low_started_after_urgent": after,
        }


async def fairness_run(args: argparse.Namespace, enabled: bool, flood: bool) -> dict[str, Any]:
    async with side(dynamic_config={} if enabled else OFF) as (server, _, workers, records):
        client = await JobsClient.connect(server.address, task_queue=QUEUE)
        start_worker(server, workers, records, args, enabled)
        flood_count = args.tenant_b * (args.ratio + 1)
        # Due evenly over a window in which A's and B's jobs together are ``--load`` times
        # what the worker can run (B alone: the same window, a fraction of it), starting
        # after the last is submitted (~40 starts/s here): B's wait is the queue's doing.
        window = flood_count * args.seconds / args.slots / args.load
        start = datetime.now(UTC) + timedelta(seconds=5 + flood_count / 40)
        step = timedelta(seconds=window / args.tenant_b)
        tag = uuid.uuid4().hex[:6]
        # --cap-a: tenant A also under a concurrency limit below the slots, which keeps
        # slots free for B (fairness alone shares the slots; it reserves none).
        cap = {"concurrency_key": f"a-{tag}", "concurrency_limit": args.cap_a}
        a = fields(enabled, fairness_key="a", **(cap if args.cap_a else {}))
        b = fields(enabled, fairness_key="b")
        jobs = []
        for i in range(args.tenant_b):
            due = start + step * i
            if flood:
                jobs += [
                    submit(
                        client,
                        records,
                        args.seconds,
                        f"a-{tag}-{i}-{j}",
                        due + step * (j / args.ratio),
                        **a,
                    )
                    for j in range(args.ratio)
                ]
            jobs.append(submit(client, records, args.seconds, f"b-{tag}-{i}", due, **b))
        await gather_limited(50, jobs)
        late = (datetime.now(UTC) - start).total_seconds()
        lags = await until_started(records, len(jobs), timeout=len(jobs) * args.seconds + 300)
        a_lags = [lag for key, lag in lags.items() if key.startswith("a-")]
        b_lags = [lag for key, lag in lags.items() if key.startswith("b-")]
        return {
            "enabled": enabled,
            "flood": flood,
            "jobs": len(jobs),
            "window_s": round(window, 2),
            "submitted_after_first_due_s": round(late, 3),
            "a_p99_s": round(percentile(a_lags, 99), 3) if a_lags else None,
            "b_jobs": len(b_lags),
            "b_p50_s": round(percentile(b_lags, 50), 3),
            "b_p99_s": round(percentile(b_lags, 99), 3),
        }


async def fairness_rounds(args: argparse.Namespace, enabled: bool, rounds: int) -> dict[str, Any]:
    """``rounds`` pairs of runs (B alone, then beside A's flood), each on fresh servers; the
    verdict is the median of the pairs' p99 ratios. One pair's p99 is the slowest 1 of 50
    starts of a few milliseconds: one late start decides it (2x-24x in single runs of the
    same tree here), so a single pair is no figure to hold the 2x to."""
    pairs = []
    for _ in range(rounds):
        alone = await fairness_run(args, enabled, flood=False)
        flood = await fairness_run(args, enabled, flood=True)
        ratio = round(flood["b_p99_s"] / alone["b_p99_s"], 2)
        pairs.append({"alone": alone, "flood": flood, "b_p99_ratio": ratio})
        print(json.dumps({"enabled": enabled, "split": args.split, **pairs[-1]}), flush=True)
    ratios = [pair["b_p99_ratio"] for pair in pairs]
    median = statistics.median(ratios)
    return {
        "pairs": pairs,
        "b_p99_ratios": ratios,
        "b_p99_ratio": median,
        "b_within_2x": median <= 2,
    }


async def main(args: argparse.Namespace) -> None:
    rows: dict[str, Any] = {"args": vars(args)}
    for enabled in (True, False):
        name = "ours" if enabled else "off"
        if "priority" in args.parts:
            rows[f"priority_{name}"] = await priority_run(args, enabled)
        if "fairness" in args.parts:
            # The side without fairness is a contrast of three orders of magnitude: once.
            rounds = args.rounds if enabled else 1
            rows[f"fairness_{name}"] = await fairness_rounds(args, enabled, rounds)
    for name in ("ours", "off"):
        verdict: dict[str, Any] = {}
        if "priority" in args.parts:
            lag = rows[f"priority_{name}"]["urgent_lag_s"]
            verdict |= {"urgent_lag_s": lag, "urgent_within_2s": lag <= 2.0}
        if "fairness" in args.parts:
            fair = rows[f"fairness_{name}"]
            verdict |= {k: fair[k] for k in ("b_p99_ratios", "b_p99_ratio", "b_within_2x")}
        rows[f"verdict_{name}"] = verdict
    print(json.dumps({k: v for k, v in rows.items() if k.startswith("verdict")}, indent=1))
    print(f"written to {write_result('priority', rows)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--low", type=int, default=2000)
    parser.add_argument("--tenant-b", type=int, default=50)
    parser.add_argument("--ratio", type=int, default=20)
    # Demand must exceed capacity for a backlog, yet stay within what one worker process (and
    # the dev server, on a shared 2-core box) can dispatch, or every wait is CPU: 10 slots of
    # 0.4 s handlers run 25 jobs/s; at --load 1.6 tenants A and B ask for 40/s.
    parser.add_argument("--slots", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=0.4)
    parser.add_argument("--parts", nargs="+", default=["priority", "fairness"])
    parser.add_argument(
        "--rounds", type=int, default=3, help="fairness pairs on our side (median ratio)"
    )
    parser.add_argument("--load", type=float, default=1.6, help="A+B demand / capacity")
    parser.add_argument("--prefetch", type=int, default=None, help="default: the worker's")
    parser.add_argument(
        "--cap-a", type=int, default=None, help="tenant A's concurrency limit (ours only)"
    )
    parser.add_argument(
        "--slots-per-key",
        type=int,
        default=None,
        help="the worker's JOBS_SLOTS_PER_KEY (ours only; default: no limit)",
    )
    parser.add_argument(
        "--split",
        action="store_true",
        help="run workflows and activities in two worker processes (JOBS_WORKER_ROLE)",
    )
    asyncio.run(main(parser.parse_args()))
