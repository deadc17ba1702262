"""What a handler sees and how it is registered: :class:`JobContext`, :class:`PermanentError`
and the :func:`handler` decorator on the worker's :class:`HandlerRegistry`.

Handler modules import these from :mod:`activities.registry` (the documented path, which
re-exports them); this module exists so that the built-in handlers and the registry's loader
import the same names without importing each other.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeAlias

Handler: TypeAlias = Callable[["JobContext"], Any | Awaitable[Any]]


class PermanentError(Exception):
    """Raised by a handler when retrying cannot help: the job goes straight to the DLQ."""


@dataclass
class JobContext:
    """Everything a handler knows about the attempt it is running."""

    job_id: str
    name: str
    attempt: int  # 1-based, counted across requeues
    max_attempts: int  # attempts in the current round
    scheduled_at: datetime  # the job's run_at (a cron tick's slot)
    idempotency_key: str  # stable across retries: use it to make side effects idempotent
    payload: dict[str, Any]
    worker: str
    _report: Callable[[Any], None] = field(repr=False, default=lambda _: None)
    _cancelled: threading.Event = field(repr=False, default_factory=threading.Event)

    def report_progress(self, details: Any) -> None:
        """Send JSON-serializable progress with the next heartbeat (shown by ``jobs status``)."""
        self._report(details)

    @property
    def cancelled(self) -> bool:
        """True once the job was cancelled or this attempt timed out or lost its lease."""
        return self._cancelled.is_set()

    def sleep(self, seconds: float) -> bool:
        """Sleep in a sync handler; returns early with True if the attempt was cancelled."""
        return self._cancelled.wait(seconds)


class HandlerRegistry:
    """Maps stable handler names to functions. Names are the contract; keep them stable."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    def register(self, name: str) -> Callable[[Handler], Handler]:
        """Decorator: ``@registry.register("email.send")``. Re-registering a name is an error."""

        def add(fn: Handler) -> Handler:
            existing = self._handlers.get(name)
            if existing is not None and existing is not fn:
                raise ValueError(f"handler {name!r} is already registered")
            self._handlers[name] = fn
            return fn

        return add

    def get(self, name: str) -> Handler | None:
        return self._handlers.get(name)

    def names(self) -> list[str]:
        return sorted(self._handlers)

    @staticmethod
    def is_async(fn: Handler) -> bool:
        return inspect.iscoroutinefunction(fn)


registry = HandlerRegistry()  # the worker's: every handler module registers here on import
handler = registry.register
