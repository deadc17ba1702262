"""Schedule a job from Python code: a one-shot in 5 seconds, its status, then its result.

    python -m jobctl.starter.schedule_from_python

Connects like every ``jobs`` command (``TEMPORAL_ADDRESS``, ``TEMPORAL_PROFILE``...) and
needs a worker (``jobctl worker``, or ``jobctl dev``) to run the job.
"""

from __future__ import annotations

from jobctl import JobsClient
from jobctl.starter.process_exit import run_script


async def main() -> None:
    client = await JobsClient.connect()
    handle = await client.schedule(
        "hello from Python", handler="log", payload={"message": "hi"}, in_=5
    )
    print(f"{handle.job_id}: {(await handle.status()).status}, runs at {handle.next_run_at}")
    report = await handle.result(timeout=60)
    print(f"{handle.job_id}: {report.status}, attempts: {len(report.attempts)}")


if __name__ == "__main__":
    run_script(main)
