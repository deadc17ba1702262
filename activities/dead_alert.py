"""The dead-job alert raised by the attempt that ends its round, where that costs nothing.

The dead-letter queue alerts for each parked job through its ``notify_dead_jobs`` activity:
batched, retried, one billable action per batch (for a lone dead job, one per park). When a
worker's notifier is the log alone (no ``JOBS_ALERT_WEBHOOK``), that activity only writes a
log line, which the attempt whose failure ends the round can write itself: it logs the same
line, counts ``jobs_dead``, and marks the round's log ``alerted``; the job carries the mark in
its park and the DLQ records the alert without an activity. An attempt lost by its lease
writes nothing, so its park arrives unmarked and the DLQ alerts as before; with a webhook
every alert goes out in the DLQ's batches. The notifier is a worker setting: like the
webhook, set it the same on every worker.
"""

from __future__ import annotations

from activities.metrics import record_dead
from activities.notify import LogNotifier
from workflows.models import DeadEntry, HeartbeatState, JobSpec


class RoundEndAlert:
    """Raises the alert for a round that ends in failure, when the worker alerts by log
    alone (``notifier`` set); with ``notifier`` None the DLQ alerts, as it always may."""

    def __init__(self, notifier: LogNotifier | None = None) -> None:
        self.notifier = notifier

    async def round_ended(self, spec: JobSpec, state: HeartbeatState) -> None:
        """Alert for the job whose round ``state`` just ended (its last attempt closed, with
        the error it recorded), and mark the log so the DLQ does not alert again."""
        if self.notifier is None or not state.attempts:
            return
        last = state.attempts[-1]
        entry = DeadEntry(
            job_id=spec.id,
            name=spec.name,
            handler=spec.handler,
            attempts=last.attempt,  # counts across rounds, as the job's own park does
            last_error=last.error,  # the message the attempt's failure carries
            parked_at=last.ended_at or last.started_at,
            round=last.round,
        )
        record_dead(spec.handler)
        await self.notifier.notify([entry])
        state.alerted = True
