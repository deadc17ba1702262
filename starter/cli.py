"""``jobs``: schedule and control jobs, run a worker or the whole embedded stack.

Exit codes: 0 success, 1 unexpected error, 2 invalid input, 3 unknown job, 4 job id taken,
5 invalid transition, 6 Temporal unreachable. The process ends with ``os._exit`` after
flushing, because the Temporal SDK can crash during interpreter teardown (sdk-python #300)
and turn a success into a SIGABRT for the calling script.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click
from pydantic import BaseModel
from temporalio.client import Client

from starter import dlq as dead_letters
from starter import operations, render, strictjson, tracing
from starter.client import connect
from starter.errors import JobsError, SpecError
from workflows.models import JobStatus

T = TypeVar("T")


def run(work: Callable[[Client], Awaitable[T]]) -> T:
    """Connect and run one operation."""

    async def go() -> T:
        return await work(await connect())

    return asyncio.run(go())


def emit(data: Any) -> None:
    if isinstance(data, BaseModel):
        data = data.model_dump(mode="json")
    click.echo(json.dumps(data, indent=2, default=str))


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)


def note_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--note", help="Why: kept in the job's audit trail with who (cli:<user>) and when."
    )(fn)


def cli_actor() -> str:
    """Who acts, for the audit trail: ``cli:<OS user>``."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no login name in the environment nor the user database
        user = "unknown"
    return f"cli:{user}"


def not_reserved(ctx: click.Context, param: click.Parameter, job_id: str | None) -> str | None:
    """A system workflow's id is refused (exit 2) before connecting to Temporal."""
    if job_id is not None:
        operations.check_not_reserved(job_id)
    return job_id


job_id_argument = click.argument("job_id", callback=not_reserved)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Delayed and cron jobs on Temporal."""
    # The tracing service name: jobs-worker, jobs-api, jobs-dev, else jobs-cli.
    sub = ctx.invoked_subcommand
    tracing.set_role(sub if sub in ("worker", "api", "dev") else "cli")


# -- scheduling --------------------------------------------------------------------------

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
    ("--overlap", "overlap", "Cron: skip | buffer_one | allow_all | cancel_other."),
    ("--catchup-window", "catchup_window", "Cron: run missed slots this recent (default 60s)."),
    ("--schedule-jitter", "schedule_jitter", "Cron: spread each slot by up to this (default 0)."),
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
            text = open(text[1:]).read()  # noqa: SIM115 - tiny, read once
        except OSError as err:
            raise SpecError([("payload", f"cannot read {text[1:]}: {err.strerror}")]) from err
    try:
        return strictjson.loads(text)  # the API's rules: no NaN/Infinity, no duplicate keys
    except strictjson.JSONRefused as err:
        raise SpecError([("payload", err.reason)]) from err


# Spec fields that are numbers but not durations: the model takes them strictly (a JSON
# number), so the flag's text becomes one here; text that is no number stays text for the
# model to refuse with the field's name.
NUMBER_FLAGS: dict[str, type[int] | type[float]] = {"max_attempts": int, "jitter": float}


def flag_value(field: str, text: str) -> Any:
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


@cli.command()
@click.argument("name")
@click.option("--handler", required=True, help="Registered handler name, e.g. demo.sleep.")
@click.option("--payload", help="JSON object handed to the handler, or @file.json.")
@click.option("--at", help="Run at this ISO-8601 time (with offset).")
@click.option("--in", "in_", help="Run after this long: 90, 90s, 5m, 2h.")
@click.option("--cron", help="Cron expression (5 fields, or 6 with seconds first).")
@click.option("--tz", help="IANA time zone for --cron (default UTC).")
@spec_options
@json_option
def schedule(
    name: str,
    handler: str,
    payload: str | None,
    at: str | None,
    in_: str | None,
    cron: str | None,
    tz: str | None,
    as_json: bool,
    **fields: str | None,
) -> None:
    """Schedule a job. Bad input starts nothing and exits 2."""
    raw = build_spec(name, handler, payload, at, in_, cron, tz, fields)
    now = datetime.now(UTC)
    operations.validate_spec(raw, None, now)  # bad input exits 2 even with Temporal down
    with tracing.schedule_span(raw) as span:  # the trace's root (when tracing is on)
        scheduled = run(lambda client: operations.schedule(client, raw, now=now))
        span.scheduled(scheduled)
    # A used id: the identical request again answers the existing job (exit 0, like the API's
    # 200 "created": false); a different request with that id exits 4 (JobExists).
    if as_json:
        emit(scheduled.model_dump(mode="json"))
    else:
        verb = "scheduled" if scheduled.created else "already scheduled (identical request)"
        click.echo(f"{verb} {scheduled.job_id}: runs at {render.when(scheduled.next_run_at)}")


# -- reading -----------------------------------------------------------------------------


@cli.command()
@job_id_argument
@json_option
def status(job_id: str, as_json: bool) -> None:
    """A job's status and attempt history."""
    report = run(lambda client: operations.status(client, job_id))
    click.echo(report.model_dump_json(indent=2) if as_json else render.any_report_text(report))


@cli.command(name="list")
@click.option(
    "--status",
    "status_",
    type=click.Choice([s.value for s in JobStatus]),
    help="Only jobs in this status (the one `jobs status` shows).",
)
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1000))
@click.option("--page-token", help="Continue from a previous page.")
@json_option
def list_(status_: str | None, limit: int, page_token: str | None, as_json: bool) -> None:
    """Jobs and crons, newest first: by when they run (a finished job: by when it ran, at the
    latest when it ended). Within a page; pages follow Temporal's visibility order."""
    page = run(lambda client: operations.list_jobs(client, status_, limit, page_token))
    rows = [
        [r.job_id, r.kind, r.name or "", r.handler or "", r.status or "", render.when(r.run_at)]
        for r in page.jobs
    ]
    show_page(page, ["id", "kind", "name", "handler", "status", "time"], rows, as_json, "jobs list")


def show_page(
    page: BaseModel, headers: list[str], rows: list[list[str]], as_json: bool, command: str
) -> None:
    """One page of a listing: JSON as is, or a table and how to get the next page."""
    if as_json:
        emit(page)
        return
    click.echo(render.table(headers, rows))
    token = getattr(page, "next_page_token", None)
    if token:
        click.echo(f"more: {command} --page-token {token}")


# -- cron ---------------------------------------------------------------------------------


@cli.group()
def cron() -> None:
    """Cron expressions: 5 fields, or 6 with seconds first."""


@cron.command()
@click.argument("expression")
@click.option("--tz", default="UTC", show_default=True, help="IANA time zone.")
@click.option("--after", help="Start after this ISO-8601 time with offset (default: now).")
@click.option("-n", "count", default=5, show_default=True, type=click.IntRange(1, 1000))
@json_option
def preview(expression: str, tz: str, after: str | None, count: int, as_json: bool) -> None:
    """The next slots of EXPRESSION, local and UTC, under our DST rules. Schedules nothing."""
    slots = operations.preview_cron(expression, tz, after, count)
    if as_json:
        emit([slot.model_dump() for slot in slots])
    else:
        click.echo(render.table([f"local ({tz})", "utc"], [[s.local, s.utc] for s in slots]))


@cli.command()
@job_id_argument
@click.option("--cron", "expression", help="New cron expression.")
@click.option("--tz", help="New IANA time zone.")
@click.option("--overlap", type=click.Choice(["skip", "buffer_one", "allow_all", "cancel_other"]))
@note_option
@json_option
def update(
    job_id: str,
    expression: str | None,
    tz: str | None,
    overlap: str | None,
    note: str | None,
    as_json: bool,
) -> None:
    """Change a cron job's expression, zone or overlap policy."""
    change = operations.cron_update(expression, tz, overlap)
    operations.check_note(note)  # a bad note exits 2 before anything is sent
    control(
        f"updated {job_id}",
        lambda client: operations.update_cron(client, job_id, change, note, cli_actor()),
        as_json,
    )


# -- controls ----------------------------------------------------------------------------


def control(verb: str, call: Callable[[Client], Awaitable[Any]], as_json: bool) -> None:
    result = run(call)
    if as_json:
        emit(result if result is not None else {"ok": True})
    else:
        click.echo(verb)


@cli.command()
@job_id_argument
@note_option
@json_option
def cancel(job_id: str, note: str | None, as_json: bool) -> None:
    """Cancel a job; a running attempt is stopped through its heartbeat."""
    operations.check_note(note)
    control(
        f"cancel requested for {job_id}",
        lambda client: operations.cancel(client, job_id, note, cli_actor()),
        as_json,
    )


@cli.command()
@job_id_argument
@click.option("--until", help="Resume by itself at this time (ISO-8601 with offset).")
@note_option
@json_option
def pause(job_id: str, until: str | None, note: str | None, as_json: bool) -> None:
    """Hold a waiting job (optionally until a time)."""
    operations.pause_request(until, note)  # bad input exits 2 before anything is sent
    control(
        f"paused {job_id}",
        lambda client: operations.pause(client, job_id, until, note, cli_actor()),
        as_json,
    )


@cli.command()
@job_id_argument
@note_option
@json_option
def resume(job_id: str, note: str | None, as_json: bool) -> None:
    """Release a paused job."""
    operations.check_note(note)
    control(
        f"resumed {job_id}",
        lambda client: operations.resume(client, job_id, note, cli_actor()),
        as_json,
    )


@cli.command()
@job_id_argument
@note_option
@json_option
def trigger(job_id: str, note: str | None, as_json: bool) -> None:
    """Run a waiting job now."""
    operations.check_note(note)
    control(
        f"triggered {job_id}",
        lambda client: operations.trigger(client, job_id, note, cli_actor()),
        as_json,
    )


# -- dead-letter queue --------------------------------------------------------------------


@cli.group()
def dlq() -> None:
    """The dead-letter queue: jobs that used up their attempts, waiting for a human."""


@dlq.command(name="list")
@click.option("--handler", help="Only jobs of this handler.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1000))
@click.option("--page-token", help="Continue from a previous page.")
@json_option
def dlq_list(handler: str | None, limit: int, page_token: str | None, as_json: bool) -> None:
    """Parked jobs, newest first (from the JobStatus="dead" visibility query)."""
    page = run(lambda client: dead_letters.list_dead(client, limit, page_token, handler))
    rows = [
        [e.job_id, e.name, str(e.attempts), render.when(e.parked_at), (e.last_error or "")[:80]]
        for e in page.entries
    ]
    show_page(
        page, ["id", "name", "attempts", "parked", "last error"], rows, as_json, "jobs dlq list"
    )


@dlq.command(name="log")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 500))
@json_option
def dlq_log(limit: int, as_json: bool) -> None:
    """The DLQ's audit log: parks, requeues, discards, ignored requests, alerts."""
    lines = run(lambda client: dead_letters.audit_log(client, limit))
    if as_json:
        emit([line.model_dump(mode="json") for line in lines])
        return
    click.echo(
        render.table(
            ["at", "action", "job", "detail"],
            [[render.when(x.at), x.action, x.job_id, x.detail] for x in lines],
        )
    )


def release_command(action: dead_letters.Action) -> Callable[..., None]:
    def command(
        job_id: str | None, all_: bool, handler: str | None, note: str | None, as_json: bool
    ) -> None:
        if all_ == (job_id is not None):
            raise click.UsageError("give a job id or --all")
        if handler and not all_:
            raise click.UsageError("--handler goes with --all")
        operations.check_note(note)
        actor = cli_actor()
        if job_id is not None:
            run(lambda client: dead_letters.release(client, job_id, action, note, actor))
            result: dict[str, Any] = {"job_id": job_id, "action": action}
            text = f"{action} sent to {job_id}"
        else:
            count = run(
                lambda client: dead_letters.release_all(client, action, handler, note, actor)
            )
            result = {"action": action, "count": count}
            text = f"{action} sent to {count} dead job(s)"
        click.echo(json.dumps(result) if as_json else text)

    past = "requeued (fresh attempts)" if action == "requeue" else "discarded (dead for good)"
    command.__doc__ = f"Have one dead job, or all (--all [--handler H]), {past}."
    command = json_option(command)
    command = note_option(command)
    command = click.option("--handler", help="With --all: only this handler's jobs.")(command)
    command = click.option("--all", "all_", is_flag=True, help="Every dead job.")(command)
    command = click.argument("job_id", required=False, callback=not_reserved)(command)
    return command


dlq.command(name="requeue")(release_command("requeue"))
dlq.command(name="discard")(release_command("discard"))


# -- processes ---------------------------------------------------------------------------


@cli.command()
@click.option(
    "--max-concurrent-jobs",
    type=int,
    help="Attempts at once (JOBS_MAX_CONCURRENT_JOBS, default 100).",
)
@click.option(
    "--rate-limit", type=float, help="Attempts/s across the task queue (JOBS_RATE_LIMIT)."
)
@click.option(
    "--shutdown-grace",
    type=float,
    help="Seconds running attempts get on SIGTERM (JOBS_SHUTDOWN_GRACE, default 30).",
)
def worker(
    max_concurrent_jobs: int | None, rate_limit: float | None, shutdown_grace: float | None
) -> None:
    """Run a worker (same as python worker.py)."""
    import logging

    from worker import WorkerSettings, run_worker

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = WorkerSettings()
    if max_concurrent_jobs is not None:
        settings.max_concurrent_jobs = max_concurrent_jobs
    if rate_limit is not None:
        settings.rate_limit = rate_limit
    if shutdown_grace is not None:
        settings.shutdown_grace = shutdown_grace
    asyncio.run(run_worker(settings))


@cli.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Anything but loopback needs JOBS_API_TOKEN.",
)
@click.option("--port", default=8000, show_default=True)
def api(host: str, port: int) -> None:
    """Run the HTTP API (OpenAPI at /docs)."""
    from starter.api import server

    http = server(host, port)
    click.echo(f"API on http://{host}:{port} (docs: /docs)")
    asyncio.run(http.serve())


@cli.command()
@click.option(
    "--state-dir", default=".jobs", show_default=True, help="Where the SQLite file lives."
)
@click.option("--port", default=7233, show_default=True)
@click.option("--ui-port", default=8233, show_default=True)
@click.option("--api-port", default=8000, show_default=True)
@click.option("--demo", is_flag=True, help="Schedule the demo jobs once the stack is up.")
def dev(state_dir: str, port: int, ui_port: int, api_port: int, demo: bool) -> None:
    """The embedded stack: dev server (SQLite file), worker and API. Ctrl-C stops it."""
    from starter.devstack import run_dev_stack

    asyncio.run(run_dev_stack(state_dir, port, ui_port, api_port, demo))


# -- entry point -------------------------------------------------------------------------


def report_error(err: Exception) -> int:
    if isinstance(err, SpecError):
        for field, reason in err.problems:
            click.echo(f"error: {field}: {reason}", err=True)
    else:
        click.echo(f"error: {err}", err=True)
    return err.exit_code if isinstance(err, JobsError) else 1


def main(argv: list[str] | None = None) -> None:
    code = 0
    try:
        result = cli.main(args=argv, prog_name="jobs", standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except click.ClickException as err:
        err.show()
        code = err.exit_code
    except click.Abort:
        code = 130
    except KeyboardInterrupt:
        code = 130
    except JobsError as err:
        code = report_error(err)
    except Exception as err:  # last resort: one line, never a traceback, still non-zero
        code = report_error(err)
    finally:
        tracing.shutdown()  # os._exit skips atexit: send the spans now (bounded wait)
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)
