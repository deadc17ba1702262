"""A job spec from ``jobctl schedule``'s flags: the raw dict; the model does the validating."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from jobctl.starter import strictjson
from jobctl.starter.errors import SpecError

SPEC_FLAGS = [
    # (flag, spec field, help)
    ("--id", "id", "Job id (default job-<uuid4>)."),
    ("--max-attempts", "max_attempts", "Attempts before the dead-letter queue (default 8)."),
    ("--backoff-base", "backoff_base", "First retry delay (default 2s)."),
    ("--backoff-max", "backoff_max", "Longest retry delay (default 300s)."),
    ("--jitter", "jitter", "Random extra fraction of each delay, 0-1 (default 0.3)."),
    ("--lease", "lease", "Heartbeat timeout (default 60s)."),
    ("--timeout", "timeout", "Longest one attempt may run (default 1h)."),
    ("--idempotency-key", "idempotency_key", "Key handed to the handler (default: job id)."),
    ("--dispatch-lead", "dispatch_lead", "Hand to a worker up to this early (default 30s; 0: no)."),
    ("--handler-wait", "handler_wait", "Dead after waiting this long for its handler (1d)."),
    ("--overlap", "overlap", "Cron: skip | buffer_one | allow_all | cancel_other."),
    ("--catchup-window", "catchup_window", "Cron: run missed slots this recent (default 60s)."),
    ("--schedule-jitter", "schedule_jitter", "Cron: spread each slot by up to this (default 0)."),
    ("--priority", "priority", "1 (first) to 5 (last) among queued attempts (default 3)."),
    ("--fairness-key", "fairness_key", "Share dispatch fairly between keys (e.g. a tenant id)."),
    ("--fairness-weight", "fairness_weight", "This key's share relative to others (default 1)."),
    ("--concurrency-key", "concurrency_key", "At most --concurrency-limit running with this key."),
    ("--concurrency-limit", "concurrency_limit", "Running attempts allowed per key, cluster-wide."),
    ("--rate-key", "rate_key", "At most --rate starts with this key, cluster-wide."),
    ("--rate", "rate", 'Starts allowed per key: "10/s", "600/m", "100/h".'),
    ("--rate-burst", "rate_burst", "Starts allowed at once after an idle spell (default 1)."),
    ("--start", "start", "Cron: no slot before this instant (ISO-8601)."),
    ("--end", "end", "Cron: no slot after this instant; then the cron is done."),
    ("--max-runs", "max_runs", "Cron: done after this many slots have run."),
    ("--dst-gap", "dst_gap", "Cron: a time a DST change skips: shift (default) | skip."),
    ("--dst-repeat", "dst_repeat", "Cron: a time a DST change repeats: first | last | both."),
    ("--after", "after", "Run once these jobs are done (ids, comma-separated)."),
    (
        "--on-failed-dependency",
        "on_failed_dependency",
        "If one of --after goes dead or is cancelled: cancel (default) | run | wait.",
    ),
]


def spec_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for flag, field, help_text in reversed(SPEC_FLAGS):
        fn = click.option(flag, field, default=None, help=help_text)(fn)
    return fn


def read_payload(text: str) -> Any:
    """``--payload`` takes JSON, or ``@path`` to read it from a file (argv caps one argument
    at 128 KiB on Linux, below the 256 KiB payload limit)."""
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text()
        except OSError as err:
            raise SpecError([("payload", f"cannot read {text[1:]}: {err.strerror}")]) from err
        except UnicodeDecodeError as err:
            raise SpecError([("payload", f"{text[1:]} is not UTF-8 text")]) from err
    try:
        return strictjson.loads(text)  # the API's rules: no NaN/Infinity, no duplicate keys
    except strictjson.JSONRefused as err:
        raise SpecError([("payload", err.reason)]) from err


# Spec fields that are numbers but not durations: the model takes them strictly (a JSON
# number), so the flag's text becomes one here; text that is no number stays text for the
# model to refuse with the field's name.
NUMBER_FLAGS: dict[str, type[int] | type[float]] = {
    "max_attempts": int,
    "jitter": float,
    "priority": int,
    "fairness_weight": float,
    "concurrency_limit": int,
    "rate_burst": int,
    "max_runs": int,
}


def flag_value(field: str, text: str) -> Any:
    if field == "after":  # job ids hold no commas
        return [job_id.strip() for job_id in text.split(",") if job_id.strip()]
    kind = NUMBER_FLAGS.get(field)
    if kind is None:
        return text
    try:
        return kind(text)
    except ValueError:
        return text


def build_spec(
    name: str,
    handler: str,
    payload: str | None,
    at: str | None,
    in_: str | None,
    cron: str | None,
    tz: str | None,
    fields: dict[str, str | None],
) -> dict[str, Any]:
    """The raw spec from CLI flags; the model does all the validating."""
    raw: dict[str, Any] = {"name": name, "handler": handler}
    if payload is not None:
        raw["payload"] = read_payload(payload)
    for key, value in (("run_at", at), ("delay", in_), ("cron", cron), ("timezone", tz)):
        if value is not None:
            raw[key] = value
    raw.update({key: flag_value(key, value) for key, value in fields.items() if value is not None})
    return raw
