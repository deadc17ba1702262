"""``jobctl batch status|cancel ID`` and ``jobctl schedule --from-file F --batch ID``: named
batches of jobs with callbacks (docs/batches.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from jobctl.starter import render, strictjson
from jobctl.starter.cli.common import cli_actor, emit, json_option, note_option, run
from jobctl.starter.errors import SpecError
from jobctl.starter.operations import batch_check, batches
from jobctl.workflows.models.batch import BatchReport


def read_callback(name: str, text: str | None) -> Any:
    """``--on-complete`` / ``--on-success``: a job spec as JSON, or ``@path``."""
    if text is None:
        return None
    field = f"batch.{name}"
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text()
        except (OSError, UnicodeDecodeError) as err:
            raise SpecError([(field, f"cannot read {text[1:]}: {err}")]) from err
    try:
        return strictjson.loads(text)
    except strictjson.JSONRefused as err:
        raise SpecError([(field, err.reason)]) from err


def schedule_batch_file(
    specs: list[Any], batch_id: str, on_complete: str | None, on_success: str | None, as_json: bool
) -> None:
    """The specs of a file as one batch: all or nothing (exit 2 with every problem, 4 when the
    batch id or a callback id is taken)."""
    batch: dict[str, Any] = {"id": batch_id}
    for name, text in (("on_complete", on_complete), ("on_success", on_success)):
        value = read_callback(name, text)
        if value is not None:
            batch[name] = value
    now = datetime.now(UTC)
    checked = batch_check.check_batch_request(batch, specs, now)  # exits 2 without Temporal
    scheduled = run(lambda client: batches.start_batch(client, checked))
    if as_json:
        emit(scheduled)
        return
    verb = "scheduled" if scheduled.created else "already scheduled (identical request)"
    click.echo(f"{verb} batch {scheduled.batch_id}: {scheduled.total} jobs")
    for name, job_id in scheduled.callbacks.items():
        click.echo(f"  {name}: {job_id}")


@click.group()
def batch() -> None:
    """Batches: jobs scheduled together, with callbacks once every one has settled."""


@batch.command(name="status")
@click.argument("batch_id")
@json_option
def batch_status(batch_id: str, as_json: bool) -> None:
    """Counts by outcome, settled/total, the ids not done, the callbacks' state."""
    report = run(lambda client: batches.batch_status(client, batch_id))
    if as_json:
        emit(report)
    else:
        show(report)


@batch.command(name="cancel")
@click.argument("batch_id")
@note_option
@json_option
def batch_cancel(batch_id: str, note: str | None, as_json: bool) -> None:
    """Cancel every unsettled member; the callbacks then run with them counted cancelled."""
    report = run(lambda client: batches.cancel_batch(client, batch_id, note, cli_actor()))
    if as_json:
        emit(report)
    else:
        click.echo(f"cancel sent to batch {batch_id}: {report.unsettled} member(s) unsettled")


def show(report: BatchReport) -> None:
    click.echo(f"batch {report.batch_id}: {report.status}")
    click.echo(f"  settled    {report.settled}/{report.total} ({report.started} started)")
    counts = ", ".join(f"{key} {n}" for key, n in report.counts.items() if n) or "none yet"
    click.echo(f"  outcomes   {counts}")
    for key, ids in (("dead", report.dead), ("cancelled", report.cancelled)):
        if ids:
            shown = ", ".join(ids[:10]) + (f" (+{len(ids) - 10})" if len(ids) > 10 else "")
            click.echo(f"  {key:<10} {shown}")
    for name, record in report.callbacks.items():
        when = f" at {render.when(record.started_at)}" if record.started_at else ""
        click.echo(f"  {name:<10} {record.job_id}: {record.state}{when}")
    if report.cancel is not None:
        click.echo(f"  cancelled  by {report.cancel.actor} at {render.when(report.cancel.at)}")
    if report.rejected:
        click.echo(f"  rejected   {report.rejected} message(s); latest: {report.rejections[-1]}")
