"""OpenTelemetry tracing: one trace from ``jobctl schedule`` / ``POST /jobs`` to the handler.

Off unless switched on, and then free: no interceptor, no provider, not even an import of the
OpenTelemetry SDK. On when

* ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set: spans go
  in batches to that collector over OTLP/HTTP (protobuf, port 4318); the exporter reads the
  other standard ``OTEL_EXPORTER_OTLP_*`` variables (headers, timeout, certificates) itself;
* ``JOBS_TRACE_CONSOLE=1``: every span is printed to stderr as it ends (stderr, so
  ``jobctl schedule --json`` keeps a clean stdout), for debugging;

both at once is fine, and ``OTEL_SDK_DISABLED=true`` wins over either. The decision is made
once per process, on first use, and so is the :class:`TracerProvider`. Its ``service.name`` is
``OTEL_SERVICE_NAME``, else ``jobs-<role>``: the role is what the process is, set by its entry
point (:func:`set_role`: the ``jobs`` CLI sets ``cli``, ``worker``, ``api`` or ``dev`` from its
subcommand), else the name of the main script (``python worker.py`` is ``jobs-worker``).

:func:`connection.client.connect` adds Temporal's ``TracingInterceptor`` to every client when
tracing is on; a worker built on such a client picks it up as a worker interceptor too. The
schedule operation is wrapped in a ``jobs.schedule`` span (:func:`schedule_span`), so a trace
reads::

    jobs.schedule                       (CLI or API; job id, handler, kind)
      StartWorkflow:JobWorkflow         (client; the workflow's spans hang on it)
        RunWorkflow:JobWorkflow         (worker; workflow spans are zero-length markers,
        StartActivity:run_job            which keeps them replay-safe)
          RunActivity:run_job           (the handler runs in here)
        CompleteWorkflow:JobWorkflow

The propagation rides on a workflow/activity header, which the payload codec never touches.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the SDK is imported only when tracing is on
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.trace import Span
    from opentelemetry.util.types import AttributeValue
    from temporalio.contrib.opentelemetry import TracingInterceptor

OTLP_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
OTLP_TRACES_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
CONSOLE_ENV = "JOBS_TRACE_CONSOLE"
SERVICE_NAME_ENV = "OTEL_SERVICE_NAME"
SDK_DISABLED_ENV = "OTEL_SDK_DISABLED"
SCHEDULE_SPAN = "jobs.schedule"
TRACER_NAME = "jobs"
FLUSH_SECONDS = 5.0  # longest a CLI waits at exit for its spans to leave (collector down)

_TRUE = {"1", "true", "yes", "on"}


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for tracing (see the module docstring)."""
    env = os.environ if environ is None else environ
    if env.get(SDK_DISABLED_ENV, "").strip().lower() == "true":
        return False
    return bool(
        env.get(OTLP_ENDPOINT_ENV)
        or env.get(OTLP_TRACES_ENDPOINT_ENV)
        or env.get(CONSOLE_ENV, "").strip().lower() in _TRUE
    )


def span_processors(environ: Mapping[str, str] | None = None) -> list[SpanProcessor]:
    """What the environment asks for: OTLP/HTTP in batches, the console as spans end; none
    when tracing is off."""
    env = os.environ if environ is None else environ
    if not enabled(env):
        return []
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )

    processors: list[SpanProcessor] = []
    if env.get(OTLP_ENDPOINT_ENV) or env.get(OTLP_TRACES_ENDPOINT_ENV):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        processors.append(BatchSpanProcessor(OTLPSpanExporter()))
    if env.get(CONSOLE_ENV, "").strip().lower() in _TRUE:
        processors.append(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
    return processors


# -- the process's one decision -----------------------------------------------------------

_lock = threading.Lock()
_role: str | None = None


@dataclass
class _State:
    provider: TracerProvider | None = None
    interceptor: TracingInterceptor | None = None


_state: _State | None = None  # None: not decided yet


def set_role(role: str) -> None:
    """What this process is (``cli``, ``api``, ``worker``, ``dev``): the ``jobs-<role>``
    service name. Call it before the first connect; later it changes nothing."""
    global _role
    _role = role


def role() -> str:
    """The role set by the entry point, else the main script's name (``worker.py``:
    ``worker``), else ``python``."""
    if _role:
        return _role
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    return Path(main).stem if main else "python"


def service_name(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return env.get(SERVICE_NAME_ENV) or f"jobs-{role()}"


def configure(
    processors: Sequence[SpanProcessor] | None = None, environ: Mapping[str, str] | None = None
) -> TracerProvider | None:
    """Decide now, replacing any earlier decision (whose provider is shut down).

    ``processors`` None: from the environment (and the provider becomes OpenTelemetry's global
    one, unless the application set its own, so a handler's own spans can use the plain API
    and nest under ``RunActivity:run_job``, when its thread carries the activity's context);
    given (tests, embedding applications): exactly those, and nothing global is touched.
    Returns the provider, or None when tracing is off.
    """
    global _state
    from_env = processors is None
    chosen = span_processors(environ) if processors is None else list(processors)
    with _lock:
        previous, _state = _state, _State()
        if chosen:
            _state = _build(chosen, service_name(environ), set_global=from_env)
    if previous is not None and previous.provider is not None:
        previous.provider.shutdown()
    return _state.provider


def _build(processors: Sequence[SpanProcessor], name: str, set_global: bool) -> _State:
    from opentelemetry import trace
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from temporalio.contrib.opentelemetry import TracingInterceptor

    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
    for processor in processors:
        provider.add_span_processor(processor)
    if set_global and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        trace.set_tracer_provider(provider)
    interceptor = TracingInterceptor(provider.get_tracer("temporalio.contrib.opentelemetry"))
    return _State(provider, interceptor)


def _current() -> _State:
    with _lock:
        state = _state
    return state if state is not None else _decide()


def _decide() -> _State:
    global _state
    if not enabled():
        with _lock:
            if _state is None:
                _state = _State()
            return _state
    processors = span_processors()
    with _lock:
        if _state is None:  # first caller wins; a racing second one drops its processors
            _state = _build(processors, service_name(), set_global=True)
            return _state
        state = _state
    for processor in processors:
        processor.shutdown()
    return state


def provider() -> TracerProvider | None:
    """This process's tracer provider; None when tracing is off."""
    return _current().provider


def interceptors() -> list[TracingInterceptor]:
    """For ``Client.connect``: Temporal's tracing interceptor, or nothing when off."""
    interceptor = _current().interceptor
    return [interceptor] if interceptor is not None else []


def shutdown(timeout: float = FLUSH_SECONDS) -> None:
    """Export what is buffered and stop, waiting ``timeout`` seconds at most (a CLI that ends
    with ``os._exit`` skips the atexit hook that would do it, and must not hang on a dead
    collector). Does nothing when tracing was never decided or is off."""
    with _lock:
        state = _state
    if state is None or state.provider is None:
        return
    flusher = threading.Thread(target=state.provider.shutdown, name="otel-flush", daemon=True)
    flusher.start()
    flusher.join(timeout)


def reset() -> None:
    """Forget the decision (tests): the next use decides again from the environment."""
    global _state
    with _lock:
        previous, _state = _state, None
    if previous is not None and previous.provider is not None:
        previous.provider.shutdown()


# -- spans --------------------------------------------------------------------------------


class Scheduled(Protocol):
    @property
    def job_id(self) -> str: ...
    @property
    def next_run_at(self) -> datetime | None: ...
    @property
    def created(self) -> bool: ...


class Traced:
    """The span of an operation, or nothing when tracing is off."""

    def __init__(self, span: Span | None = None):
        self.span = span

    def set(self, attributes: Mapping[str, AttributeValue]) -> None:
        if self.span is not None:
            self.span.set_attributes(attributes)

    def scheduled(self, result: Scheduled) -> None:
        """Record what a schedule operation answered."""
        attributes: dict[str, AttributeValue] = {
            "jobs.job_id": result.job_id,
            "jobs.created": result.created,
        }
        if result.next_run_at is not None:
            attributes["jobs.next_run_at"] = result.next_run_at.isoformat()
        self.set(attributes)


@contextlib.contextmanager
def span(
    name: str,
    attributes: Mapping[str, AttributeValue] | None = None,
    carrier: Mapping[str, str] | None = None,
) -> Iterator[Traced]:
    """A span around an operation, current for everything called inside it (so the Temporal
    calls made there are its children). ``carrier``: incoming W3C ``traceparent`` /
    ``baggage`` headers to continue the caller's trace. An exception marks it failed."""
    tracer_provider = provider()
    if tracer_provider is None:
        yield Traced()
        return
    from opentelemetry import propagate, trace

    context = propagate.extract(carrier) if carrier else None
    tracer = tracer_provider.get_tracer(TRACER_NAME)
    kind = trace.SpanKind.SERVER if carrier is not None else trace.SpanKind.INTERNAL
    with tracer.start_as_current_span(
        name, context=context, kind=kind, attributes=attributes
    ) as current:
        yield Traced(current)


def schedule_span(
    spec: Mapping[str, Any], carrier: Mapping[str, str] | None = None
) -> contextlib.AbstractContextManager[Traced]:
    """The root span of ``jobctl schedule`` and ``POST /jobs``: what the request says up front
    (handler, kind, id when given); :meth:`Traced.scheduled` adds the answer."""
    attributes: dict[str, AttributeValue] = {
        "jobs.kind": "cron" if spec.get("cron") is not None else "one-shot"
    }
    for key in ("handler", "id"):
        value = spec.get(key)
        if isinstance(value, str):
            attributes["jobs.job_id" if key == "id" else f"jobs.{key}"] = value
    return span(SCHEDULE_SPAN, attributes, carrier)
