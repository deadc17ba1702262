"""Schedule a one-shot job: run a handler once, after a delay.

    python -m jobctl.starter.schedule_oneshot          # the `log` handler, in 10 seconds
    python -m jobctl.starter.schedule_oneshot --in 2m --handler demo.sleep \
        --payload '{"seconds": 3}'

Connects like every ``jobctl`` command (``TEMPORAL_ADDRESS``, ``TEMPORAL_PROFILE``...).
"""

from __future__ import annotations

import argparse
import json

from jobctl.connection.client import connect
from jobctl.starter import operations
from jobctl.starter.process_exit import run_script


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Schedule a one-shot job.")
    parser.add_argument("--id", help="job id (default: job-<uuid>)")
    parser.add_argument("--handler", default="log")
    parser.add_argument("--payload", default='{"message": "hello from a starter script"}')
    parser.add_argument("--in", dest="delay", default="10s", help="90, 90s, 5m, 2h")
    parser.add_argument("--task-queue", help="default: JOBS_TASK_QUEUE, else jobs")
    args = parser.parse_args(argv)

    spec = {"name": "one-shot", "handler": args.handler, "payload": json.loads(args.payload)}
    spec |= {"delay": args.delay} | ({"id": args.id} if args.id else {})
    client = await connect()
    scheduled = await operations.schedule(client, spec, task_queue=args.task_queue)
    report = await operations.status(client, scheduled.job_id)
    print(f"{scheduled.job_id}: {report.status.value}, runs at {scheduled.next_run_at}")


if __name__ == "__main__":
    run_script(main)
