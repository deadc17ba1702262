"""``HandlerRegistryWorkflow``: the handler names that workers publish, with their payload
schemas (singleton ``handler-registry``).

Each worker signals-with-start ``publish`` when it starts; the API and the CLI query
``handlers`` to refuse names no worker runs, so a client can only name registered code and an
API server needs none of the handler modules installed. Workers not heard from for
STALE_AFTER are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    import jobctl.workflows.inbox as inbox
    from jobctl.workflows import names
    from jobctl.workflows.models import WorkerHandlers
    from jobctl.workflows.textclip import ellipsize

STALE_AFTER = timedelta(days=7)
# Characters of worker and handler names and schemas kept (inbox.registry_size): the oldest
# workers go beyond it, so the state stays well within one payload across continue-as-new.
REGISTRY_BUDGET = 1_000_000


@workflow.defn(name=names.REGISTRY_WORKFLOW)
class HandlerRegistryWorkflow:
    @workflow.init
    def __init__(self, *args: Any) -> None:
        """Started with one list of WorkerHandlers (checked by inbox.start_arg)."""
        workers = inbox.start_arg(args, inbox.REGISTRY_START, lambda _: None)
        self.workers = {entry.worker: entry for entry in workers}
        self.rejected = 0
        self._trim()

    @workflow.run
    async def run(self, *args: Any) -> None:
        await workflow.wait_condition(
            lambda: (
                workflow.info().is_continue_as_new_suggested()
                or workflow.info().get_current_history_length() > 5_000
            )
        )
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(list(self.workers.values()))

    @workflow.signal(name=names.SIGNAL_PUBLISH)
    def publish(self, *args: Any) -> None:
        """A WorkerHandlers, from a worker starting up."""
        signal = names.SIGNAL_PUBLISH
        try:
            checked = inbox.signal_arg(args, inbox.WORKER_HANDLERS_ARG, signal)
            inbox.check_worker_handlers(checked, workflow.now())
        except inbox.Invalid as err:
            self._reject(str(err))
            return
        self.workers[checked.worker] = checked
        cutoff = workflow.now() - STALE_AFTER
        self.workers = {k: v for k, v in self.workers.items() if v.published_at >= cutoff}
        self._trim()

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        self._reject(inbox.unknown_signal(name))

    def _reject(self, reason: str) -> None:
        """A dropped message: counted and shown in the Web UI (see workflows/inbox.py)."""
        workflow.logger.warning("handler registry: %s", reason)
        self.rejected += 1
        workflow.set_current_details(
            f"{self.rejected} invalid message(s) dropped in this run; "
            f"latest: {ellipsize(reason, inbox.MAX_REASON)}"
        )

    def _trim(self) -> None:
        """Drop the least recently published workers beyond REGISTRY_BUDGET."""
        size = sum(inbox.registry_size(entry) for entry in self.workers.values())
        for entry in sorted(self.workers.values(), key=lambda e: e.published_at):
            if size <= REGISTRY_BUDGET:
                return
            size -= inbox.registry_size(entry)
            del self.workers[entry.worker]

    @workflow.query(name=names.QUERY_HANDLERS)
    def handlers(self) -> list[str]:
        return sorted({name for entry in self.workers.values() for name in entry.handlers})

    @workflow.query(name=names.QUERY_CATALOG)
    def catalog(self) -> list[WorkerHandlers]:
        """What each worker published (names, payload schemas), most recent first."""
        return sorted(self.workers.values(), key=lambda entry: entry.published_at, reverse=True)
