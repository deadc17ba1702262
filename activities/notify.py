"""Alerts for parked jobs: a notifier interface, a log line by default, a webhook for real.

``JOBS_ALERT_WEBHOOK=https://...`` adds a JSON POST per batch of parked jobs::

    {"event": "jobs.parked", "count": 2, "entries": [{"job_id": ..., "last_error": ...}, ...]}

Delivery is retried by the ``notify_dead_jobs`` activity's RetryPolicy; a webhook that stays
down never blocks parking and never loses an entry (entries live in the DLQ, not in alerts).
"""

from __future__ import annotations

import logging
import os
from typing import Protocol

from jobctl.workflows.models import DeadEntry

log = logging.getLogger("jobs.alerts")
WEBHOOK_ENV = "JOBS_ALERT_WEBHOOK"


class Notifier(Protocol):
    async def notify(self, entries: list[DeadEntry]) -> None:
        """Raise to have the delivery retried."""


class LogNotifier:
    async def notify(self, entries: list[DeadEntry]) -> None:
        for entry in entries:
            log.warning(
                "job %s (%s, handler %s) parked in the dead-letter queue after %d attempts: %s",
                entry.job_id,
                entry.name,
                entry.handler,
                entry.attempts,
                entry.last_error,
            )


class WebhookNotifier:
    def __init__(self, url: str, timeout: float = 10.0):
        self.url = url
        self.timeout = timeout

    async def notify(self, entries: list[DeadEntry]) -> None:
        body = {
            "event": "jobs.parked",
            "count": len(entries),
            "entries": [entry.model_dump(mode="json") for entry in entries],
        }
        import httpx  # on first use, as in activities.builtin: ~0.1 s of start-up spared

        async with httpx.AsyncClient(timeout=self.timeout) as client:
            response = await client.post(self.url, json=body)
        response.raise_for_status()


class AllNotifiers:
    """Log always; webhook too when configured."""

    def __init__(self, notifiers: list[Notifier]):
        self.notifiers = notifiers

    async def notify(self, entries: list[DeadEntry]) -> None:
        for notifier in self.notifiers:
            await notifier.notify(entries)


def notifier_from_env() -> Notifier:
    notifiers: list[Notifier] = [LogNotifier()]
    url = os.environ.get(WEBHOOK_ENV)
    if url:
        notifiers.append(WebhookNotifier(url))
    return AllNotifiers(notifiers)
