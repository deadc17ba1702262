"""What a handler sees and how it is registered: :class:`JobContext`, :class:`PermanentError`
and the :func:`handler` decorator on the worker's :class:`HandlerRegistry`.

Handler modules import these from :mod:`activities.registry` (the documented path, which
re-exports them); this module exists so that the built-in handlers and the registry's loader
import the same names without importing each other.

A handler may declare a pydantic model for its payload (``@handler(name, payload=Model)``):
its context's ``payload`` is then an instance of the model (annotate it
``JobContext[Model]``), validated before the handler runs; a payload that does not validate
is a :class:`PermanentError` (straight to the DLQ, no retry). The model's JSON schema is
published with the handler's name, so the CLI and the API refuse such a payload at the door.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeAlias

from pydantic import BaseModel, ValidationError
from typing_extensions import TypeVar

Handler: TypeAlias = Callable[["JobContext[Any]"], Any | Awaitable[Any]]
P = TypeVar("P", default=dict[str, Any])
F = TypeVar("F", bound=Callable[..., Any])
SHOWN_PROBLEMS = 5  # validation problems quoted in a PermanentError


class PermanentError(Exception):
    """Raised by a handler when retrying cannot help: the job goes straight to the DLQ."""


class DuplicateHandler(ValueError):
    """Two different functions registered under one handler name (names both modules)."""


@dataclass
class JobContext(Generic[P]):
    """Everything a handler knows about the attempt it is running. ``payload`` is the job's
    payload: a dict, or an instance of the handler's payload model (``JobContext[Model]``)."""

    job_id: str
    name: str
    attempt: int  # 1-based, counted across requeues
    max_attempts: int  # attempts in the current round
    scheduled_at: datetime  # the job's run_at (a cron tick's slot)
    idempotency_key: str  # stable across retries: use it to make side effects idempotent
    payload: P
    worker: str
    _report: Callable[[Any], None] = field(repr=False, default=lambda _: None)
    _cancelled: threading.Event = field(repr=False, default_factory=threading.Event)

    def report_progress(self, details: Any) -> None:
        """Send JSON-serializable progress with the next heartbeat (shown by ``jobctl status``)."""
        self._report(details)

    @property
    def cancelled(self) -> bool:
        """True once the job was cancelled or this attempt timed out or lost its lease."""
        return self._cancelled.is_set()

    def sleep(self, seconds: float) -> bool:
        """Sleep in a sync handler; returns early with True if the attempt was cancelled."""
        return self._cancelled.wait(seconds)


def payload_error(model: type[BaseModel], err: ValidationError) -> PermanentError:
    """A payload that no longer validates: ``payload.amount: Input should be ...``."""
    problems = []
    for problem in err.errors(include_url=False, include_input=False)[:SHOWN_PROBLEMS]:
        where = ".".join(["payload", *(str(part) for part in problem["loc"])])
        problems.append(f"{where}: {problem['msg']}")
    more = err.error_count() - len(problems)
    tail = f" (and {more} more)" if more > 0 else ""
    return PermanentError(f"payload does not match {model.__name__}: {'; '.join(problems)}{tail}")


def _typed_context(model: type[BaseModel], ctx: JobContext[Any]) -> JobContext[Any]:
    try:
        instance = model.model_validate(ctx.payload)
    except ValidationError as err:
        raise payload_error(model, err) from None
    return dataclasses.replace(ctx, payload=instance)


def _as_result(value: Any) -> Any:
    """A model a handler returns is stored as its JSON form."""
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def typed(fn: Callable[..., Any], model: type[BaseModel]) -> Handler:
    """``fn`` run with its payload validated as ``model`` (sync stays sync, async async)."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def run_async(ctx: JobContext[Any]) -> Any:
            return _as_result(await fn(_typed_context(model, ctx)))

        return run_async

    @functools.wraps(fn)
    def run_sync(ctx: JobContext[Any]) -> Any:
        return _as_result(fn(_typed_context(model, ctx)))

    return run_sync


@dataclass(frozen=True)
class Registered:
    """One handler: the function as written, what runs it, and its payload model if any."""

    fn: Callable[..., Any]
    run: Handler
    model: type[BaseModel] | None

    @property
    def module(self) -> str:
        return str(getattr(self.fn, "__module__", "?"))


class HandlerRegistry:
    """Maps stable handler names to functions. Names are the contract; keep them stable."""

    def __init__(self) -> None:
        self._handlers: dict[str, Registered] = {}

    def register(self, name: str, payload: type[BaseModel] | None = None) -> Callable[[F], F]:
        """Decorator: ``@registry.register("email.send")``, optionally with a pydantic model
        for the payload (``payload=EmailRequest``). Registering a name twice is an error."""
        if payload is not None and not (
            isinstance(payload, type) and issubclass(payload, BaseModel)
        ):
            raise TypeError(f"handler {name!r}: payload must be a pydantic model class")

        def add(fn: F) -> F:
            existing = self._handlers.get(name)
            if existing is not None and existing.fn is not fn:
                raise DuplicateHandler(
                    f"handler {name!r} is registered twice: by {existing.module!r} and by "
                    f"{getattr(fn, '__module__', '?')!r}; rename one of them"
                )
            run = typed(fn, payload) if payload is not None else fn
            self._handlers[name] = Registered(fn=fn, run=run, model=payload)
            return fn

        return add

    def get(self, name: str) -> Handler | None:
        """What runs handler ``name`` (a typed handler's payload is validated first)."""
        entry = self._handlers.get(name)
        return entry.run if entry is not None else None

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def entries(self) -> list[tuple[str, Callable[..., Any], type[BaseModel] | None]]:
        """(name, the function as written, its payload model or None), by name."""
        return [(name, e.fn, e.model) for name, e in sorted(self._handlers.items())]

    def modules(self) -> dict[str, str]:
        """Handler name -> the module that registered it."""
        return {name: entry.module for name, entry in sorted(self._handlers.items())}

    def schemas(self) -> dict[str, str]:
        """Handler name -> its payload model's JSON schema (JSON text), for typed handlers."""
        return {
            name: json.dumps(entry.model.model_json_schema(), separators=(",", ":"))
            for name, entry in sorted(self._handlers.items())
            if entry.model is not None
        }

    @staticmethod
    def is_async(fn: Handler) -> bool:
        return inspect.iscoroutinefunction(fn)


registry = HandlerRegistry()  # the worker's: every handler module registers here on import
handler = registry.register
