"""Schedule a cron job: run a handler on every slot of a cron expression.

    python -m jobctl.starter.schedule_cron                          # `log` every 5 minutes, UTC
    python -m jobctl.starter.schedule_cron --cron "0 9 * * MON-FRI" --tz Europe/Paris

Connects like every ``jobs`` command (``TEMPORAL_ADDRESS``, ``TEMPORAL_PROFILE``...).
"""

from __future__ import annotations

import argparse

from jobctl.connection.client import connect
from jobctl.starter import operations
from jobctl.starter.process_exit import run_script


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Schedule a cron job.")
    parser.add_argument("--id", help="job id (default: job-<uuid>)")
    parser.add_argument("--cron", default="*/5 * * * *", help="5 fields, or 6 with seconds")
    parser.add_argument("--tz", default="UTC", help="IANA time zone")
    parser.add_argument("--handler", default="log")
    parser.add_argument("--task-queue", help="default: JOBS_TASK_QUEUE, else jobs")
    args = parser.parse_args(argv)

    spec = {"name": "cron", "handler": args.handler, "cron": args.cron, "timezone": args.tz}
    spec |= {"payload": {"message": "a cron slot"}} | ({"id": args.id} if args.id else {})
    client = await connect()
    scheduled = await operations.schedule(client, spec, task_queue=args.task_queue)
    for slot in operations.preview_cron(args.cron, args.tz, None, 3):
        print(f"{scheduled.job_id}: a slot at {slot.local} ({args.tz})")


if __name__ == "__main__":
    run_script(main)
