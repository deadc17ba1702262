"""The handler registry: what each worker publishes."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel


class WorkerHandlers(BaseModel):
    """What one worker published at start-up: the handler names it runs."""

    worker: str
    handlers: list[str]
    published_at: datetime
