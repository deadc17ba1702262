"""Requeue a dead job: give a job that used up its attempts a fresh attempt budget.

    python -m jobctl.starter.requeue_dead JOB_ID [--note "fixed the upstream outage"]

``jobctl dlq list`` shows the dead jobs. Connects like every ``jobs`` command.
"""

from __future__ import annotations

import argparse

from jobctl.connection.client import connect
from jobctl.starter import dlq, operations
from jobctl.starter.process_exit import run_script


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Requeue a dead job.")
    parser.add_argument("job_id")
    parser.add_argument("--note", help="why: kept in the job's audit trail")
    args = parser.parse_args(argv)

    client = await connect()
    await dlq.release(client, args.job_id, "requeue", args.note, actor="script:requeue_dead")
    report = await operations.status(client, args.job_id)
    print(f"{args.job_id}: requeued, now {report.status.value}")


if __name__ == "__main__":
    run_script(main)
