"""The scheduler's own metrics: their names, their instruments and the Prometheus endpoint.

A worker serves Prometheus metrics when ``JOBS_METRICS_PORT`` is set (see ``worker.py``): the
SDK's own (``temporal_*``: schedule-to-start latency, slot usage, polls, ...) and these, all
recorded through the SDK's metric meter inside activities, so workflow code stays untouched.
Without that variable the runtime's meter is a no-op and recording costs next to nothing.

Every metric carries ``handler`` plus what the SDK's activity meter adds (``namespace``,
``task_queue``, ``activity_type``, ``service_name``); an attempt's ``task_queue`` is its
handler's queue, ``<job queue>/handler/<handler>`` (``names.handler_task_queue``).
Durations follow the SDK's convention: integer milliseconds, no unit suffix; counters have
no ``_total`` suffix.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity
from temporalio.common import MetricHistogramTimedelta, MetricMeter
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

# The names, as a scrape shows them. Change them only on purpose (dashboards rely on them).
STARTED = "jobs_started"
SUCCEEDED = "jobs_succeeded"
FAILED_ATTEMPTS = "jobs_failed_attempts"
DEAD = "jobs_dead"
FIRE_LAG = "jobs_fire_lag"
DURATION = "jobs_duration"
NAMES = (STARTED, SUCCEEDED, FAILED_ATTEMPTS, DEAD, FIRE_LAG, DURATION)

DESCRIPTIONS = {
    STARTED: "Attempts started: the handler was called (one per attempt in a job's history)",
    SUCCEEDED: "Attempts whose handler returned",
    FAILED_ATTEMPTS: "Attempts whose handler raised, timed out or was unknown",
    DEAD: "Jobs parked in the dead-letter queue (attempts exhausted or a permanent error)",
    FIRE_LAG: "Handler start minus the time the attempt was due (run_at, or its retry time), ms",
    DURATION: "Handler run time of one attempt, ms, by outcome",
}

# The SDK's default buckets (50 ms .. 10 s) are too coarse below and too short above for
# jobs that should start within milliseconds of run_at and may run for up to an hour.
BUCKETS_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
BUCKETS_MS = tuple(round(1000 * seconds) for seconds in BUCKETS_SECONDS)

DEFAULT_HOST = "127.0.0.1"


def bind_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def prometheus_runtime(host: str, port: int) -> Runtime:
    """A runtime serving ``http://host:port/metrics``; the client (and so the worker) must be
    created with it. Raises ValueError when the address is malformed or taken."""
    config = PrometheusConfig(
        bind_address=bind_address(host, port),
        histogram_bucket_overrides={FIRE_LAG: BUCKETS_MS, DURATION: BUCKETS_MS},
    )
    return Runtime(telemetry=TelemetryConfig(metrics=config))


def _meter(handler: str) -> MetricMeter:
    """The current activity's meter (a no-op without a metrics endpoint), with ``handler``."""
    return activity.metric_meter().with_additional_attributes({"handler": handler})


def _histogram(meter: MetricMeter, name: str) -> MetricHistogramTimedelta:
    return meter.create_histogram_timedelta(name, DESCRIPTIONS[name], "duration")


def record_start(handler: str, lag: timedelta) -> None:
    """An attempt reached its handler ``lag`` after it was due (an early start counts as 0)."""
    meter = _meter(handler)
    meter.create_counter(STARTED, DESCRIPTIONS[STARTED]).add(1)
    _histogram(meter, FIRE_LAG).record(max(lag, timedelta(0)))


def record_end(handler: str, outcome: str, ran: timedelta) -> None:
    """An attempt ended: ``succeeded``, ``failed``, ``lost``, ``cancelled`` or ``handed_over``."""
    meter = _meter(handler)
    counter = {"succeeded": SUCCEEDED, "failed": FAILED_ATTEMPTS}.get(outcome)
    if counter is not None:
        meter.create_counter(counter, DESCRIPTIONS[counter]).add(1)
    _histogram(meter, DURATION).record(max(ran, timedelta(0)), {"outcome": outcome})


def record_dead(handler: str) -> None:
    """A job was parked in the dead-letter queue."""
    _meter(handler).create_counter(DEAD, DESCRIPTIONS[DEAD]).add(1)
