"""The worker's workflow-task pollers: a herd's first workflow tasks wait on the task queue's
partitions, and the SDK's default gives them one poller of five. On a busy machine that one
poller's round trips fetched them at 1-4 a second after run_at while the four sticky pollers
served the completions of jobs that had already run (bench.herd --load 2, worker.py). The
worker asks for enough pollers on the partitions to reach every partition of a default
Temporal task queue at once, and keeps as many on its sticky queue: with one there, the
completions' sticky tasks timed out under the same load and went round again."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from temporalio.testing import WorkflowEnvironment
from temporalio.worker import PollerBehaviorAutoscaling, SlotPermit

from jobctl.activities.attempt_slots import AttemptSlots
from jobctl.activities.job_worker import HANDLER_POLLERS_MAX
from jobctl.activities.registry import load_handlers
from jobctl.worker import WorkerSettings, build_worker
from jobctl.workflows.names import handler_task_queue

# A Temporal server splits a task queue into this many partitions unless configured otherwise
# (matching.numTaskqueueReadPartitions).
DEFAULT_PARTITIONS = 4


async def test_each_partition_gets_a_poller_and_the_sticky_queue_as_many(
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
        assert polls - on_partitions >= on_partitions  # as many for the sticky queue
    finally:
        job_worker.close()


async def test_each_handler_queue_scales_its_pollers_with_its_backlog(
    ts_env: WorkflowEnvironment,
) -> None:
    """Attempts reach their worker through their handler's queue, not eagerly with the
    workflow task: each handler's worker polls that queue, its pollers autoscaling
    (activities/job_worker.py, docs/PERFORMANCE.md)."""
    registry = load_handlers("tests.handlers")
    job_worker = build_worker(ts_env.client, WorkerSettings(task_queue="q"), registry)
    try:
        queues = [w.config()["task_queue"] for w in job_worker.handler_workers]
        assert queues == [handler_task_queue("q", name) for name in registry.names()]
        assert "q/handler/log" in queues
        for worker in job_worker.handler_workers:
            behavior = worker.config().get("activity_task_poller_behavior")
            assert isinstance(behavior, PollerBehaviorAutoscaling)
            assert behavior.maximum == HANDLER_POLLERS_MAX == 10
    finally:
        job_worker.close()


@dataclass
class _Reserve:
    task_queue: str
    slot_type: str = "activity"


@dataclass
class _Used:
    permit: SlotPermit
    slot_info: object = "activity"


async def test_a_process_shares_its_attempt_slots_across_its_handler_queues() -> None:
    """One set of slots for all of a process's handler workers (JOBS_MAX_CONCURRENT_JOBS +
    JOBS_PREFETCH in all, not per handler): each queue keeps one poll out while a slot is
    free, and none polls again while every slot holds an attempt."""
    slots = AttemptSlots(1)
    log = await slots.reserve_slot(_Reserve("q/handler/log"))  # type: ignore[arg-type]
    other = await slots.reserve_slot(_Reserve("q/handler/other"))  # type: ignore[arg-type]
    slots.mark_slot_used(_Used(log))  # type: ignore[arg-type]
    again = asyncio.ensure_future(slots.reserve_slot(_Reserve("q/handler/log")))  # type: ignore[arg-type]
    await asyncio.sleep(0.1)
    assert not again.done()  # the process holds its one attempt
    slots.release_slot(_Used(other, None))  # type: ignore[arg-type]
    await asyncio.sleep(0.1)
    assert not again.done()  # a poll that brought nothing frees no attempt's slot
    slots.release_slot(_Used(log))  # type: ignore[arg-type]
    await asyncio.wait_for(again, 5)
