"""Scheduling, reading and controlling jobs: ``schedule``, ``status``, ``list``, ``cancel``,
``pause``, ``resume``, ``trigger``."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from connection import tracing
from starter import operations, render
from starter.cli.common import (
    cli_actor,
    control,
    emit,
    job_id_argument,
    json_option,
    note_option,
    run,
    show_page,
)
from starter.cli.spec import build_spec, spec_options
from workflows.models import JobStatus


@click.command()
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
