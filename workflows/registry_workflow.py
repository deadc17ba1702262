"""``HandlerRegistryWorkflow``: the handler names that workers publish (singleton
``handler-registry``).

Each worker signals-with-start ``publish`` when it starts; the API and the CLI query
``handlers`` to refuse names no worker runs, so a client can only name registered code and an
API server needs none of the handler modules installed. Workers not heard from for
STALE_AFTER are dropped.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.models import WorkerHandlers

STALE_AFTER = timedelta(days=7)


@workflow.defn(name="HandlerRegistryWorkflow")
class HandlerRegistryWorkflow:
    @workflow.init
    def __init__(self, workers: list[WorkerHandlers]) -> None:
        self.workers = {entry.worker: entry for entry in workers}

    @workflow.run
    async def run(self, workers: list[WorkerHandlers]) -> None:
        await workflow.wait_condition(
            lambda: (
                workflow.info().is_continue_as_new_suggested()
                or workflow.info().get_current_history_length() > 5_000
            )
        )
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(list(self.workers.values()))

    @workflow.signal
    def publish(self, entry: WorkerHandlers) -> None:
        self.workers[entry.worker] = entry
        cutoff = workflow.now() - STALE_AFTER
        self.workers = {k: v for k, v in self.workers.items() if v.published_at >= cutoff}

    @workflow.query
    def handlers(self) -> list[str]:
        return sorted({name for entry in self.workers.values() for name in entry.handlers})
