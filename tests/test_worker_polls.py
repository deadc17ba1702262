"""The worker's workflow-task pollers: a herd's first workflow tasks wait on the task queue's
partitions, and the SDK's default gives them one poller of five. On a busy machine that one
poller's round trips fetched them at 1-4 a second after run_at while the four sticky pollers
served the completions of jobs that had already run (bench.herd --load 2, worker.py). The
worker asks for enough pollers on the partitions to reach every partition of a default
Temporal task queue at once (the SDK keeps at least one on the sticky queue)."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from activities.registry import load_handlers
from worker import WorkerSettings, build_worker

# A Temporal server splits a task queue into this many partitions unless configured otherwise
# (matching.numTaskqueueReadPartitions).
DEFAULT_PARTITIONS = 4


async def test_each_partition_of_a_default_task_queue_gets_a_poller_and_one_to_spare(
    ts_env: WorkflowEnvironment,
) -> None:
    job_worker = build_worker(
        ts_env.client, WorkerSettings(task_queue="polls"), load_handlers("tests.handlers")
    )
    try:
        config = job_worker.worker.config()
        polls = config.get("max_concurrent_workflow_task_polls")
        ratio = config.get("nonsticky_to_sticky_poll_ratio")
        assert polls is not None and ratio is not None
        on_partitions = int(polls * ratio)
        assert on_partitions >= DEFAULT_PARTITIONS + 1  # one per partition, and a spare
    finally:
        job_worker.close()
