"""Scheduling, reading and controlling jobs: ``schedule``, ``status``, ``list``, ``cancel``,
``pause``, ``resume``, ``trigger``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, BinaryIO

import click

from jobctl.connection import tracing
from jobctl.starter import operations, render, strictjson
from jobctl.starter.cli import batch
from jobctl.starter.cli.common import (
    cli_actor,
    control,
    emit,
    job_id_argument,
    json_option,
    note_option,
    run,
    show_page,
)
from jobctl.starter.cli.spec import build_spec, spec_options
from jobctl.starter.errors import JobsError, SpecError
from jobctl.workflows.models import JobStatus


@click.command()
@click.argument("name", required=False)
@click.option("--handler", help="Registered handler name, e.g. demo.sleep.")
@click.option("--payload", help="JSON object handed to the handler, or @file.json.")
@click.option("--at", help="Run at this ISO-8601 time (with offset).")
@click.option("--in", "in_", help="Run after this long: 90, 90s, 5m, 2h.")
@click.option("--cron", help="Cron expression (5 fields, or 6 with seconds first).")
@click.option("--tz", help="IANA time zone for --cron (default UTC).")
@click.option(
    "--from-file",
    type=click.File("rb"),
    help="Schedule the specs of a JSON Lines file instead (one spec per line, at most "
    f"{operations.MAX_BATCH}; - reads stdin).",
)
@click.option("--batch", "batch_id", help="With --from-file: the jobs form this batch.")
@click.option("--on-complete", help="With --batch: job spec (JSON or @file) run once all settled.")
@click.option("--on-success", help="With --batch: job spec run once if every job is done.")
@spec_options
@json_option
@click.pass_context
def schedule(
    ctx: click.Context,
    /,
    name: str | None,
    handler: str | None,
    payload: str | None,
    at: str | None,
    in_: str | None,
    cron: str | None,
    tz: str | None,
    from_file: BinaryIO | None,
    batch_id: str | None,
    on_complete: str | None,
    on_success: str | None,
    as_json: bool,
    **fields: str | None,
) -> None:
    """Schedule a job (NAME and --handler), or every spec of a file (--from-file). Bad input
    starts nothing and exits 2; with --from-file each line is judged on its own."""
    if from_file is not None:
        flags = (name, handler, payload, at, in_, cron, tz, *fields.values())
        if any(value is not None for value in flags):
            raise click.UsageError(
                "--from-file takes the specs from the file: give no NAME or spec option"
            )
        if batch_id is not None:
            numbers, specs, bad = read_specs(from_file)
            if bad:  # a batch is all or nothing: a line that is no JSON refuses it
                problems = [(f"line {numbers[i]}", e.problems[0][1]) for i, e in bad.items()]
                raise SpecError(problems)
            batch.schedule_batch_file(specs, batch_id, on_complete, on_success, as_json)
            return
        if on_complete is not None or on_success is not None:
            raise click.UsageError("--on-complete and --on-success need --batch")
        ctx.exit(schedule_file(from_file, as_json))
    if batch_id is not None or on_complete is not None or on_success is not None:
        raise click.UsageError("--batch, --on-complete and --on-success need --from-file")
    if name is None or handler is None:
        raise click.UsageError("give NAME and --handler (or --from-file)")
    raw = build_spec(name, handler, payload, at, in_, cron, tz, fields)
    now = datetime.now(UTC)
    checked = operations.submission(raw, now)  # bad input exits 2 even with Temporal down
    with tracing.schedule_span(raw) as span:  # the trace's root (when tracing is on)
        scheduled = run(lambda client: operations.schedule(client, checked, now=now))
        span.scheduled(scheduled)
    # A used id: the identical request again answers the existing job (exit 0, like the API's
    # 200 "created": false); a different request with that id exits 4 (JobExists).
    if as_json:
        emit(scheduled.model_dump(mode="json"))
    else:
        verb = "scheduled" if scheduled.created else "already scheduled (identical request)"
        click.echo(f"{verb} {scheduled.job_id}: runs at {render.when(scheduled.next_run_at)}")
    for warning in scheduled.warnings:  # accepted, exit 0: it says what the job waits for
        click.echo(f"warning: {warning}", err=True)


def read_specs(stream: BinaryIO) -> tuple[list[int], list[Any], dict[int, SpecError]]:
    """The non-blank lines of a JSON Lines file: their numbers, their values, and the lines
    that are no JSON (by position). Over MAX_BATCH specs is refused before reading on."""
    numbers: list[int] = []
    values: list[Any] = []
    bad: dict[int, SpecError] = {}
    for number, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        if len(values) == operations.MAX_BATCH:
            most = operations.MAX_BATCH
            reason = (
                f"more than {most} specs in the file: at most {most} per batch (split -l {most})"
            )
            raise SpecError([("jobs", reason)])
        numbers.append(number)
        try:
            values.append(strictjson.loads(line))
        except strictjson.JSONRefused as err:
            bad[len(values)] = SpecError([("spec", err.reason)])
            values.append(None)
    return numbers, values, bad


def schedule_file(stream: BinaryIO, as_json: bool) -> int:
    """``jobctl schedule --from-file``: one line of output per spec, in order (the scheduled on
    stdout, the refused on stderr as ``line N: error: field: reason``). Exit 0 when all were
    scheduled, 2 when any spec was invalid, else the code of the first failure (4 id taken,
    6 Temporal unreachable), as a single ``jobctl schedule`` of it would exit."""
    numbers, values, bad = read_specs(stream)
    now = datetime.now(UTC)
    checked = [bad.get(i, item) for i, item in enumerate(operations.check_batch(values, now))]
    if any(isinstance(item, operations.Submission) for item in checked):
        results = run(lambda client: operations.start_checked(client, checked, None, now))
    else:  # nothing valid: Temporal is not asked
        results = [operations.ItemResult(error=i) for i in checked if isinstance(i, JobsError)]
    if as_json:
        emit([item_json(number, result) for number, result in zip(numbers, results, strict=True)])
    else:
        for number, result in zip(numbers, results, strict=True):
            show_item(number, result)
    errors = [result.error for result in results if result.error is not None]
    if not errors:
        return 0
    return 2 if any(isinstance(err, SpecError) for err in errors) else errors[0].exit_code


def show_item(number: int, result: operations.ItemResult) -> None:
    if result.scheduled is not None:
        done = result.scheduled
        verb = "scheduled" if done.created else "already scheduled (identical request)"
        click.echo(f"{done.job_id}: {verb}, runs at {render.when(done.next_run_at)}")
        for warning in done.warnings:
            click.echo(f"line {number}: warning: {warning}", err=True)
        return
    for field, reason in result.problems():
        click.echo(f"line {number}: error: {f'{field}: ' if field else ''}{reason}", err=True)


def item_json(number: int, result: operations.ItemResult) -> dict[str, Any]:
    """A result as ``--json`` prints it: the scheduled job, or the exit code a single
    ``jobctl schedule`` would give and the problems."""
    if result.scheduled is not None:
        return {"line": number, "ok": True, **result.scheduled.model_dump(mode="json")}
    assert result.error is not None
    detail: Any = str(result.error)
    if isinstance(result.error, SpecError):
        detail = [{"field": field, "reason": reason} for field, reason in result.problems()]
    return {"line": number, "ok": False, "exit_code": result.error.exit_code, "detail": detail}


@click.command()
@job_id_argument
@json_option
def status(job_id: str, as_json: bool) -> None:
    """A job's status and attempt history."""
    report = run(lambda client: operations.status(client, job_id))
    click.echo(report.model_dump_json(indent=2) if as_json else render.any_report_text(report))


@click.command(name="list")
@click.option(
    "--status",
    "status_",
    type=click.Choice([s.value for s in JobStatus]),
    help="Only jobs in this status (the one `jobctl status` shows).",
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
    show_page(
        page, ["id", "kind", "name", "handler", "status", "time"], rows, as_json, "jobctl list"
    )


@click.command()
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


@click.command()
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


@click.command()
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


@click.command()
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
