"""The handler registry: what each worker publishes."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

MAX_SCHEMA = 100_000  # characters of one handler's payload schema (JSON text)
MAX_SCHEMAS = 400_000  # characters of all the schemas one worker publishes


class WorkerHandlers(BaseModel):
    """What one worker published at start-up: the handler names it runs and, for the typed
    ones, their payload models' JSON schemas (JSON text, by handler name). ``schemas``
    defaults to empty: what workers published before typed handlers existed still reads."""

    worker: str
    handlers: list[str]
    published_at: datetime
    schemas: dict[str, str] = Field(default_factory=dict)
    # The task queue whose jobs it serves; None from workers before queues were recorded
    # (read as serving every queue).
    task_queue: str | None = None
